package client

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJudge(t *testing.T) {
	cur := producerID{id: 5, epoch: 3}
	old := producerID{id: 5, epoch: 2}
	base := attempt{idempotent: true, sentWith: cur, current: cur}
	with := func(f func(*attempt)) attempt { a := base; f(&a); return a }
	for _, tc := range []struct {
		name string
		err  error
		a    attempt
		want verdict
	}{
		{"success", nil, base, verdict{outcome: batchDone}},
		{"duplicate is success", kerr.DuplicateSequenceNumber, base, verdict{outcome: batchDone}},
		{"held back (never written): plain retry", errHeldBack, base, verdict{outcome: batchRetry}},
		{"out of order after an earlier failure: plain retry", kerr.OutOfOrderSequenceNumber,
			with(func(a *attempt) { a.earlierFailed = true }), verdict{outcome: batchRetry}},
		{"out of order at the head: real gap, bump", kerr.OutOfOrderSequenceNumber, base,
			verdict{outcome: batchRetry, bumpEpoch: true}},
		{"out of order from an old epoch: retry", kerr.OutOfOrderSequenceNumber,
			with(func(a *attempt) { a.sentWith = old }), verdict{outcome: batchRetry}},
		{"out of order, not idempotent: fail", kerr.OutOfOrderSequenceNumber,
			with(func(a *attempt) { a.idempotent = false }), verdict{outcome: batchFail}},
		{"unknown producer id: bump", kerr.UnknownProducerID, base, verdict{outcome: batchRetry, bumpEpoch: true}},
		{"invalid epoch from old epoch: retry", kerr.InvalidProducerEpoch,
			with(func(a *attempt) { a.sentWith = old }), verdict{outcome: batchRetry}},
		{"invalid epoch with current epoch: fail", kerr.InvalidProducerEpoch, base, verdict{outcome: batchFail}},
		{"fenced: fail", kerr.ProducerFenced, base, verdict{outcome: batchFail}},
		{"not leader: refresh", kerr.NotLeaderForPartition, base, verdict{outcome: batchRetry, refreshMeta: true}},
		{"unknown topic: refresh", kerr.UnknownTopicOrPartition, base, verdict{outcome: batchRetry, refreshMeta: true}},
		{"connection lost: refresh", fmt.Errorf("x: %w", ErrConnClosed), base, verdict{outcome: batchRetry, refreshMeta: true}},
		{"request timeout from broker: retry", kerr.RequestTimedOut, base, verdict{outcome: batchRetry}},
		{"too large: fail", kerr.MessageTooLarge, base, verdict{outcome: batchFail}},
		{"invalid record: fail", kerr.InvalidRecord, base, verdict{outcome: batchFail}},
		{"authorization: fail", kerr.TopicAuthorizationFailed, base, verdict{outcome: batchFail}},
	} {
		if got := judge(tc.err, tc.a); got != tc.want {
			t.Errorf("%s: judge = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestNextSequenceWraps(t *testing.T) {
	for _, tc := range []struct{ seq, n, want int32 }{
		{0, 5, 5},
		{math.MaxInt32 - 5, 5, math.MaxInt32},
		{math.MaxInt32 - 4, 5, 0},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1},
	} {
		if got := nextSequence(tc.seq, tc.n); got != tc.want {
			t.Errorf("nextSequence(%d, %d) = %d, want %d", tc.seq, tc.n, got, tc.want)
		}
	}
}

func TestIDStateBump(t *testing.T) {
	var s idState
	s.cur = noProducerID
	if s.localBump() {
		t.Fatal("bumped without an id")
	}
	s.set(producerID{id: 9, epoch: 0})
	g := s.gen
	s.bumpNeeded = true
	if !s.localBump() || s.cur != (producerID{9, 1}) || s.gen != g+1 || s.bumpNeeded {
		t.Fatalf("after bump: %+v", s)
	}
	s.set(producerID{id: 9, epoch: math.MaxInt16})
	if s.localBump() {
		t.Fatal("bumped past the maximum epoch")
	}
}

// TestBatchEncodeRoundTrip encodes batches the way the producer does and decodes them
// independently with batch.Parse (CRC, header) and kmsg.
func TestBatchEncodeRoundTrip(t *testing.T) {
	for _, codec := range []Compression{NoCompression, Gzip, Snappy, LZ4, Zstd} {
		t.Run(codec.String(), func(t *testing.T) {
			pb := &partBuf{tp: TopicPartition{"t", 0}}
			base := time.UnixMilli(1_700_000_000_000)
			b := &recBatch{pb: pb, firstTs: base.UnixMilli()}
			var want []*Record
			for i := 0; i < 50; i++ {
				r := &Record{
					Topic:     "t",
					Key:       []byte(fmt.Sprint("k", i)),
					Value:     bytes.Repeat([]byte{byte(i)}, i*10),
					Headers:   []Header{{Key: "h", Value: []byte(fmt.Sprint(i))}},
					Timestamp: base.Add(time.Duration(i-3) * time.Millisecond), // some before firstTs
				}
				if i == 7 {
					r.Key, r.Value = nil, nil
				}
				b.add(r, nil, recordSize(r))
				want = append(want, r)
			}
			b.pid, b.seq = producerID{id: 42, epoch: 3}, 1000
			enc, err := b.encode(codec, false)
			if err != nil {
				t.Fatal(err)
			}
			h, err := batch.Parse(enc)
			if err != nil {
				t.Fatalf("batch.Parse: %v", err)
			}
			if !batch.CRCValid(enc) {
				t.Fatal("CRC invalid")
			}
			if h.ProducerID != 42 || h.ProducerEpoch != 3 || h.FirstSequence != 1000 || h.NumRecords != 50 ||
				h.LastOffsetDelta != 49 || Compression(h.Attributes&batch.AttrCompressionMask) != codec {
				t.Fatalf("header %+v", h)
			}
			if h.FirstTimestamp != base.UnixMilli() || h.MaxTimestamp != base.Add(46*time.Millisecond).UnixMilli() {
				t.Fatalf("timestamps first %d max %d", h.FirstTimestamp, h.MaxTimestamp)
			}
			recs, err := batch.Records(enc)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range recs {
				w := want[i]
				if !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || (r.Key == nil) != (w.Key == nil) ||
					(r.Value == nil) != (w.Value == nil) || r.OffsetDelta != int32(i) ||
					h.FirstTimestamp+r.TimestampDelta64 != w.Timestamp.UnixMilli() ||
					len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != fmt.Sprint(i) {
					t.Fatalf("record %d: %+v, want %+v", i, r, w)
				}
			}
			// A resend with the same header reuses the bytes; a new epoch re-encodes.
			again, _ := b.encode(codec, false)
			if &again[0] != &enc[0] {
				t.Fatal("same header was re-encoded")
			}
			b.pid, b.seq = producerID{id: 42, epoch: 4}, 0
			bumped, _ := b.encode(codec, false)
			h2, err := batch.Parse(bumped)
			if err != nil || h2.ProducerEpoch != 4 || h2.FirstSequence != 0 {
				t.Fatalf("re-encoded header %+v, %v", h2, err)
			}
		})
	}
}

// TestRecordSizeIsAnUpperBound checks the batch size estimate never undercounts.
func TestRecordSizeIsAnUpperBound(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 20000} {
		r := &Record{Key: make([]byte, n), Value: make([]byte, 2*n), Headers: []Header{{Key: "abc", Value: make([]byte, n)}}}
		kr := kmsg.Record{TimestampDelta64: math.MaxInt32 * 4, OffsetDelta: math.MaxInt32, Key: r.Key, Value: r.Value,
			Headers: []kmsg.Header{{Key: "abc", Value: r.Headers[0].Value}}}
		kr.Length = math.MaxInt32
		if enc := kr.AppendTo(nil); len(enc) > recordSize(r) {
			t.Errorf("n=%d: encoded %d > estimate %d", n, len(enc), recordSize(r))
		}
	}
}

func TestAcksWire(t *testing.T) {
	if AcksAll.wire() != -1 || AcksLeader.wire() != 1 || AcksNone.wire() != 0 {
		t.Fatal("acks mapping")
	}
	var zero ProducerConfig
	if zero.Acks != AcksAll {
		t.Fatal("zero Acks is not AcksAll")
	}
	if _, err := NewProducer(ProducerConfig{}); !errors.Is(err, ErrNoBrokers) {
		t.Fatalf("no brokers: %v", err)
	}
	if _, err := NewProducer(ProducerConfig{Brokers: []string{"x:1"}, MaxInFlight: 6}); err == nil {
		t.Fatal("MaxInFlight 6 accepted with idempotence")
	}
}
