package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/magiconair/properties"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/server"
)

// serveOptions are the broker's settings, from an optional properties file and then flags
// (flags win).
type serveOptions struct {
	listen          string
	advertised      string
	dataDir         string
	nodeID          int
	fsync           string
	maxRequestBytes int
	maxConnections  int
	// maxConnectionsPerIP: -1 takes the server's default; 0 admits only overridden
	// addresses (Kafka's max.connections.per.ip=0).
	maxConnectionsPerIP          int
	maxConnectionsPerIPOverrides string
	plaintextMaxConnections      int   // listener.name.plaintext.max.connections; 0: none
	queuedMaxRequestBytes        int64 // queued.max.request.bytes; <= 0: unbounded, as in Kafka
	idleTimeout                  time.Duration
	autoCreate                   bool
	logLevel                     string
	metricsListen                string
	txnShareAckKey               int
	brokerConfigs                map[string]string // Kafka broker config names (log.retention.ms, ...)
	// The cluster settings (servecluster.go checks them): Kafka's process.roles,
	// controller.quorum.voters and the controller listener.
	processRoles     string
	voters           string
	controllerListen string
	// Kafka's broker.heartbeat.interval.ms and broker.session.timeout.ms.
	heartbeatInterval time.Duration
	sessionTimeout    time.Duration
}

func defaultServeOptions() serveOptions {
	return serveOptions{
		listen:                "127.0.0.1:9092",
		dataDir:               "./exactq-data",
		nodeID:                1,
		fsync:                 "always",
		maxRequestBytes:       int(server.DefaultMaxRequestBytes),
		maxConnections:        server.DefaultMaxConnections,
		maxConnectionsPerIP:   -1,
		queuedMaxRequestBytes: server.DefaultQueuedMaxRequestBytes,
		idleTimeout:           server.DefaultIdleTimeout,
		autoCreate:            true,
		logLevel:              "info",
		brokerConfigs:         map[string]string{},
		processRoles:          "broker,controller",
		heartbeatInterval:     2 * time.Second,
		sessionTimeout:        9 * time.Second,
	}
}

// fileKeys maps properties-file keys to the flag they set. Any other key is passed to the
// broker as a Kafka broker config (log.retention.hours=24 and the like).
var fileKeys = map[string]string{
	"listen": "listen", "advertised": "advertised", "data.dir": "data-dir", "node.id": "node-id",
	"fsync": "fsync", "socket.request.max.bytes": "max-request-bytes",
	"max.connections": "max-connections", "connections.max.idle.ms": "idle-timeout",
	"max.connections.per.ip":                  "max-connections-per-ip",
	"max.connections.per.ip.overrides":        "max-connections-per-ip-overrides",
	"listener.name.plaintext.max.connections": "plaintext-max-connections",
	"queued.max.request.bytes":                "queued-max-request-bytes",
	"auto.create.topics.enable":               "auto-create-topics", "log.level": "log-level",
	"metrics.listen": "metrics-listen",
	"process.roles":  "process-roles", "controller.quorum.voters": "voters",
	"broker.heartbeat.interval.ms": "broker-heartbeat-interval", "broker.session.timeout.ms": "broker-session-timeout",
}

// msKeys are the file keys given in milliseconds whose flags are durations.
var msKeys = map[string]bool{"connections.max.idle.ms": true, "broker.heartbeat.interval.ms": true, "broker.session.timeout.ms": true}

// serveFlags defines serve's flags on fs, bound to opts (which holds their defaults), and
// returns the --config flag's value.
func serveFlags(fs *pflag.FlagSet, opts *serveOptions) *string {
	configFile := fs.String("config", "", "Java properties file (Kafka's server.properties syntax); flags override it")
	fs.StringVar(&opts.listen, "listen", opts.listen, "address to listen on")
	fs.StringVar(&opts.advertised, "advertised", "", "host:port advertised to clients (default: the listen address)")
	fs.StringVar(&opts.dataDir, "data-dir", opts.dataDir, "data directory")
	fs.IntVar(&opts.nodeID, "node-id", opts.nodeID, "this broker's node id")
	fs.StringVar(&opts.fsync, "fsync", opts.fsync, "always: acks=all answered after fsync (group commit); never: leave flushing to the OS")
	fs.IntVar(&opts.maxRequestBytes, "max-request-bytes", opts.maxRequestBytes, "largest request accepted (socket.request.max.bytes)")
	fs.IntVar(&opts.maxConnections, "max-connections", opts.maxConnections, "most client connections at once")
	fs.IntVar(&opts.maxConnectionsPerIP, "max-connections-per-ip", opts.maxConnectionsPerIP,
		fmt.Sprintf("most connections from one address (max.connections.per.ip); -1: %d, at most 9/10 of --max-connections; 0: only addresses in --max-connections-per-ip-overrides", server.DefaultMaxConnectionsPerIP))
	fs.StringVar(&opts.maxConnectionsPerIPOverrides, "max-connections-per-ip-overrides", "", "per-address limits, host:count,... (max.connections.per.ip.overrides)")
	fs.IntVar(&opts.plaintextMaxConnections, "plaintext-max-connections", 0, "most connections on the PLAINTEXT listener (listener.name.plaintext.max.connections); 0: only --max-connections")
	fs.Int64Var(&opts.queuedMaxRequestBytes, "queued-max-request-bytes", opts.queuedMaxRequestBytes,
		"memory for requests being read, decoded or queued, over all connections (queued.max.request.bytes); -1: unbounded")
	fs.DurationVar(&opts.idleTimeout, "idle-timeout", opts.idleTimeout, "close connections idle this long")
	fs.BoolVar(&opts.autoCreate, "auto-create-topics", opts.autoCreate, "create unknown topics a client asks for in Metadata")
	fs.StringVar(&opts.logLevel, "log-level", opts.logLevel, "debug, info, warn or error")
	fs.StringVar(&opts.metricsListen, "metrics-listen", "", "serve Prometheus metrics at http://ADDR/metrics (off when empty)")
	fs.StringVar(&opts.processRoles, "process-roles", opts.processRoles, "broker,controller (a broker and a metadata voter; the only roles for now)")
	fs.StringVar(&opts.voters, "voters", "", "the metadata quorum's voters and their controller listeners, id@host:port,... (controller.quorum.voters); empty: this node alone")
	fs.StringVar(&opts.controllerListen, "controller-listen", "", "where the controller listener binds (raft messages and controller requests); voters of a several-node quorum only")
	fs.DurationVar(&opts.heartbeatInterval, "broker-heartbeat-interval", opts.heartbeatInterval, "how often the broker heartbeats to the controller (broker.heartbeat.interval.ms)")
	fs.DurationVar(&opts.sessionTimeout, "broker-session-timeout", opts.sessionTimeout, "a broker not heard from this long is fenced by the controller, its partitions leaderless (broker.session.timeout.ms)")
	fs.IntVar(&opts.txnShareAckKey, "txn-share-ack-key", 95, "API key of KIP-1289's TxnShareAcknowledge; -1 turns transactional share acknowledgements off")
	return configFile
}

// applyConfigFile reads a Java properties file, as Kafka reads server.properties
// (java.util.Properties.load of the file's bytes: ISO-8859-1, "=", ":" or whitespace
// separators, "#" and "!" comments, "\" line continuations, \t \n \uXXXX escapes), and
// applies each key to its flag unless the flag was given on the command line (fs.Changed).
// No path: nothing to apply.
// Values are trimmed, as Kafka's ConfigDef trims them.
func applyConfigFile(path string, fs *pflag.FlagSet, brokerConfigs map[string]string) error {
	if path == "" {
		return nil
	}
	buf, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// DisableExpansion: java.util.Properties has no ${key} expansion; "${x}" is a value.
	loader := properties.Loader{Encoding: properties.ISO_8859_1, DisableExpansion: true}
	props, err := loader.LoadBytes(buf)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var fl fileListeners
	for _, k := range props.Keys() {
		raw, _ := props.Get(k)
		v := strings.TrimSpace(raw)
		if fl.take(k, v) {
			continue
		}
		if err := applyConfigKey(fs, k, v, brokerConfigs); err != nil {
			return fmt.Errorf("%s: %s: %w", path, k, err)
		}
	}
	if err := fl.resolve(fs); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// applyConfigKey sets the flag a file key maps to (fileKeys) or records it as a broker config.
func applyConfigKey(fs *pflag.FlagSet, k, v string, brokerConfigs map[string]string) error {
	flagName, isFlag := fileKeys[k]
	if !isFlag && strings.HasPrefix(k, "listener.name.") {
		// exactq has one listener, PLAINTEXT; a limit for another would be ignored.
		return errors.New("exactq has no such listener (only listener.name.plaintext.*)")
	}
	if k == "log.dirs" || k == "log.dir" {
		return logDirs(fs, v)
	}
	if k == "advertised.listeners" {
		return advertisedListeners(fs, v)
	}
	if !isFlag {
		brokerConfigs[k] = v
		return nil
	}
	if fs.Changed(flagName) {
		return nil
	}
	if msKeys[k] {
		ms, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		v = (time.Duration(ms) * time.Millisecond).String()
	}
	return fs.Set(flagName, v)
}

func serve(opts serveOptions) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(opts.logLevel)); err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cluster, err := clusterOf(opts)
	if err != nil {
		return err
	}
	if opts.heartbeatInterval <= 0 || opts.sessionTimeout <= opts.heartbeatInterval {
		return fmt.Errorf("broker.session.timeout.ms (%v) must be longer than broker.heartbeat.interval.ms (%v), which must be positive",
			opts.sessionTimeout, opts.heartbeatInterval)
	}
	var fsync broker.FsyncPolicy
	switch opts.fsync {
	case "always":
		fsync = broker.FsyncAlways
	case "never":
		fsync = broker.FsyncNever
	default:
		return fmt.Errorf("fsync must be always or never, not %q", opts.fsync)
	}
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return err
	}
	advertised := opts.advertised
	if advertised == "" {
		advertised = ln.Addr().String()
	}
	host, portStr, err := net.SplitHostPort(advertised)
	if err != nil {
		return fmt.Errorf("advertised address: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("advertised port: %w", err)
	}
	if ip := net.ParseIP(host); len(cluster.Voters) > 1 && (host == "" || (ip != nil && ip.IsUnspecified())) {
		// The other brokers' clients are sent here: Kafka refuses the same
		// ("advertised.listeners cannot use the nonroutable meta-address").
		return errors.Join(fmt.Errorf("advertised address %s: a cluster node must advertise a host its clients can reach (--advertised or advertised.listeners)", advertised), ln.Close())
	}
	if err := os.MkdirAll(opts.dataDir, 0o755); err != nil {
		return err
	}
	b, err := broker.Open(broker.Config{
		DataDir:           opts.dataDir,
		NodeID:            int32(opts.nodeID),
		AdvertisedHost:    host,
		AdvertisedPort:    int32(port),
		AutoCreateTopics:  opts.autoCreate,
		Fsync:             fsync,
		BrokerConfigs:     opts.brokerConfigs,
		TxnShareAckKey:    int16(opts.txnShareAckKey),
		Voters:            cluster.Voters,
		ControllerListen:  cluster.ControllerListen,
		HeartbeatInterval: opts.heartbeatInterval,
		SessionTimeout:    opts.sessionTimeout,
		Logger:            logger,
	})
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	limits, err := connectionLimits(opts)
	if err == nil {
		limits.QueuedMaxRequestBytes, err = queuedMaxRequestBytes(opts)
	}
	if err != nil {
		return errors.Join(err, ln.Close(), b.Close())
	}
	srv := server.New(server.Config{
		MaxRequestBytes:              int32(opts.maxRequestBytes),
		MaxConnections:               opts.maxConnections,
		MaxConnectionsPerIP:          limits.MaxConnectionsPerIP,
		MaxConnectionsPerIPOverrides: limits.MaxConnectionsPerIPOverrides,
		Listeners:                    limits.Listeners,
		QueuedMaxRequestBytes:        limits.QueuedMaxRequestBytes,
		IdleTimeout:                  opts.idleTimeout,
		ClusterID:                    b.ClusterID(),
		NodeID:                       int32(opts.nodeID),
	}, b, logger)

	if opts.metricsListen != "" {
		stop, err := serveMetrics(opts.metricsListen, b, logger, serverMetrics(srv)...)
		if err != nil {
			return errors.Join(err, srv.Close(), b.Close())
		}
		defer stop()
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	// The line tests and scripts wait for: the broker is accepting connections.
	logger.Info("exactq serving", "listen", ln.Addr().String(), "advertised", advertised, "data_dir", opts.dataDir, "fsync", opts.fsync)

	select {
	case sig := <-sigs:
		logger.Info("shutting down", "signal", sig.String())
	case err := <-errc:
		if err != nil && !errors.Is(err, server.ErrServerClosed) {
			return errors.Join(err, b.Close())
		}
	}
	// Finish in-flight requests, then make every log durable.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		logger.Warn("shutdown did not finish cleanly", "err", err)
	}
	if err := b.Close(); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// connectionLimits turns the connection-limit options into server.Config fields, refusing
// what Kafka refuses (max.connections.per.ip=0 without overrides).
func connectionLimits(opts serveOptions) (server.Config, error) {
	var cfg server.Config
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	overrides, err := server.ParseConnectionsPerIPOverrides(ctx, opts.maxConnectionsPerIPOverrides)
	if err != nil {
		return cfg, err
	}
	cfg.MaxConnectionsPerIPOverrides = overrides
	switch {
	case opts.maxConnectionsPerIP == 0 && len(overrides) == 0:
		return cfg, errors.New("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides is set")
	case opts.maxConnectionsPerIP == 0:
		cfg.MaxConnectionsPerIP = server.NoConnectionsPerIP
	case opts.maxConnectionsPerIP > 0:
		cfg.MaxConnectionsPerIP = opts.maxConnectionsPerIP
	case opts.maxConnectionsPerIP != -1:
		return cfg, fmt.Errorf("max.connections.per.ip must be -1 (default) or at least 0, not %d", opts.maxConnectionsPerIP)
	}
	if opts.plaintextMaxConnections < 0 {
		return cfg, fmt.Errorf("listener.name.plaintext.max.connections must be at least 0, not %d", opts.plaintextMaxConnections)
	}
	if opts.plaintextMaxConnections > 0 {
		cfg.Listeners = map[string]server.ListenerConfig{
			server.DefaultListenerName: {MaxConnections: opts.plaintextMaxConnections},
		}
	}
	return cfg, nil
}

// queuedMaxRequestBytes checks queued.max.request.bytes against socket.request.max.bytes.
// Kafka requires at least socket.request.max.bytes; exactq needs more, since a largest frame
// must fit in one connection's share of the frame half of the budget.
func queuedMaxRequestBytes(opts serveOptions) (int64, error) {
	if opts.queuedMaxRequestBytes <= 0 {
		return -1, nil // unbounded, as Kafka's -1
	}
	if min := server.MinQueuedMaxRequestBytes(int32(opts.maxRequestBytes)); opts.queuedMaxRequestBytes < min {
		return 0, fmt.Errorf("queued.max.request.bytes must be at least %d with socket.request.max.bytes %d (or -1: unbounded), not %d",
			min, opts.maxRequestBytes, opts.queuedMaxRequestBytes)
	}
	return opts.queuedMaxRequestBytes, nil
}

// serverMetrics are the wire layer's gauges.
func serverMetrics(srv *server.Server) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "exactq_queued_request_bytes",
			Help: "Request memory charged against queued.max.request.bytes: frames being read, decoded or queued, and what decoding them allocates.",
		}, func() float64 { return float64(srv.QueuedRequestBytes()) }),
	}
}
