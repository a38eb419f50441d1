package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
			args := tc.args
			if tc.file != "" {
				path := filepath.Join(t.TempDir(), "server.properties")
				if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append([]string{"--config", path}, args...)
			}
			opts, err := parseServe(args)
			var c clusterSettings
			if err == nil {
				c, err = clusterOf(opts)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
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

// Several voters are refused before anything is opened, until the broker passes them to
// its node; one naming this node alone starts as a lone voter would.
func TestServeRefusesSeveralVoters(t *testing.T) {
	opts := defaultServeOptions()
	opts.nodeID, opts.voters, opts.controllerListen = 1, "1@127.0.0.1:19093,2@127.0.0.1:19094,3@127.0.0.1:19095", "127.0.0.1:19093"
	opts.dataDir = filepath.Join(t.TempDir(), "data")
	if err := serve(opts); !errors.Is(err, errMultiNodeUnwired) {
		t.Fatalf("serve with three voters: %v, want %v", err, errMultiNodeUnwired)
	}
	if _, err := os.Stat(opts.dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused serve created its data directory: %v", err)
	}
}
