package compat

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
)

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
	checkRun(t, "java "+class, out, err, ok)
	return out
}

// javaProject is the built compat/java: the java binary, the class path and the folder.
type javaProject struct{ java, cp, dir string }

var javaBuild install[javaProject]

// buildJava builds the Maven project in compat/java once per test process and returns the
// java binary, the class path and the project directory. It skips when mvn or java is
// missing and fails when the build does.
//
// The first build downloads the jars into ~/.m2 (CI: Maven Central must be reachable once);
// later builds use them without the network. If Maven cannot get them the test fails,
// saying so: it never passes without running the Java client.
func buildJava(t *testing.T) (java, cp, dir string) {
	t.Helper()
	p := javaBuild.need(t, func() (javaProject, error) {
		mvn, java, err := mavenAndJava("the Java interop suites")
		if err != nil {
			return javaProject{}, err
		}
		dir, err := filepath.Abs("java")
		if err != nil {
			return javaProject{}, err
		}
		if err := runMaven(mvn, dir, "kafka-clients 4.4.0 and its plugins", "package", "-DskipTests"); err != nil {
			return javaProject{}, err
		}
		cp := filepath.Join(dir, "target", "classes") + string(filepath.ListSeparator) + filepath.Join(dir, "target", "lib", "*")
		return javaProject{java, cp, dir}, nil
	})
	return p.java, p.cp, p.dir
}
