package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// waitLimit bounds every wait for another goroutine's output; reaching it fails the test.
const waitLimit = 30 * time.Second

// run runs one command in-process and returns its stdout and stderr.
func run(t *testing.T, ctx context.Context, cmd command, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := cmd(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// mustRun runs a command that must succeed and returns its stdout.
func mustRun(t *testing.T, cmd command, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := run(t, t.Context(), cmd, stdin, args...)
	if err != nil {
		t.Fatalf("%v: %v\nstderr:\n%s", args, err, errOut)
	}
	return out
}

// syncBuffer is a writer another goroutine can wait on.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{})} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor blocks until cond holds for everything written so far.
func (s *syncBuffer) waitFor(t *testing.T, what string, cond func(string) bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		text, ch := s.b.String(), s.changed
		s.mu.Unlock()
		if cond(text) {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("waiting for %s; have:\n%s", what, text)
		}
	}
}

// background runs a command on another goroutine; wait returns its error.
type background struct {
	stdout, stderr *syncBuffer
	done           chan error
}

func start(ctx context.Context, cmd command, stdin io.Reader, args ...string) *background {
	bg := &background{stdout: newSyncBuffer(), stderr: newSyncBuffer(), done: make(chan error, 1)}
	go func() { bg.done <- cmd(ctx, args, stdin, bg.stdout, bg.stderr) }()
	return bg
}

func (bg *background) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-bg.done:
		return err
	case <-time.After(waitLimit):
		t.Fatalf("command did not return; stderr:\n%s", bg.stderr.String())
		return nil
	}
}

func createTopic(t *testing.T, addr, name string, partitions int) {
	t.Helper()
	mustRun(t, runTopic, "", "create", name, "-b", addr, "-p", fmt.Sprint(partitions))
}

func TestTopicLifecycle(t *testing.T) {
	tb := testbroker.Start(t)
	b := []string{"-b", tb.Addr}

	out := mustRun(t, runTopic, "", append([]string{"create", "orders", "-p", "3", "-c", "retention.ms=12345", "--config", "max.message.bytes=2000000"}, b...)...)
	if out != "Created topic orders.\n" {
		t.Errorf("create: %q", out)
	}
	_, _, err := run(t, t.Context(), runTopic, "", append([]string{"create", "orders"}, b...)...)
	if !errors.Is(err, kerr.TopicAlreadyExists) || err.Error() != "topic orders: TOPIC_ALREADY_EXISTS: Topic 'orders' already exists." {
		t.Errorf("second create: %v, want TOPIC_ALREADY_EXISTS with the broker's message only", err)
	}
	out = mustRun(t, runTopic, "", append([]string{"create", "dry", "--validate-only"}, b...)...)
	if !strings.Contains(out, "validate only") {
		t.Errorf("validate-only create: %q", out)
	}
	_, _, err = run(t, t.Context(), runTopic, "", append([]string{"create", "bad", "-c", "retention.ms=soon"}, b...)...)
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("create with a bad config: %v, want INVALID_CONFIG", err)
	}
	createTopic(t, tb.Addr, "audit", 1)
	if out := mustRun(t, runTopic, "", append([]string{"list"}, b...)...); out != "audit\norders\n" {
		t.Errorf("list: %q", out)
	}

	details, err := testAdmin(t, tb.Addr).ListTopics(t.Context(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Topic: orders\tTopicId: %s\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: max.message.bytes=2000000,retention.ms=12345\n"+
		"\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n"+
		"\tTopic: orders\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1\n"+
		"\tTopic: orders\tPartition: 2\tLeader: 1\tReplicas: 1\tIsr: 1\n", topicID(details["orders"].ID))
	if out := mustRun(t, runTopic, "", append([]string{"describe", "orders"}, b...)...); out != want {
		t.Errorf("describe:\n%s\nwant:\n%s", out, want)
	}

	out = mustRun(t, runTopic, "", append([]string{"alter", "orders", "-c", "cleanup.policy=compact", "--delete-config", "retention.ms"}, b...)...)
	if out != "Altered configs of topic orders.\n" {
		t.Errorf("alter: %q", out)
	}
	out = mustRun(t, runTopic, "", append([]string{"describe", "orders", "--all-configs"}, b...)...)
	for _, line := range []string{
		"Configs: cleanup.policy=compact,max.message.bytes=2000000\n",
		"\tConfig: cleanup.policy=compact\t(topic)\n",
		"\tConfig: retention.ms=604800000\t(default)\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("describe --all-configs after alter lacks %q:\n%s", line, out)
		}
	}
	_, _, err = run(t, t.Context(), runTopic, "", append([]string{"alter", "orders", "-c", "cleanup.policy=sometimes"}, b...)...)
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("alter to a bad value: %v, want INVALID_CONFIG", err)
	}

	// Describing every topic lists both.
	out = mustRun(t, runTopic, "", append([]string{"describe"}, b...)...)
	if !strings.HasPrefix(out, "Topic: audit\t") || !strings.Contains(out, "\nTopic: orders\t") {
		t.Errorf("describe all:\n%s", out)
	}

	out, _, err = run(t, t.Context(), runTopic, "", append([]string{"delete", "orders", "ghost"}, b...)...)
	if out != "Deleted topic orders.\n" || !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("delete orders ghost: %q, %v", out, err)
	}
	if out := mustRun(t, runTopic, "", append([]string{"list"}, b...)...); out != "audit\n" {
		t.Errorf("list after delete: %q", out)
	}
	_, _, err = run(t, t.Context(), runTopic, "", append([]string{"describe", "orders"}, b...)...)
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(err.Error(), "no such topic") {
		t.Errorf("describe a deleted topic: %v", err)
	}
}

// keyedLines returns n lines key:value whose values contain the separator too (only the
// first one splits), and the expected consumer output per partition for format
// "%p|%o|%k|%v|%h\n" after producing them with headers.
func keyedLines(n int, partitions int32, headers string) (string, map[int32][]string) {
	var in strings.Builder
	want := map[int32][]string{}
	for i := range n {
		key := fmt.Sprintf("key-%d", i%37)
		value := fmt.Sprintf("value %d: with a colon, ünïcode and\ttab", i)
		fmt.Fprintf(&in, "%s:%s\n", key, value)
		p := keyPartition(key, partitions)
		off := len(want[p])
		want[p] = append(want[p], fmt.Sprintf("%d|%d|%s|%s|%s\n", p, off, key, value, headers))
	}
	return in.String(), want
}

// keyPartition is the partition kgo's default partitioner (Kafka's: murmur2 of the key)
// picks for key.
func keyPartition(key string, partitions int32) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: []byte(key)}, int(partitions)))
}

// testClient is a kgo client of the test broker; it closes at cleanup.
func testClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// testAdmin is a kadm client of the test broker; it closes at cleanup.
func testAdmin(t *testing.T, addr string) *kadm.Client {
	return kadm.NewClient(testClient(t, addr))
}

// byPartition splits "%p|..." lines by partition, keeping their order.
func byPartition(t *testing.T, out string) map[int32][]string {
	t.Helper()
	got := map[int32][]string{}
	for _, line := range strings.SplitAfter(out, "\n") {
		if line == "" {
			continue
		}
		var p int32
		if _, err := fmt.Sscanf(line, "%d|", &p); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got[p] = append(got[p], line)
	}
	return got
}

func TestProduceConsumeRoundTrip(t *testing.T) {
	tb := testbroker.Start(t)
	const n, partitions = 1000, 4
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "rt-" + codec
			createTopic(t, tb.Addr, topic, partitions)
			in, want := keyedLines(n, partitions, "trace=abc,empty=,eq=a=b")
			_, errOut, err := run(t, t.Context(), runProduce, in, topic, "-b", tb.Addr, "-k", ":",
				"--compression", codec, "--header", "trace=abc", "-H", "empty=", "--header", "eq=a=b")
			if err != nil {
				t.Fatalf("produce: %v\n%s", err, errOut)
			}
			if !strings.HasPrefix(errOut, fmt.Sprintf("%% produced %d records to %s\n", n, topic)) {
				t.Errorf("produce summary:\n%s", errOut)
			}
			for p, lines := range want {
				line := fmt.Sprintf("%%   partition %d: %d records, offsets 0..%d\n", p, len(lines), len(lines)-1)
				if !strings.Contains(errOut, line) {
					t.Errorf("produce summary lacks %q:\n%s", line, errOut)
				}
			}

			out, errOut, err := run(t, t.Context(), runConsume, "", topic, "-b", tb.Addr, "--format", `%p|%o|%k|%v|%h\n`)
			if err != nil {
				t.Fatalf("consume: %v\n%s", err, errOut)
			}
			got := byPartition(t, out)
			for p := range int32(partitions) {
				if strings.Join(got[p], "") != strings.Join(want[p], "") {
					t.Errorf("partition %d: got %d lines, want %d; first got %q", p, len(got[p]), len(want[p]), first(got[p]))
				}
			}
			if !strings.HasSuffix(errOut, fmt.Sprintf("%% consumed %d records\n", n)) {
				t.Errorf("consume status:\n%s", errOut)
			}

			// One partition only, quietly.
			out, errOut, err = run(t, t.Context(), runConsume, "", topic, "-b", tb.Addr, "--partition", "2", "-q", "--format", `%p|%o|%k|%v|%h\n`)
			if err != nil || errOut != "" {
				t.Fatalf("consume --partition 2 -q: %v, stderr %q", err, errOut)
			}
			if out != strings.Join(want[2], "") {
				t.Errorf("consume --partition 2: %d bytes, want %d", len(out), len(strings.Join(want[2], "")))
			}
		})
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func TestProduceOptions(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb.Addr, "opts", 3)

	// --partition; lines without the separator get a null key (%K is -1); an
	// empty line is an empty value; the last line needs no newline.
	_, errOut, err := run(t, t.Context(), runProduce, "a=1\nno separator\n\n=empty key\nlast=x", "opts", "-b", tb.Addr, "-k", "=", "--partition", "1")
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, errOut)
	}
	if want := "% produced 5 records to opts\n%   partition 1: 5 records, offsets 0..4\n"; errOut != want {
		t.Errorf("summary %q, want %q", errOut, want)
	}
	out := mustRun(t, runConsume, "", "opts", "-b", tb.Addr, "-p", "1", "-q", "--format", `%o %K %S [%k] [%s]\n`)
	want := "0 1 1 [a] [1]\n1 -1 12 [] [no separator]\n2 -1 0 [] []\n3 0 9 [] [empty key]\n4 4 1 [last] [x]\n"
	if out != want {
		t.Errorf("consume:\n%s\nwant:\n%s", out, want)
	}

	// acks=1 reports offsets (the records need not be visible to consumers yet: the high
	// watermark may still be behind); acks=0 cannot.
	_, errOut, err = run(t, t.Context(), runProduce, "x\ny\n", "opts", "-b", tb.Addr, "--partition", "2", "--acks", "1")
	if err != nil || !strings.Contains(errOut, "partition 2: 2 records, offsets 0..1\n") {
		t.Errorf("acks=1: %v\n%s", err, errOut)
	}
	_, errOut, err = run(t, t.Context(), runProduce, "x\ny\n", "opts", "-b", tb.Addr, "--partition", "0", "--acks", "0")
	if err != nil || !strings.Contains(errOut, "partition 0: 2 records (offsets not reported with acks=0)") {
		t.Errorf("acks=0: %v\n%s", err, errOut)
	}

	// A partition the topic does not have fails the command.
	_, errOut, err = run(t, t.Context(), runProduce, "x\ny\n", "opts", "-b", tb.Addr, "--partition", "7")
	if !errors.Is(err, errNoPartition) || !strings.Contains(err.Error(), "topic opts has 3 partitions, no partition 7") || exitCode("produce", err, io.Discard) != 1 {
		t.Errorf("--partition 7: %v", err)
	}
	// kgo fails a record asynchronously, so a line or two more may be read before reading
	// stops; none is delivered.
	if !strings.Contains(errOut, "produced 0 records to opts, ") || !strings.Contains(errOut, " failed") {
		t.Errorf("--partition 7 summary:\n%s", errOut)
	}
}

func TestConsumeFrom(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb.Addr, "from", 1)
	p := testClient(t, tb.Addr)
	base := time.UnixMilli(1_700_000_000_000)
	for i := range 10 {
		r := &kgo.Record{Topic: "from", Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := p.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	b := []string{"-b", tb.Addr, "-q", "--format", `%o:%v@%T `}
	for _, tc := range []struct {
		from string
		n    string
		want string
	}{
		{"beginning", "3", "0:v0@1700000000000 1:v1@1700000001000 2:v2@1700000002000 "},
		{"8", "", "8:v8@1700000008000 9:v9@1700000009000 "},
		{"-2", "", "8:v8@1700000008000 9:v9@1700000009000 "},
		{"-50", "2", "0:v0@1700000000000 1:v1@1700000001000 "}, // before the start: from the start
		{"500", "", ""}, // past the end: nothing
		{"@1700000006500", "", "7:v7@1700000007000 8:v8@1700000008000 9:v9@1700000009000 "},
		{"@1800000000000", "", ""},
		{"end", "", ""}, // without -f: stops at once
	} {
		args := append([]string{"from", "--from", tc.from}, b...)
		if tc.n != "" {
			args = append(args, "-n", tc.n)
		}
		if out := mustRun(t, runConsume, "", args...); out != tc.want {
			t.Errorf("--from %s -n %q: %q, want %q", tc.from, tc.n, out, tc.want)
		}
	}
}

func TestConsumeFromEndFollowCount(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb.Addr, "tail", 2)
	mustRun(t, runProduce, "old1\nold2\nold3\n", "tail", "-b", tb.Addr)

	bg := start(t.Context(), runConsume, nil, "tail", "-b", tb.Addr, "--from", "end", "-f", "-n", "3")
	// Once both partitions' start offsets are printed, they are fixed: what follows is new.
	bg.stderr.waitFor(t, "start offsets", func(s string) bool { return strings.Count(s, "% consuming tail") == 2 })
	mustRun(t, runProduce, "new1\nnew2\nnew3\nnew4\nnew5\n", "tail", "-b", tb.Addr, "--partition", "1")
	if err := bg.wait(t); err != nil {
		t.Fatal(err)
	}
	if out := bg.stdout.String(); out != "new1\nnew2\nnew3\n" {
		t.Errorf("stdout %q", out)
	}
	if !strings.HasSuffix(bg.stderr.String(), "% consumed 3 records\n") {
		t.Errorf("stderr:\n%s", bg.stderr.String())
	}
}

func TestConsumeFollowStopsOnCancel(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb.Addr, "follow", 3)
	mustRun(t, runProduce, "a\n", "follow", "-b", tb.Addr)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	bg := start(ctx, runConsume, nil, "follow", "-b", tb.Addr, "-f")
	bg.stdout.waitFor(t, "the first record", func(s string) bool { return s == "a\n" })
	mustRun(t, runProduce, "b\nc\n", "follow", "-b", tb.Addr)
	bg.stdout.waitFor(t, "the later records", func(s string) bool { return s == "a\nb\nc\n" })
	cancel()
	if err := bg.wait(t); err != nil {
		t.Errorf("follow after cancel: %v, want a clean stop", err)
	}
	if !strings.HasSuffix(bg.stderr.String(), "% consumed 3 records\n") {
		t.Errorf("stderr:\n%s", bg.stderr.String())
	}
}

func TestProduceStopsOnCancel(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb.Addr, "sigint", 1)
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	bg := start(ctx, runProduce, pr, "sigint", "-b", tb.Addr)
	fmt.Fprint(pw, "one\ntwo\n")

	// The lines are on the broker once a consumer sees them; stdin stays open.
	follow := start(t.Context(), runConsume, nil, "sigint", "-b", tb.Addr, "-f", "-n", "2")
	if err := follow.wait(t); err != nil || follow.stdout.String() != "one\ntwo\n" {
		t.Fatalf("consume: %v, %q", err, follow.stdout.String())
	}
	cancel()
	if err := bg.wait(t); err != nil {
		t.Errorf("produce after cancel: %v", err)
	}
	if want := "% produced 2 records to sigint\n%   partition 0: 2 records, offsets 0..1\n"; bg.stderr.String() != want {
		t.Errorf("summary %q, want %q", bg.stderr.String(), want)
	}
}

func TestUnknownTopicWithoutAutoCreate(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithoutAutoCreate())

	_, errOut, err := run(t, t.Context(), runProduce, "x\ny\nz\n", "missing", "-b", tb.Addr)
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(err.Error(), "topic missing does not exist") {
		t.Errorf("produce: %v", err)
	}
	if exitCode("produce", err, io.Discard) != 1 {
		t.Errorf("produce exit code is not 1")
	}
	if !strings.HasPrefix(errOut, "% produced 0 records to missing, ") {
		t.Errorf("produce summary:\n%s", errOut)
	}

	_, _, err = run(t, t.Context(), runConsume, "", "missing", "-b", tb.Addr)
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(err.Error(), "no such topic") {
		t.Errorf("consume: %v", err)
	}

	createTopic(t, tb.Addr, "one", 1)
	_, _, err = run(t, t.Context(), runConsume, "", "one", "-b", tb.Addr, "--partition", "3")
	if err == nil || err.Error() != "topic one has no partition 3" {
		t.Errorf("consume --partition 3: %v", err)
	}

	if names := mustRun(t, runTopic, "", "list", "-b", tb.Addr); names != "one\n" {
		t.Errorf("topics after the failures: %q", names)
	}
}

// With no broker reachable, produce fails at once (kgo alone would retry until the
// delivery timeout, two minutes) and still prints its summary.
func TestProduceNoBroker(t *testing.T) {
	begin := time.Now()
	_, errOut, err := run(t, t.Context(), runProduce, "x\n", "t", "-b", "127.0.0.1:1")
	if err == nil || exitCode("produce", err, io.Discard) != 1 {
		t.Errorf("produce: %v", err)
	}
	if errOut != "% produced 0 records to t\n" {
		t.Errorf("summary %q", errOut)
	}
	if d := time.Since(begin); d > waitLimit/2 {
		t.Errorf("produce took %v to fail", d)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		cmd  command
		args []string
	}{
		{runProduce, nil},
		{runProduce, []string{"t", "u"}},
		{runProduce, []string{"t", "--acks", "2"}},
		{runProduce, []string{"t", "--compression", "brotli"}},
		{runProduce, []string{"t", "--header", "novalue"}},
		{runProduce, []string{"t", "--partition", "-3"}},
		{runProduce, []string{"t", "--bogus"}},
		{runConsume, nil},
		{runConsume, []string{"t", "--from", "yesterday"}},
		{runConsume, []string{"t", "--from", "@soon"}},
		{runConsume, []string{"t", "--format", "%x"}},
		{runConsume, []string{"t", "--format", `\q`}},
		{runConsume, []string{"t", "--format", "%"}},
		{runConsume, []string{"t", "--isolation", "serializable"}},
		{runConsume, []string{"t", "-n", "-1"}},
		{runConsume, []string{"t", "-n", "lots"}},
		{runTopic, nil},
		{runTopic, []string{"rename", "a", "b"}},
		{runTopic, []string{"create"}},
		{runTopic, []string{"create", "a", "-p", "0"}},
		{runTopic, []string{"create", "a", "-c", "=x"}},
		{runTopic, []string{"delete"}},
		{runTopic, []string{"alter", "a"}},
		{runTopic, []string{"list", "extra"}},
		{runVersion, []string{"now"}},
	} {
		// No broker is needed: the port is never dialled.
		_, _, err := run(t, t.Context(), tc.cmd, "", append(tc.args, "-b", "127.0.0.1:1")...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", tc.args, err)
			continue
		}
		hint := `Run "exactq x -h" for usage.`
		if len(tc.args) > 0 && (tc.args[0] == "create" || tc.args[0] == "alter" || tc.args[0] == "delete" || tc.args[0] == "list") {
			hint = `Run "exactq topic ` + tc.args[0] + ` -h" for usage.`
		}
		var stderr bytes.Buffer
		if code := exitCode("x", err, &stderr); code != 2 || !strings.Contains(stderr.String(), hint) {
			t.Errorf("%v: exit code %d, stderr %q, want %q", tc.args, code, stderr.String(), hint)
		}
	}

	// -h prints the usage to stdout and exits 0.
	for _, args := range [][]string{{"-h"}, {"t", "--help"}} {
		out, _, err := run(t, t.Context(), runConsume, "", args...)
		if !errors.Is(err, errHelp) || exitCode("consume", err, io.Discard) != 0 || out != consumeUsage {
			t.Errorf("consume %v: %v, %q", args, err, out)
		}
	}
}

func TestFlagsAfterArguments(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		pos   string
		delim string
	}{
		{[]string{"t", "-k", ":"}, "t", ":"},
		{[]string{"-k", ":", "t"}, "t", ":"},
		{[]string{"-k", "--", "t"}, "t", "--"}, // "--" as the value of -k
		{[]string{"-k=--", "--", "-t"}, "-t", "--"},
		{[]string{"--", "-t"}, "-t", ""},
		{[]string{"t", "--key-delimiter", ":"}, "t", ":"},
		{[]string{"--key-delimiter=:", "t"}, "t", ":"},
	} {
		f := newCmdFlags("x", "", io.Discard)
		delim := f.StringP("key-delimiter", "k", "", "")
		pos, err := f.parse(tc.args, 1, 1)
		if err != nil || pos[0] != tc.pos || *delim != tc.delim {
			t.Errorf("%q: %q, %q, %v; want %q, %q", tc.args, pos, *delim, err, tc.pos, tc.delim)
		}
	}
}

func TestFormat(t *testing.T) {
	r := &kgo.Record{
		Topic: "t", Partition: 3, Offset: 42, Key: nil, Value: []byte("val"),
		Timestamp: time.UnixMilli(1234),
		Headers:   []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}},
	}
	for _, tc := range []struct{ format, want string }{
		{`%v\n`, "val\n"},
		{`%t[%p]@%o %T\t%k|%s|%K|%S|%h %% \\ \r`, "t[3]@42 1234\t|val|-1|3|a=1,b= % \\ \r"},
		{`plain`, "plain"},
		{``, ""},
	} {
		f, err := parseFormat(tc.format)
		if err != nil {
			t.Fatalf("%q: %v", tc.format, err)
		}
		if got := string(f.appendRecord([]byte("prefix:"), r)); got != "prefix:"+tc.want {
			t.Errorf("%q: %q, want %q", tc.format, got, "prefix:"+tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	out := mustRun(t, runVersion, "")
	if !strings.HasPrefix(out, "exactq ") || !strings.Contains(out, "go1.") {
		t.Errorf("version: %q", out)
	}
}

// TestSingleDashLongFlag: "-brokers h:1" (accepted by the stdlib flag parser the CLI used
// before pflag) is a usage error naming --brokers, not -b with the value "rokers".
func TestSingleDashLongFlag(t *testing.T) {
	for _, args := range [][]string{{"t", "-brokers", "h:1"}, {"-from=end", "t"}} {
		_, _, err := run(t, t.Context(), runConsume, "", args...)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "two dashes") {
			t.Errorf("consume %q: %v", args, err)
		}
	}
	f := newCmdFlags("x", "", io.Discard)
	f.StringP("key-delimiter", "k", "", "")
	if pos, err := f.parse([]string{"-k", "-x", "--", "-brokers"}, 1, 1); err != nil || pos[0] != "-brokers" {
		t.Errorf("after --: %q %v", pos, err)
	}
}
