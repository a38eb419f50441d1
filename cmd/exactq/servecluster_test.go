package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClusterSettings: the cluster flags and properties keys (Kafka's spelling) parse into
// clusterSettings, flags win over the file, and every misconfiguration is refused with an
// error naming it.
func TestClusterSettings(t *testing.T) {
	const three = "1@10.0.0.1:9093,2@10.0.0.2:9093,3@10.0.0.3:9093"
	for _, tc := range []struct {
		name   string
		args   []string
		file   string
		err    string // "" = valid
		voters int
		ctl    string // the controller listener
		listen string // the client listener, when the case sets it
		dir    string // the data directory, when the case sets it
	}{
		{name: "zero-config", args: nil},
		{name: "flags", args: []string{"--node-id", "2", "--voters", three, "--controller-listen", "0.0.0.0:9093"}, voters: 3, ctl: "0.0.0.0:9093"},
		{name: "kafka properties", file: "node.id=1\nprocess.roles=broker,controller\ncontroller.quorum.voters=" + three + "\n" +
			"listeners=PLAINTEXT://:9092,CONTROLLER://10.0.0.1:9093\ncontroller.listener.names=CONTROLLER\nlog.dirs=/var/lib/exactq\n",
			voters: 3, ctl: "10.0.0.1:9093", listen: ":9092", dir: "/var/lib/exactq"},
		{name: "roles in either order", file: "process.roles = controller, broker\n"},
		{name: "flags win", args: []string{"--controller-listen", "127.0.0.1:19093", "--listen", "127.0.0.1:19092"},
			file:   "node.id=1\ncontroller.quorum.voters=" + three + "\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n",
			voters: 3, ctl: "127.0.0.1:19093", listen: "127.0.0.1:19092"},
		{name: "one voter, this node: a lone voter", file: "node.id=1\ncontroller.quorum.voters=1@localhost:9093\n" +
			"listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n", voters: 1, ctl: ""},
		{name: "broker only", file: "process.roles=broker\n", err: "broker-only nodes come with learners"},
		{name: "controller only", args: []string{"--process-roles", "controller"}, err: "controller-only nodes are not supported"},
		{name: "unknown role", file: "process.roles=broker,voter\n", err: `unknown role "voter"`},
		{name: "not among the voters", args: []string{"--node-id", "4", "--voters", three, "--controller-listen", ":9093"}, err: "names only [1 2 3]"},
		{name: "duplicate id", args: []string{"--voters", "1@a:9093,1@b:9093", "--controller-listen", ":9093"}, err: "listed twice"},
		{name: "bad voter address", args: []string{"--voters", "1@a:9093,2@b", "--controller-listen", ":9093"}, err: "missing port"},
		{name: "voter without host", args: []string{"--voters", "1@a:9093,2@:9093", "--controller-listen", ":9093"}, err: "no host"},
		{name: "no controller listener", args: []string{"--voters", three}, err: "no controller listener"},
		{name: "bad controller listener", args: []string{"--voters", three, "--controller-listen", "9093"}, err: "missing port"},
		{name: "controller listener without voters", args: []string{"--controller-listen", ":9093"}, err: "without --voters"},
		{name: "same listener twice", args: []string{"--voters", three, "--controller-listen", "127.0.0.1:9092"}, err: "both 127.0.0.1:9092"},
		{name: "negative node id", args: []string{"--node-id", "-1"}, err: "node.id must be from 0"},
		{name: "two log dirs", file: "log.dirs=/a,/b\n", err: "one data directory"},
		{name: "unknown listener", file: "listeners=PLAINTEXT://:9092,INTERNAL://:9094\n", err: "one client listener"},
		{name: "controller name without entry", file: "listeners=PLAINTEXT://:9092\ncontroller.listener.names=CONTROLLER\n", err: "no CONTROLLER:// entry"},
		{name: "two controller names", file: "listeners=PLAINTEXT://:9092\ncontroller.listener.names=A,B\n", err: "one controller listener"},
		{name: "listener without scheme", file: "listeners=:9092\n", err: "not NAME://host:port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := parseServeWithFile(t, tc.file, tc.args)
			var c clusterSettings
			if err == nil {
				c, err = clusterOf(opts)
			}
			if !wantErr(t, err, tc.err) {
				return
			}
			if len(c.Voters) != tc.voters || c.ControllerListen != tc.ctl {
				t.Fatalf("voters %v controller listener %q, want %d voters and %q", c.Voters, c.ControllerListen, tc.voters, tc.ctl)
			}
			if tc.listen != "" && opts.listen != tc.listen {
				t.Fatalf("listen %q, want %q", opts.listen, tc.listen)
			}
			if tc.dir != "" && opts.dataDir != tc.dir {
				t.Fatalf("data dir %q, want %q", opts.dataDir, tc.dir)
			}
			for _, k := range []string{"listeners", "controller.listener.names", "log.dirs", "controller.quorum.voters", "process.roles"} {
				if _, ok := opts.brokerConfigs[k]; ok {
					t.Fatalf("%s passed to the broker as a topic-default config", k)
				}
			}
		})
	}
}

// parseServeWithFile parses args after a --config file holding file (none when empty).
func parseServeWithFile(t *testing.T, file string, args []string) (serveOptions, error) {
	if file != "" {
		path := filepath.Join(t.TempDir(), "server.properties")
		if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"--config", path}, args...)
	}
	return parseServe(args)
}

// wantErr fails t unless err matches want ("" = no error, else a substring of it); it
// reports whether the case goes on (no error wanted, none had).
func wantErr(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v, want one with %q", err, want)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// advertised.listeners and the broker heartbeat keys (Kafka's spelling, in milliseconds)
// set their flags; flags win, and what exactq cannot serve is refused.
func TestAdvertisedAndHeartbeatKeys(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string
		err        string
		advertised string
		heartbeat  time.Duration
		session    time.Duration
	}{
		{name: "defaults", heartbeat: 2 * time.Second, session: 9 * time.Second},
		{name: "kafka keys", file: "advertised.listeners=PLAINTEXT://broker1.example:19092,CONTROLLER://broker1.example:9093\n" +
			"broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000\n",
			advertised: "broker1.example:19092", heartbeat: 500 * time.Millisecond, session: 3 * time.Second},
		{name: "flags win", file: "advertised.listeners=PLAINTEXT://a:1\nbroker.session.timeout.ms=3000\n",
			args: []string{"--advertised", "b:2", "--broker-session-timeout", "4s"}, advertised: "b:2", heartbeat: 2 * time.Second, session: 4 * time.Second},
		{name: "other listener", file: "advertised.listeners=SSL://a:1\n", err: "one client listener"},
		{name: "no port", file: "advertised.listeners=PLAINTEXT://a\n", err: "missing port"},
		{name: "not a number", file: "broker.heartbeat.interval.ms=fast\n", err: "invalid syntax"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := parseServeWithFile(t, tc.file, tc.args)
			if !wantErr(t, err, tc.err) {
				return
			}
			if opts.advertised != tc.advertised || opts.heartbeatInterval != tc.heartbeat || opts.sessionTimeout != tc.session {
				t.Fatalf("advertised %q heartbeat %v session %v, want %q %v %v", opts.advertised, opts.heartbeatInterval, opts.sessionTimeout,
					tc.advertised, tc.heartbeat, tc.session)
			}
			for _, k := range []string{"advertised.listeners", "broker.heartbeat.interval.ms", "broker.session.timeout.ms"} {
				if _, ok := opts.brokerConfigs[k]; ok {
					t.Fatalf("%s passed to the broker as a topic-default config", k)
				}
			}
		})
	}
}

// A session timeout not above the heartbeat interval would fence every broker between
// two heartbeats: refused before anything is opened.
func TestServeRefusesSessionWithinHeartbeat(t *testing.T) {
	opts := defaultServeOptions()
	opts.heartbeatInterval, opts.sessionTimeout = 2*time.Second, time.Second
	opts.dataDir = filepath.Join(t.TempDir(), "data")
	if err := serve(opts); err == nil || !strings.Contains(err.Error(), "must be longer") {
		t.Fatalf("serve: %v, want the refusal", err)
	}
	if _, err := os.Stat(opts.dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused serve created its data directory: %v", err)
	}
}

// A cluster node listening on every address must say which one its clients reach: the
// unspecified address would be given to other brokers' clients. Refused before its data
// directory is made.
func TestServeRefusesUnroutableAdvertisedInACluster(t *testing.T) {
	opts := defaultServeOptions()
	opts.nodeID, opts.listen = 1, "0.0.0.0:0"
	opts.voters, opts.controllerListen = "1@127.0.0.1:19093,2@127.0.0.1:19094,3@127.0.0.1:19095", "127.0.0.1:19093"
	opts.dataDir = filepath.Join(t.TempDir(), "data")
	if err := serve(opts); err == nil || !strings.Contains(err.Error(), "must advertise a host") {
		t.Fatalf("serve: %v, want the refusal", err)
	}
	if _, err := os.Stat(opts.dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused serve created its data directory: %v", err)
	}
}
