package compat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/await"
)

// ctxFor returns a context that ends after d or at test cleanup, whichever comes first.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newClient returns a kgo client for addr, closed at test cleanup.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns a kadm client for addr, closed at test cleanup.
func newAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, addr))
}

// createTopic creates topic with the given partitions and configs and fails the test if
// the broker refuses.
func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(ctxFor(t, 30*time.Second), partitions, 1, configs, topic)
	if err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
	if resp.Err != nil {
		t.Fatalf("CreateTopic %s: %v (%s)", topic, resp.Err, resp.ErrMessage)
	}
}

// eventually polls cond until it returns nil or the deadline passes, then fails with the
// last error. It is for conditions another party makes true (metadata propagation), not
// for waiting out time.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	if err := await.Until(d, 20*time.Millisecond, cond); err != nil {
		t.Fatalf("%s: still not true after %v: %v", what, d, err)
	}
}

// endOffsets returns the high watermark of every partition of topic.
func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	lo, err := adm.ListEndOffsets(ctxFor(t, 30*time.Second), topic)
	if err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	if err := lo.Error(); err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// fmtKey and fmtValue make record i's key and a compressible value of varying length.
func fmtKey(i int) string { return fmt.Sprintf("key-%06d", i) }

func fmtValue(tag string, i int) string {
	v := fmt.Sprintf("value-%s-%06d|", tag, i)
	for n := i % 17; n > 0; n-- {
		v += "the quick brown fox jumps over the lazy dog "
	}
	return v
}

// runBounded runs a command in dir with a time limit and returns its combined output.
func runBounded(limit time.Duration, dir, name string, args ...string) (string, error) {
	return runBoundedEnv(limit, dir, nil, name, args...)
}

// runBoundedEnv is runBounded with extra environment variables ("K=V") on top of ours.
func runBoundedEnv(limit time.Duration, dir string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return buf.String(), ctx.Err()
	}
	return buf.String(), err
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// install is a one-time set-up of a client from its registry (a pip virtual environment,
// an npm folder, Maven jars), shared by every test of the process that needs it; T is what
// it yields (paths). A missing tool (python3, npm, mvn) skips those tests, saying which; a
// failed install fails them: no suite passes without running its client.
type install[T any] struct {
	once      sync.Once
	skip, err string
	got       T
}

// errSkip marks an install that cannot start because a tool is missing.
var errSkip = errors.New("skip")

// need runs do once per process, then skips or fails t as its first run said, or returns
// what it yielded.
func (in *install[T]) need(t *testing.T, do func() (T, error)) T {
	t.Helper()
	in.once.Do(func() {
		got, err := do()
		switch {
		case errors.Is(err, errSkip):
			in.skip = err.Error()
		case err != nil:
			in.err = err.Error()
		default:
			in.got = got
		}
	})
	if in.skip != "" {
		t.Skip(in.skip)
	}
	if in.err != "" {
		t.Fatal(in.err)
	}
	return in.got
}

// lookTools finds each named program on PATH, or returns an errSkip saying what the suite
// (what) needs and why it cannot have it.
func lookTools(what string, names ...string) ([]string, error) {
	var paths, missing []string
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			missing = append(missing, err.Error())
		}
		paths = append(paths, p)
	}
	if missing != nil {
		return nil, fmt.Errorf("%w: %s needs %s on PATH: %s", errSkip, what, strings.Join(names, " and "), strings.Join(missing, "; "))
	}
	return paths, nil
}

// cacheDir is the folder under the user cache directory (the temporary directory without
// one) where the client name is installed once per machine.
func cacheDir(name string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "exactq-compat", name)
}

// mavenNetworkTrouble matches Maven's messages for artifacts it could not download.
var mavenNetworkTrouble = regexp.MustCompile(`(?i)could not (be )?(transfer|resolved?)|unknown ?host|connect(ion)? (timed out|refused)|Non-resolvable|offline mode`)

// mavenAndJava finds mvn and java, or returns an errSkip.
func mavenAndJava(what string) (mvn, java string, err error) {
	p, err := lookTools(what+" (JDK 17+; Debian: apt-get install -y maven openjdk-17-jdk-headless)", "mvn", "java")
	if err != nil {
		return "", "", err
	}
	return p[0], p[1], nil
}

// runMaven runs mvn with args in dir; a failure says whether Maven could not download what
// it needed (the artifacts named by what are neither reachable nor in ~/.m2 yet).
func runMaven(mvn, dir, what string, args ...string) error {
	start := time.Now()
	out, err := runBounded(10*time.Minute, dir, mvn, append([]string{"-B", "-q"}, args...)...)
	if err == nil {
		return nil
	}
	msg := "mvn " + strings.Join(args, " ") + " failed"
	if mavenNetworkTrouble.MatchString(out) {
		msg = "Maven could not download " + what + ": Maven Central is unreachable and ~/.m2 lacks them; this suite cannot pass without them"
	}
	return fmt.Errorf("%s (%v) after %v:\n%s", msg, err, time.Since(start).Round(time.Millisecond), tail(out))
}

// confluentKafkaVersion is the confluent-kafka (librdkafka) the Python suites install.
const confluentKafkaVersion = "2.16.1"

var confluentPython install[string]

// pythonWithConfluentKafka returns the Python interpreter of a virtual environment with
// confluent-kafka installed by pip, made once per machine in the cache directory. It skips
// without python3.
func pythonWithConfluentKafka(t *testing.T) string {
	t.Helper()
	return confluentPython.need(t, func() (string, error) {
		tools, err := lookTools("the confluent-kafka suite (python3 with venv and pip)", "python3")
		if err != nil {
			return "", err
		}
		venv := cacheDir("confluent-kafka-" + confluentKafkaVersion)
		python := filepath.Join(venv, "bin", "python")
		if _, err := runBounded(time.Minute, "", python, "-c", "import confluent_kafka"); err == nil {
			return python, nil
		}
		if out, err := runBounded(2*time.Minute, "", tools[0], "-m", "venv", venv); err != nil {
			return "", fmt.Errorf("python3 -m venv %s: %v\n%s", venv, err, tail(out))
		}
		if out, err := runBounded(5*time.Minute, "", python, "-m", "pip", "install", "-q", "confluent-kafka=="+confluentKafkaVersion); err != nil {
			return "", fmt.Errorf("pip install confluent-kafka==%s: %v\n%s", confluentKafkaVersion, err, tail(out))
		}
		return python, nil
	})
}

// runScript runs a client's script (python or node, found in the folder dir of compat)
// with args for at most limit, logs its output and fails the test when it exits non-zero
// (with its "FAIL:" line) or without printing its line ok. It returns the output.
func runScript(t *testing.T, limit time.Duration, env []string, interpreter, dir, script, ok string, args ...string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join(dir, script))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := runBoundedEnv(limit, dir, env, interpreter, append([]string{path}, args...)...)
	t.Logf("%s (%v):\n%s", script, time.Since(start).Round(time.Millisecond), tail(out))
	checkRun(t, script, out, err, ok)
	return out
}

// checkRun fails the test when a client program (what) exited with err, naming its first
// "FAIL:" line, or exited 0 without printing its line ok.
func checkRun(t *testing.T, what, out string, err error, ok string) {
	t.Helper()
	if err != nil {
		fail := "(no FAIL line)"
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "FAIL:") {
				fail = l
				break
			}
		}
		t.Fatalf("%s against exactq: %v: %s", what, err, fail)
	}
	if !strings.Contains(out, ok) {
		t.Fatalf("%s exited 0 without its line %q", what, ok)
	}
}

// kafkajsVersion is the kafkajs the Node.js suite installs.
const kafkajsVersion = "2.2.4"

// kafkajsInstall is node and the node_modules folder (for NODE_PATH) holding kafkajs.
type kafkajsInstall struct{ node, modules string }

var kafkajs install[kafkajsInstall]

// nodeWithKafkajs returns node and the node_modules folder where npm installed kafkajs, once
// per machine in the cache directory. It skips without node and npm.
func nodeWithKafkajs(t *testing.T) (node, modules string) {
	t.Helper()
	got := kafkajs.need(t, func() (kafkajsInstall, error) {
		tools, err := lookTools("the kafkajs suite (Node.js)", "node", "npm")
		if err != nil {
			return kafkajsInstall{}, err
		}
		dir := cacheDir("kafkajs-" + kafkajsVersion)
		in := kafkajsInstall{tools[0], filepath.Join(dir, "node_modules")}
		installed, _ := os.ReadFile(filepath.Join(in.modules, "kafkajs", "package.json"))
		if strings.Contains(string(installed), `"version": "`+kafkajsVersion+`"`) {
			return in, nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return in, err
		}
		if out, err := runBounded(5*time.Minute, dir, tools[1], "install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error", "kafkajs@"+kafkajsVersion); err != nil {
			return in, fmt.Errorf("npm install kafkajs@%s: %v\n%s", kafkajsVersion, err, tail(out))
		}
		return in, nil
	})
	return got.node, got.modules
}
