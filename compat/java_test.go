package compat

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
)

// mavenNetworkTrouble matches Maven's messages for artifacts it could not download.
var mavenNetworkTrouble = regexp.MustCompile(`(?i)could not (be )?(transfer|resolved?)|unknown ?host|connect(ion)? (timed out|refused)|Non-resolvable|offline mode`)

// TestJavaClient builds the Maven project in compat/java (kafka-clients 4.4.0) and runs its
// Main against a fresh broker: AdminClient topic/config/cluster checks, then for every
// compression type an idempotent acks=all KafkaProducer sends 10k records with headers and
// an assign()ed KafkaConsumer reads them back and verifies each. Main exits non-zero with a
// "FAIL:" line on any mismatch.
// The build is buildJava's.
func TestJavaClient(t *testing.T) {
	buildJava(t) // skips without Java, before a broker starts
	tb := testbroker.Start(t)
	runJava(t, 5*time.Minute, "512m", "Main", "OK: all Java client checks passed", tb.Addr)
}

// runJava runs the program exactq.compat.<class> of buildJava's build with a heap of heap
// for at most limit, logs its output, and fails the test with the program's "FAIL:" line
// when it exits non-zero, or when it exits without printing its line ok. It returns the
// output.
func runJava(t *testing.T, limit time.Duration, heap, class, ok string, args ...string) string {
	t.Helper()
	java, cp, dir := buildJava(t)
	start := time.Now()
	out, err := runBounded(limit, dir, java, append([]string{"-XX:+UseSerialGC", "-Xmx" + heap, "-cp", cp, "exactq.compat." + class}, args...)...)
	t.Logf("java %s (%v):\n%s", class, time.Since(start).Round(time.Millisecond), tail(out))
	if err != nil {
		fail := "(no FAIL line)"
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "FAIL:") {
				fail = l
				break
			}
		}
		t.Fatalf("java %s against exactq: %v: %s", class, err, fail)
	}
	if !strings.Contains(out, ok) {
		t.Fatalf("java %s exited 0 without its line %q", class, ok)
	}
	return out
}

// runBounded runs a command in dir with a time limit and returns its combined output.
func runBounded(limit time.Duration, dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return buf.String(), ctx.Err()
	}
	return buf.String(), err
}

var javaBuild struct {
	once          sync.Once
	java, cp, dir string
	err, skip     string
}

// buildJava builds the Maven project in compat/java once per test process and returns the
// java binary, the class path and the project directory. It skips when mvn or java is
// missing and fails when the build does.
//
// The first build downloads the jars into ~/.m2 (CI: Maven Central must be reachable once);
// later builds use them without the network. If Maven cannot get them the test fails,
// saying so: it never passes without running the Java client.
func buildJava(t *testing.T) (java, cp, dir string) {
	t.Helper()
	b := &javaBuild
	b.once.Do(func() {
		mvn, errM := exec.LookPath("mvn")
		java, errJ := exec.LookPath("java")
		if errM != nil || errJ != nil {
			b.skip = fmt.Sprintf("the Java interop suites need mvn and java (JDK 17+) on PATH (Debian: apt-get install -y maven openjdk-17-jdk-headless); mvn: %v, java: %v", errM, errJ)
			return
		}
		dir, err := filepath.Abs("java")
		if err != nil {
			b.err = err.Error()
			return
		}
		start := time.Now()
		out, err := runBounded(10*time.Minute, dir, mvn, "-q", "-B", "package", "-DskipTests")
		if err != nil {
			msg := "mvn package failed"
			if mavenNetworkTrouble.MatchString(out) {
				msg = "mvn package could not download its dependencies: Maven Central is unreachable and ~/.m2 does not have kafka-clients 4.4.0 and its plugins yet; this suite cannot pass without them"
			}
			b.err = fmt.Sprintf("%s (%v) after %v:\n%s", msg, err, time.Since(start).Round(time.Millisecond), tail(out))
			return
		}
		t.Logf("mvn package: %v", time.Since(start).Round(time.Millisecond))
		b.java, b.dir = java, dir
		b.cp = filepath.Join(dir, "target", "classes") + string(filepath.ListSeparator) + filepath.Join(dir, "target", "lib", "*")
	})
	if b.skip != "" {
		t.Skip(b.skip)
	}
	if b.err != "" {
		t.Fatal(b.err)
	}
	return b.java, b.cp, b.dir
}
