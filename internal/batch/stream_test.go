package batch

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/alloctest"
	"github.com/exactq/exactq/internal/compress"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// bombBatches are compressed batches whose valid records hold 64 MiB of zeros: one
// record with a 64 MiB value (a record larger than the window, streamed field by field),
// and 64 Ki records of 1 KiB.
func bombBatches(t testing.TB, codec int8) map[string][]byte {
	one := []kmsg.Record{{Value: make([]byte, 64<<20)}}
	many := make([]kmsg.Record, 64<<10)
	zeros := make([]byte, 1<<10)
	for i := range many {
		many[i].Value = zeros
	}
	return map[string][]byte{
		"one 64 MiB record":  mustEncode(t, NoProducer(0, 1), one, codec),
		"64Ki 1 KiB records": mustEncode(t, NoProducer(0, 1), many, codec),
	}
}

// TestValidateBombs (#17 finding 7): a compressed batch whose records decompress past the
// limit (the topic's max.message.bytes, passed by the broker) is refused with
// MESSAGE_TOO_LARGE, decompressing at most the limit, and allocating (measured, warm)
// almost nothing: its records stream through a pooled 64 KiB window.
func TestValidateBombs(t *testing.T) {
	opts := ValidateOptions{MaxBatchBytes: 16 << 20, MaxDecompressedBytes: 1 << 20}
	for _, codec := range allCodecs[1:] {
		for name, b := range bombBatches(t, codec) {
			t.Run(compress.Name(codec)+"/"+name, func(t *testing.T) {
				_, err := Validate(b, opts)
				if !errors.Is(err, ErrTooLarge) || KafkaCode(err) != kerr.MessageTooLarge.Code {
					t.Fatalf("got %v, want MESSAGE_TOO_LARGE", err)
				}
				perBatch := alloctest.LeastPerCall(3, 10, func() { _, _ = Validate(b, opts) })
				t.Logf("%d-byte batch: %d bytes allocated per Validate", len(b), perBatch)
				if !alloctest.RaceEnabled && perBatch > 64<<10 {
					t.Fatalf("%d bytes allocated per Validate", perBatch)
				}
			})
		}
	}
}

// TestValidateLegitLargeCompressed: a batch compressing 10 MiB of records is accepted
// under max.message.bytes 16 MiB, in every codec, and reads back whole.
func TestValidateLegitLargeCompressed(t *testing.T) {
	recs := make([]kmsg.Record, 10<<10)
	for i := range recs {
		recs[i].Key = fmt.Appendf(nil, "key-%d", i)
		recs[i].Value = fmt.Appendf(nil, "%01010d", i*7919)
	}
	for _, codec := range allCodecs[1:] {
		b := mustEncode(t, idempotentHeader(), recs, codec)
		if _, err := Validate(b, ValidateOptions{MaxBatchBytes: 16 << 20, MaxDecompressedBytes: 16 << 20}); err != nil {
			t.Fatalf("%s (%d bytes compressed): %v", compress.Name(codec), len(b), err)
		}
		if _, err := Validate(b, ValidateOptions{MaxBatchBytes: 16 << 20, MaxDecompressedBytes: 10 << 20}); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s over a 10 MiB limit: %v", compress.Name(codec), err)
		}
	}
}

// TestValidateRecordsLargerThanWindow: records of every size around the stream window
// (parsed in place when they fit it, field by field when not) are accepted compressed,
// and a defect in a large record is found.
func TestValidateRecordsLargerThanWindow(t *testing.T) {
	var recs []kmsg.Record
	for _, n := range []int{0, 1, streamWindowBytes - 20, streamWindowBytes, streamWindowBytes + 1, 3 * streamWindowBytes} {
		recs = append(recs, kmsg.Record{Key: []byte("k"), Value: bytes.Repeat([]byte{'v'}, n),
			Headers: []kmsg.Header{{Key: "h", Value: bytes.Repeat([]byte{'h'}, n/2)}}})
	}
	for _, codec := range allCodecs {
		b := mustEncode(t, idempotentHeader(), recs, codec)
		if _, err := Validate(b, ValidateOptions{Compacted: true}); err != nil {
			t.Fatalf("%s: %v", compress.Name(codec), err)
		}
		// The payload one byte short: the last (largest) record ends past it.
		raw := rawRecords(recs)
		last := batchOf(t, int32(len(recs)), int32(len(recs)-1), codec, raw[:len(raw)-1])
		if _, err := Validate(last, ValidateOptions{}); KafkaCode(err) != kerr.InvalidRecord.Code {
			t.Fatalf("%s: truncated large record: %v", compress.Name(codec), err)
		}
	}
}

// TestValidateBudget: compressed batches reserve decompression memory from the budget,
// concurrent validations never reserve more than it holds, and a batch that cannot get
// budget within the wait is answered REQUEST_TIMED_OUT (retriable) instead of the heap
// growing.
func TestValidateBudget(t *testing.T) {
	b := bombBatches(t, CodecZstd)["64Ki 1 KiB records"]
	good := mustEncode(t, idempotentHeader(), sampleRecords(50), CodecLZ4)
	oneReservation := int64(compress.MemoryBound(CodecZstd, b[HeaderSize:], 1<<20) + streamWindowBytes)
	budget := compress.NewBudget(2*oneReservation, 10*time.Second)
	opts := ValidateOptions{MaxDecompressedBytes: 1 << 20, Budget: budget}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if _, err := Validate(b, opts); !errors.Is(err, ErrTooLarge) {
					t.Errorf("bomb: %v", err)
				}
				if _, err := Validate(good, opts); err != nil {
					t.Errorf("good batch: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if peak := budget.PeakBytes(); peak > budget.CapacityBytes() || peak < oneReservation {
		t.Fatalf("peak reservation %d, budget %d, one reservation %d", peak, budget.CapacityBytes(), oneReservation)
	}

	full := compress.NewBudget(1<<20, 20*time.Millisecond)
	held, _ := full.Acquire(1 << 20)
	_, err := Validate(good, ValidateOptions{Budget: full})
	if !errors.Is(err, ErrBusy) || KafkaCode(err) != kerr.RequestTimedOut.Code {
		t.Fatalf("budget taken: %v, want REQUEST_TIMED_OUT", err)
	}
	full.Release(held)
	if _, err := Validate(good, ValidateOptions{Budget: full}); err != nil {
		t.Fatalf("budget back: %v", err)
	}
	// Uncompressed batches decompress nothing and take no budget.
	held, _ = full.Acquire(1 << 20)
	if _, err := Validate(mustEncode(t, idempotentHeader(), sampleRecords(5), CodecNone), ValidateOptions{Budget: full}); err != nil {
		t.Fatalf("uncompressed with the budget taken: %v", err)
	}
	full.Release(held)
}
