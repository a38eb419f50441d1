// Package kafka runs Apache Kafka on loopback as the reference system of the bench driver:
// it resolves the broker's jars with Maven into a local cache, formats a single-node KRaft
// data directory and starts `kafka.Kafka` with replication factor 1 for the internal topics
// and share groups on. Test and bench tooling only: exactq never depends on Kafka.
package kafka

import (
	"bufio"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Version is the Apache Kafka release the bench compares with.
const Version = "4.4.0"

//go:embed pom.xml
var pom []byte

// JVMFlags are the heap and GC options of Kafka's own bin/kafka-server-start.sh and
// bin/kafka-run-class.sh (KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS defaults), so that
// the reference runs as a user who starts Kafka from its distribution would run it.
var JVMFlags = []string{
	"-Xmx1G", "-Xms1G", "-server",
	"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
	"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
}

// CacheDir is where Resolve puts the jars of version: $EXACTQ_KAFKA_CACHE if set, else
// <user cache dir>/exactq-bench/kafka-<version> (~/.cache/exactq-bench/kafka-4.4.0 on Linux).
func CacheDir(version string) (string, error) {
	if d := os.Getenv("EXACTQ_KAFKA_CACHE"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "exactq-bench", "kafka-"+version), nil
}

// Resolve makes sure the jars of Kafka version (the broker kafka_2.13 with its runtime
// dependencies and a log4j2 backend) are in cacheDir/libs, running Maven
// (`mvn dependency:copy-dependencies` on the embedded pom.xml) the first time; later calls
// only check for the marker file. It returns the libs directory.
func Resolve(ctx context.Context, cacheDir, version string, log io.Writer) (string, error) {
	libs := filepath.Join(cacheDir, "libs")
	marker := filepath.Join(cacheDir, "resolved")
	if _, err := os.Stat(marker); err == nil {
		return libs, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	pomPath := filepath.Join(cacheDir, "pom.xml")
	if err := os.WriteFile(pomPath, pom, 0o644); err != nil {
		return "", err
	}
	if err := os.RemoveAll(libs); err != nil {
		return "", err
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("kafka: Maven (mvn) is needed to fetch Apache Kafka %s: %w", version, err)
	}
	if log != nil {
		fmt.Fprintf(log, "resolving org.apache.kafka:kafka_2.13:%s with Maven into %s\n", version, libs)
	}
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "-f", pomPath, "dependency:copy-dependencies",
		"-Dkafka.version="+version, "-DoutputDirectory="+libs)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kafka: mvn dependency:copy-dependencies: %w\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(libs, "kafka_2.13-"+version+".jar")); err != nil {
		return "", fmt.Errorf("kafka: Maven did not produce kafka_2.13-%s.jar: %w", version, err)
	}
	return libs, os.WriteFile(marker, []byte(version+"\n"), 0o644)
}

// Options say how to start Kafka.
type Options struct {
	Dir     string // working directory: data, config and logs go here (must exist or be creatable)
	Version string // default Version
	// Cache is where the jars are kept (default CacheDir(Version)).
	Cache string
	Java  string   // java binary (default $JAVA_HOME/bin/java, else java on PATH)
	JVM   []string // JVM options (default JVMFlags)
	// Props are extra server.properties lines (key → value), applied over the defaults.
	Props        map[string]string
	Log          io.Writer // progress lines (resolving, formatting, started); nil for none
	StartTimeout time.Duration
	// Existing restarts Kafka on a Dir an earlier StartBroker formatted and stopped: no
	// format, the same server.properties (so the same ports) and data. Props are ignored.
	Existing bool
	// NoWait returns as soon as the JVM is started, without waiting until it serves; the
	// caller polls (WaitReady, or its own requests) and Started is when the JVM was launched.
	NoWait bool
}

// Broker is a running single-node Kafka (broker and controller in one process).
type Broker struct {
	Addr    string // bootstrap address, 127.0.0.1:port
	Pid     int
	Dir     string
	Elapsed time.Duration // from format (or, with Existing, from launch) to serving; 0 with NoWait
	Started time.Time     // when the JVM was launched

	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// Start starts a single-node Kafka on loopback with a fresh data directory under dir and
// returns its bootstrap address and a function that stops it (SIGTERM, then SIGKILL after
// 30 s). The first call on a machine downloads the jars with Maven.
func Start(ctx context.Context, dir string) (bootstrap string, stop func(), err error) {
	b, err := StartBroker(ctx, Options{Dir: dir})
	if err != nil {
		return "", nil, err
	}
	return b.Addr, b.Stop, nil
}

// StartBroker is Start with options; the Broker also gives the JVM's pid (for CPU and
// memory accounting).
func StartBroker(ctx context.Context, opts Options) (*Broker, error) {
	if opts.Version == "" {
		opts.Version = Version
	}
	if opts.Cache == "" {
		c, err := CacheDir(opts.Version)
		if err != nil {
			return nil, err
		}
		opts.Cache = c
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if len(opts.JVM) == 0 {
		opts.JVM = JVMFlags
	}
	java := opts.Java
	if java == "" {
		java = "java"
		if h := os.Getenv("JAVA_HOME"); h != "" {
			java = filepath.Join(h, "bin", "java")
		}
	}
	if _, err := exec.LookPath(java); err != nil {
		return nil, fmt.Errorf("kafka: a Java runtime (17+) is needed: %w", err)
	}
	libs, err := Resolve(ctx, opts.Cache, opts.Version, opts.Log)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	propsPath := filepath.Join(dir, "server.properties")
	log4j := filepath.Join(dir, "log4j2.yaml")
	addr, err := "", error(nil)
	if opts.Existing {
		if addr, err = listenAddr(propsPath); err != nil {
			return nil, err
		}
	} else if addr, err = format(ctx, java, libs, dir, propsPath, log4j, opts.Props); err != nil {
		return nil, err
	}
	cp := filepath.Join(libs, "*")

	args := append(append([]string{}, opts.JVM...), "-Dlog4j2.configurationFile="+log4j, "-cp", cp, "kafka.Kafka", propsPath)
	cmd := exec.Command(java, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, err
	}
	b := &Broker{Addr: addr, Pid: cmd.Process.Pid, Dir: dir, Started: time.Now(), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); out.Close(); close(b.done) }()
	if opts.Log != nil {
		fmt.Fprintf(opts.Log, "starting Apache Kafka %s (pid %d) on %s in %s\n", opts.Version, b.Pid, addr, dir)
	}
	if opts.NoWait {
		return b, nil
	}
	if err := b.WaitReady(ctx, opts.StartTimeout); err != nil {
		b.Stop()
		return nil, err
	}
	if opts.Existing {
		t0 = b.Started
	}
	b.Elapsed = time.Since(t0)
	if opts.Log != nil {
		fmt.Fprintf(opts.Log, "Apache Kafka %s serving on %s after %v\n", opts.Version, addr, b.Elapsed.Round(time.Millisecond))
	}
	return b, nil
}

// WaitReady waits until the broker answers a metadata request (polling every 200 ms); on
// failure the error carries the tail of Kafka's logs.
func (b *Broker) WaitReady(ctx context.Context, timeout time.Duration) error {
	if err := b.waitReady(ctx, timeout); err != nil {
		return fmt.Errorf("kafka: %w\n%s", err, tail(filepath.Join(b.Dir, "stdout.log"), filepath.Join(b.Dir, "server.log")))
	}
	return nil
}

func (b *Broker) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		select {
		case <-b.done:
			return errors.New("exited during start-up")
		case <-ctx.Done():
			return fmt.Errorf("not serving on %s after %v: %w", b.Addr, timeout, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		c, err := net.DialTimeout("tcp", b.Addr, time.Second)
		if err != nil {
			continue
		}
		c.Close()
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
		if err != nil {
			return err
		}
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		err = cl.Ping(pctx)
		pcancel()
		cl.Close()
		if err == nil {
			return nil
		}
	}
}

// Done is closed once the JVM has exited.
func (b *Broker) Done() <-chan struct{} { return b.done }

// Stop stops the broker (SIGTERM, SIGKILL to its process group after 30 s) and waits for it.
func (b *Broker) Stop() {
	b.once.Do(func() {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-b.Pid, syscall.SIGKILL)
			<-b.done
		}
	})
}

// ServerProperties is the server.properties of a single-node KRaft Kafka on loopback:
// broker and controller in one process (node.id 1, a static one-voter quorum), plaintext
// listeners on 127.0.0.1, replication factor and min.insync.replicas 1 for the internal
// topics (__consumer_offsets, __transaction_state, __share_group_state), and Kafka's
// defaults otherwise, notably no fsync before acknowledging (log.flush.* unset: the OS page
// cache and replication give durability). Share groups need no setting in 4.4: formatting
// at the latest metadata version (4.4-IV2) enables share.version=2.
func ServerProperties(dataDir string, port, controllerPort int) map[string]string {
	return map[string]string{
		"process.roles":                                    "broker,controller",
		"node.id":                                          "1",
		"controller.quorum.voters":                         fmt.Sprintf("1@127.0.0.1:%d", controllerPort),
		"controller.listener.names":                        "CONTROLLER",
		"listeners":                                        fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", port, controllerPort),
		"advertised.listeners":                             fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", port),
		"inter.broker.listener.name":                       "PLAINTEXT",
		"listener.security.protocol.map":                   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                                         dataDir,
		"num.partitions":                                   "1",
		"default.replication.factor":                       "1",
		"min.insync.replicas":                              "1",
		"offsets.topic.replication.factor":                 "1",
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"group.initial.rebalance.delay.ms":                 "0",
		"auto.create.topics.enable":                        "false",
	}
}

// format writes server.properties (on free loopback ports) and the log4j2 config into dir
// and formats the KRaft data directory (kafka-storage.sh format); it returns the bootstrap
// address.
func format(ctx context.Context, java, libs, dir, propsPath, log4j string, extra map[string]string) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	props := ServerProperties(filepath.Join(dir, "data"), ports[0], ports[1])
	for k, v := range extra {
		props[k] = v
	}
	if err := writeProperties(propsPath, props); err != nil {
		return "", err
	}
	if err := os.WriteFile(log4j, []byte(log4jConfig(filepath.Join(dir, "server.log"))), 0o644); err != nil {
		return "", err
	}
	fmtCmd := exec.CommandContext(ctx, java, "-cp", filepath.Join(libs, "*"), "-Dlog4j2.configurationFile="+log4j,
		"kafka.tools.StorageTool", "format", "--config", propsPath, "--cluster-id", clusterID())
	if out, err := fmtCmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kafka: format %s: %w\n%s", dir, err, out)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0]), nil
}

// listenAddr reads the PLAINTEXT listener of an existing server.properties.
func listenAddr(propsPath string) (string, error) {
	b, err := os.ReadFile(propsPath)
	if err != nil {
		return "", fmt.Errorf("kafka: Existing needs a formatted directory: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "advertised.listeners=PLAINTEXT://"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("kafka: no advertised.listeners in %s", propsPath)
}

func writeProperties(path string, props map[string]string) error {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("# written by exactq bench/kafka\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func log4jConfig(file string) string {
	return `Configuration:
  Appenders:
    File:
      name: file
      fileName: "` + file + `"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: file
`
}

// clusterID is a random KRaft cluster id (16 bytes, URL-safe base64 without padding, as
// kafka-storage.sh random-uuid prints). Like Kafka's Uuid.randomUuid it never starts with
// '-': kafka-storage's argument parser takes such a value for an option and fails the
// format ("argument --cluster-id/-t: expected one argument"), one run in 64.
func clusterID() string {
	for {
		var u [16]byte
		_, _ = rand.Read(u[:])
		if id := base64.RawURLEncoding.EncodeToString(u[:]); id[0] != '-' {
			return id
		}
	}
}

// freePorts asks the kernel for n free loopback ports (a small race with other processes
// remains until Kafka binds them).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail returns the last lines of the given files, for error messages.
func tail(files ...string) string {
	var b strings.Builder
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		var lines []string
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if len(lines) > 40 {
				lines = lines[1:]
			}
		}
		fh.Close()
		fmt.Fprintf(&b, "--- %s\n%s\n", f, strings.Join(lines, "\n"))
	}
	return b.String()
}
