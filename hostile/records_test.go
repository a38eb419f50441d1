package hostile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/compress"
)

// malformedBatch is a CRC-valid v2 batch whose records do not agree with its header.
type malformedBatch struct {
	name string
	b    rawBatch
}

// malformedBatches are the defects Kafka's LogValidator refuses (#17 finding 3).
func malformedBatches(codec int8) []malformedBatch {
	good := goodRecords(3)
	lyingKey := record(0, -7, []byte("1234567"), 1, []byte("v")) // negative key length, key bytes follow
	negLen := append([]byte{0x13}, good[1:]...)                  // record length varint -10
	garbage := []byte("this is not a record section at all, not one bit of it")
	out := []malformedBatch{
		{"negative key length", noProducer(0, 1, lyingKey)},
		{"negative record length", noProducer(2, 3, negLen)},
		{"garbage record bytes", noProducer(0, 1, garbage)},
		{"more records than the count", noProducer(1, 2, good)},
		{"fewer records than the count", noProducer(3, 4, good)},
		{"a count with no record bytes", noProducer(4, 5, nil)},
	}
	for i := range out {
		out[i].b.codec = codec
	}
	return out
}

// produceMalformed sends every malformed batch of codec to topic between good batches and
// fails the test for each one the broker accepts. Kafka answers CORRUPT_MESSAGE (2); the
// broker may also answer INVALID_RECORD (87), which a client treats the same.
func produceMalformed(t *testing.T, addr, topic string, codec int8) {
	t.Helper()
	c := dialRaw(t, addr)
	good := func() {
		code, err := produceRaw(t, c, topic, 0, noProducer(1, 2, goodRecords(2)).bytes(t))
		if err != nil || code != 0 {
			t.Fatalf("good batch: code %d, %v", code, err)
		}
	}
	good()
	for _, m := range malformedBatches(codec) {
		code, err := produceRaw(t, c, topic, 0, m.b.bytes(t))
		if err != nil {
			t.Errorf("%s %s batch: %v (Kafka answers CORRUPT_MESSAGE)", compress.Name(codec), m.name, err)
			c = dialRaw(t, addr)
		} else if code != 2 && code != 87 {
			t.Errorf("%s %s batch: error code %d, want 2 (CORRUPT_MESSAGE)", compress.Name(codec), m.name, code)
		}
		good()
	}
}

// checkReadable reads topic[0] with kgo and fails the test unless every offset below the
// end holds one of the good records: a consumer must never meet a record it cannot
// parse, nor silently skip offsets.
func checkReadable(t *testing.T, addr, topic string) {
	t.Helper()
	cl := readerClient(t, addr, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	next := int64(0)
	seen := map[string]bool{}
	for next < end.Offset && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if ctx.Err() == nil && !seen[err.Error()] {
				seen[err.Error()] = true
				t.Errorf("consumer of %s at offset %d: %v", topic, next, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Errorf("consumer of %s: offset %d follows %d: offsets %d-%d skipped", topic, r.Offset, next-1, next, r.Offset-1)
			}
			if !strings.HasPrefix(string(r.Value), "good-") {
				t.Errorf("consumer of %s: offset %d holds %q", topic, r.Offset, r.Value)
			}
			next = r.Offset + 1
		})
	}
	if next < end.Offset {
		t.Errorf("consumer of %s stopped at offset %d of %d", topic, next, end.Offset)
	}
}

// createTopic creates topic with partitions from the victim's side.
func createTopic(t *testing.T, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(newClient(t, addr)).CreateTopic(ctx, partitions, 1, configs, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

func TestCompressedBatchValidation(t *testing.T) {
	runAttack(t, attack{
		name: "malformed compressed batches", rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			createTopic(t, h.addr(), "attacked", 1, nil)
			for _, codec := range []int8{compress.Gzip, compress.Snappy, compress.LZ4, compress.Zstd} {
				produceMalformed(t, h.addr(), "attacked", codec)
			}
		},
		after: func(t *testing.T, h *harness) { checkReadable(t, h.addr(), "attacked") },
	})
}
