package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
)

// kcatPath returns kcat's path or skips: kcat is the one dependency of this suite that is
// not a Go module. CI installs it with `apt-get install -y kcat` (Debian 12: kcat 1.7.1 on
// librdkafka 2.0.2).
func kcatPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not on PATH; install it with `apt-get install -y kcat` to run the kcat/librdkafka interop suite")
	}
	return p
}

// runKcat runs kcat with args, feeding stdin, and returns stdout. It fails the test on a
// non-zero exit, a timeout, or librdkafka reporting an error or failed delivery on stderr.
func runKcat(t *testing.T, kcat, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat %s: timed out after 60s\nstderr:\n%s", strings.Join(args, " "), tail(stderr.String()))
	}
	if err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, tail(stderr.String()))
	}
	for _, bad := range []string{"ERROR", "Delivery failed"} {
		if strings.Contains(stderr.String(), bad) {
			t.Fatalf("kcat %s reported %q:\n%s", strings.Join(args, " "), bad, tail(stderr.String()))
		}
	}
	return stdout.String()
}

// kcatConsume reads exactly n messages of topic from the beginning with kcat -C -c n,
// printing each with format; librdkafka verifies every batch CRC. (-c n rather than -e:
// reaching the end of a partition is TestKcatExitAtEnd's subject.)
func kcatConsume(t *testing.T, kcat, addr, topic string, n int, format string, extra ...string) string {
	t.Helper()
	args := append([]string{"-C", "-b", addr, "-t", topic, "-o", "beginning", "-c", strconv.Itoa(n), "-q", "-f", format, "-X", "check.crcs=true"}, extra...)
	return runKcat(t, kcat, "", args...)
}

// kcatLines makes n "key:value" lines for kcat -K: (the value may contain ':'; only the
// first one splits).
func kcatLines(tag string, n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmtKey(i) + ":" + fmtValue(tag, i) + ":colon"
	}
	return lines
}

// TestKcatProduceConsume: keyed lines produced with kcat -P -K: come back byte for byte
// from kcat -C, on one partition in order, and on three partitions with each partition's
// offsets contiguous and in the producer's order; librdkafka's idempotent producer works;
// headers set with -H come back; -o -N reads the tail; producing to a missing topic
// auto-creates it.
func TestKcatProduceConsume(t *testing.T) {
	kcat := kcatPath(t)
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	b := tb.Addr

	t.Run("one partition, exact", func(t *testing.T) {
		const topic = "kcat-one"
		createTopic(t, adm, topic, 1, nil)
		lines := kcatLines("one", 1000)
		runKcat(t, kcat, strings.Join(lines, "\n")+"\n", "-P", "-b", b, "-t", topic, "-K:")
		got := kcatConsume(t, kcat, b, topic, len(lines), `%k:%s\n`)
		if want := strings.Join(lines, "\n") + "\n"; got != want {
			t.Fatalf("kcat -C output differs from what kcat -P produced:\n%s", firstDiff(got, want))
		}
		if hw := endOffsets(t, adm, topic)[0]; hw != int64(len(lines)) {
			t.Fatalf("end offset %d after kcat produced %d lines", hw, len(lines))
		}
		// The last three by offset (ListOffsets latest, then fetch).
		got = runKcat(t, kcat, "", "-C", "-b", b, "-t", topic, "-o", "-3", "-c", "3", "-q", "-f", `%o %k\n`)
		if want := fmt.Sprintf("997 %s\n998 %s\n999 %s\n", fmtKey(997), fmtKey(998), fmtKey(999)); got != want {
			t.Fatalf("kcat -o -3: got\n%s\nwant\n%s", got, want)
		}
	})

	for _, idem := range []bool{false, true} {
		t.Run(fmt.Sprintf("three partitions, idempotence=%v", idem), func(t *testing.T) {
			topic := fmt.Sprintf("kcat-three-%v", idem)
			createTopic(t, adm, topic, 3, nil)
			lines := kcatLines(topic, 3000)
			args := []string{"-P", "-b", b, "-t", topic, "-K:", "-H", "source=kcat", "-H", "run=" + topic}
			if idem {
				args = append(args, "-X", "enable.idempotence=true")
			}
			runKcat(t, kcat, strings.Join(lines, "\n")+"\n", args...)
			out := kcatConsume(t, kcat, b, topic, len(lines), `%p\t%o\t%h\t%k:%s\n`)
			checkPartitioned(t, out, lines, 3, "source=kcat,run="+topic)
			total := int64(0)
			for _, o := range endOffsets(t, adm, topic) {
				total += o
			}
			if total != int64(len(lines)) {
				t.Fatalf("end offsets sum to %d after kcat produced %d lines", total, len(lines))
			}
		})
	}

	t.Run("auto-create on produce", func(t *testing.T) {
		const topic = "kcat-auto-created"
		lines := kcatLines("auto", 10)
		runKcat(t, kcat, strings.Join(lines, "\n")+"\n", "-P", "-b", b, "-t", topic, "-K:")
		got := kcatConsume(t, kcat, b, topic, len(lines), `%k:%s\n`)
		if want := strings.Join(lines, "\n") + "\n"; got != want {
			t.Fatalf("auto-created topic:\n%s", firstDiff(got, want))
		}
	})
}

// TestKcatExitAtEnd: `kcat -C -e` (the way people dump a topic) reads everything and exits
// at the end of every partition. librdkafka learns it is at the end from a fetch response
// with no records for the partition, so that response must parse.
func TestKcatExitAtEnd(t *testing.T) {
	kcat := kcatPath(t)
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	const topic = "kcat-eof"
	createTopic(t, adm, topic, 3, nil)
	lines := kcatLines("eof", 300)
	runKcat(t, kcat, strings.Join(lines, "\n")+"\n", "-P", "-b", tb.Addr, "-t", topic, "-K:")
	got := runKcat(t, kcat, "", "-C", "-b", tb.Addr, "-t", topic, "-o", "beginning", "-e", "-f", `%k:%s\n`)
	gotLines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	slices.Sort(gotLines)
	if !slices.Equal(gotLines, lines) { // lines are in key order already
		t.Fatalf("kcat -e read %d lines, want the %d produced (sorted):\n%s", len(gotLines), len(lines), firstDiff(strings.Join(gotLines, "\n"), strings.Join(lines, "\n")))
	}
	// An empty topic: kcat -e exits at once with nothing.
	createTopic(t, adm, "kcat-eof-empty", 1, nil)
	if got := runKcat(t, kcat, "", "-C", "-b", tb.Addr, "-t", "kcat-eof-empty", "-o", "beginning", "-e", "-q"); got != "" {
		t.Fatalf("kcat -e on an empty topic printed %q", got)
	}
}

// checkPartitioned parses "partition\toffset\theaders\tkey:value" lines and checks them
// against the produced lines: nothing missing or extra, every partition's offsets
// contiguous from 0, within a partition the order the producer sent, headers on each.
func checkPartitioned(t *testing.T, out string, sent []string, partitions int, headers string) {
	t.Helper()
	index := map[string]int{}
	for i, l := range sent {
		index[l] = i
	}
	next := map[int]int{}
	last := map[int]int{}
	seen := map[string]bool{}
	for _, row := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		f := strings.SplitN(row, "\t", 4)
		if len(f) != 4 {
			t.Fatalf("unparsable kcat line %q", row)
		}
		p, _ := strconv.Atoi(f[0])
		o, _ := strconv.Atoi(f[1])
		if o != next[p] {
			t.Fatalf("partition %d: offset %d, want %d (contiguous from 0)", p, o, next[p])
		}
		next[p]++
		if f[2] != headers {
			t.Fatalf("partition %d offset %d: headers %q, want %q", p, o, f[2], headers)
		}
		i, ok := index[f[3]]
		if !ok {
			t.Fatalf("partition %d offset %d: %q was never produced", p, o, f[3])
		}
		if seen[f[3]] {
			t.Fatalf("partition %d offset %d: %q consumed twice", p, o, f[3])
		}
		seen[f[3]] = true
		if prev, ok := last[p]; ok && i < prev {
			t.Fatalf("partition %d offset %d: line %d after line %d, out of producer order", p, o, i, prev)
		}
		last[p] = i
	}
	if len(seen) != len(sent) {
		t.Fatalf("consumed %d distinct lines, produced %d", len(seen), len(sent))
	}
	if len(next) != partitions {
		t.Fatalf("records landed in %d partitions, want all %d", len(next), partitions)
	}
}

// firstDiff describes where two outputs first differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d (of got %d, want %d):\n got  %.120q\n want %.120q", i+1, len(g), len(w), gl, wl)
		}
	}
	return "(no difference)"
}

// TestKcatCompression: librdkafka 2.0.2's producer with each codec it has; the broker
// stores the batches as compressed (checked with kgo, which reports each batch's codec)
// and kcat reads every line back.
func TestKcatCompression(t *testing.T) {
	kcat := kcatPath(t)
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	for _, c := range []struct {
		name string
		attr uint8
	}{{"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}} {
		t.Run(c.name, func(t *testing.T) {
			topic := "kcat-z-" + c.name
			createTopic(t, adm, topic, 1, nil)
			lines := kcatLines(c.name, 2000)
			runKcat(t, kcat, strings.Join(lines, "\n")+"\n", "-P", "-b", tb.Addr, "-t", topic, "-K:", "-z", c.name)
			got := kcatConsume(t, kcat, tb.Addr, topic, len(lines), `%k:%s\n`)
			if want := strings.Join(lines, "\n") + "\n"; got != want {
				t.Fatalf("-z %s round trip:\n%s", c.name, firstDiff(got, want))
			}
			recs := consumeExactly(t, tb.Addr, topic, 1, len(lines))
			for _, r := range recs {
				if ct := r.Attrs.CompressionType(); ct != c.attr {
					t.Fatalf("offset %d stored with codec %d, kcat -z %s sent codec %d", r.Offset, ct, c.name, c.attr)
				}
			}
		})
	}
}

// TestKcatMetadata: kcat -L lists the broker and the topic with its partitions, leader,
// replicas and ISR, as JSON and as text.
func TestKcatMetadata(t *testing.T) {
	kcat := kcatPath(t)
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	const topic = "kcat-listed"
	createTopic(t, adm, topic, 3, nil)
	createTopic(t, adm, "kcat-other", 1, nil)

	var md struct {
		OriginatingBroker struct {
			ID   int32  `json:"id"`
			Name string `json:"name"`
		} `json:"originating_broker"`
		Brokers []struct {
			ID   int32  `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string `json:"topic"`
			Error      string `json:"error"`
			Partitions []struct {
				Partition int32  `json:"partition"`
				Leader    int32  `json:"leader"`
				Error     string `json:"error"`
				Replicas  []struct {
					ID int32 `json:"id"`
				} `json:"replicas"`
				ISRs []struct {
					ID int32 `json:"id"`
				} `json:"isrs"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	out := runKcat(t, kcat, "", "-L", "-J", "-b", tb.Addr)
	if err := json.Unmarshal([]byte(out), &md); err != nil {
		t.Fatalf("kcat -L -J output is not the JSON kcat documents: %v\n%s", err, out)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 1 || md.Brokers[0].Name != tb.Addr {
		t.Fatalf("kcat -L brokers: %+v, want one broker id 1 at %s", md.Brokers, tb.Addr)
	}
	var names []string
	for _, tp := range md.Topics {
		names = append(names, tp.Topic)
		if tp.Topic != topic {
			continue
		}
		if tp.Error != "" || len(tp.Partitions) != 3 {
			t.Fatalf("kcat -L %s: error %q, %d partitions; want 3 healthy", topic, tp.Error, len(tp.Partitions))
		}
		for i, p := range tp.Partitions {
			if p.Partition != int32(i) || p.Leader != 1 || p.Error != "" || len(p.Replicas) != 1 || p.Replicas[0].ID != 1 || len(p.ISRs) != 1 || p.ISRs[0].ID != 1 {
				t.Fatalf("kcat -L %s partition %d: %+v, want leader 1, replicas [1], isr [1]", topic, i, p)
			}
		}
	}
	slices.Sort(names)
	if !slices.Contains(names, topic) || !slices.Contains(names, "kcat-other") {
		t.Fatalf("kcat -L lists topics %v, want %s and kcat-other among them", names, topic)
	}

	text := runKcat(t, kcat, "", "-L", "-b", tb.Addr, "-t", topic)
	for _, want := range []string{
		"1 brokers:",
		"broker 1 at " + tb.Addr,
		fmt.Sprintf("topic %q with 3 partitions:", topic),
		"partition 2, leader 1, replicas: 1, isrs: 1",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("kcat -L -t %s output lacks %q:\n%s", topic, want, text)
		}
	}
	if strings.Contains(text, "kcat-other") {
		t.Fatalf("kcat -L -t %s lists other topics:\n%s", topic, text)
	}
}
