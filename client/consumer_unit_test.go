package client

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFetchSessionLifecycle(t *testing.T) {
	a, b, c := TopicPartition{"t", 0}, TopicPartition{"t", 1}, TopicPartition{"u", 0}
	var s fetchSession

	// First fetch: full, asks for a session.
	want := map[TopicPartition]int64{a: 0, b: 10}
	p := s.plan(want)
	if !p.full || p.sessionID != 0 || p.epoch != 0 || len(p.include) != 2 {
		t.Fatalf("first plan %+v", p)
	}
	s.succeeded(p, 77)
	if s.id != 77 || s.epoch != 1 {
		t.Fatalf("after full: %+v", s)
	}

	// Nothing changed: an empty incremental fetch with the next epoch.
	p = s.plan(want)
	if p.full || p.sessionID != 77 || p.epoch != 1 || len(p.include) != 0 || len(p.forget) != 0 {
		t.Fatalf("unchanged plan %+v", p)
	}
	s.succeeded(p, 77)

	// a advanced (records consumed), c added, b dropped.
	want = map[TopicPartition]int64{a: 5, c: 0}
	p = s.plan(want)
	if p.epoch != 2 || !reflect.DeepEqual(p.include, map[TopicPartition]int64{a: 5, c: 0}) || !reflect.DeepEqual(p.forget, []TopicPartition{b}) {
		t.Fatalf("changed plan %+v", p)
	}
	s.succeeded(p, 77)
	if !reflect.DeepEqual(s.sent, map[TopicPartition]int64{a: 5, c: 0}) || s.epoch != 3 {
		t.Fatalf("session after change: %+v", s)
	}

	// A different session id in the answer: start over.
	s.succeeded(s.plan(want), 78)
	if p = s.plan(want); !p.full || p.epoch != 0 {
		t.Fatalf("after id mismatch: %+v", p)
	}

	// The broker declines sessions: stay full.
	s.succeeded(p, 0)
	if p = s.plan(want); !p.full || p.epoch != 0 {
		t.Fatalf("declined: %+v", p)
	}

	// Disabled: epoch -1, always full.
	d := fetchSession{disabled: true}
	if p = d.plan(want); !p.full || p.epoch != -1 || p.sessionID != 0 {
		t.Fatalf("disabled plan %+v", p)
	}

	if nextSessionEpoch(math.MaxInt32) != 1 || nextSessionEpoch(4) != 5 {
		t.Fatal("epoch wrap")
	}
}

// encodeAt encodes records with the given values as one batch at base offset.
func encodeAt(t *testing.T, base int64, pid int64, txn bool, values ...string) []byte {
	t.Helper()
	h := batch.NoProducer(base, 1000)
	if pid >= 0 {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, 0, 0
	}
	if txn {
		h.Attributes |= batch.AttrTransactional
	}
	var recs []kmsg.Record
	for _, v := range values {
		recs = append(recs, kmsg.Record{Value: []byte(v)})
	}
	b, err := batch.Encode(nil, h, recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func marker(base, pid int64, commit bool) []byte {
	b := batch.ControlBatch(pid, 0, commit, 0, 1000)
	batch.SetBaseOffset(b, base)
	return b
}

func values(rs []*Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%d:%s", r.Offset, r.Value))
	}
	return out
}

func TestDecodePartition(t *testing.T) {
	tp := TopicPartition{"t", 0}
	var raw []byte
	raw = append(raw, encodeAt(t, 0, -1, false, "a", "b", "c")...) // 0-2
	raw = append(raw, encodeAt(t, 3, 9, true, "t1", "t2")...)      // 3-4: txn of pid 9, committed
	raw = append(raw, marker(5, 9, true)...)                       // 5: commit
	raw = append(raw, encodeAt(t, 6, 8, true, "x1")...)            // 6: txn of pid 8, aborted
	raw = append(raw, encodeAt(t, 7, -1, false, "d")...)           // 7
	raw = append(raw, encodeAt(t, 8, 8, true, "x2")...)            // 8: still pid 8's aborted txn
	raw = append(raw, marker(9, 8, false)...)                      // 9: abort
	raw = append(raw, encodeAt(t, 10, 8, true, "y1")...)           // 10: pid 8's next txn (open)
	full := encodeAt(t, 11, -1, false, "e")
	raw = append(raw, full[:len(full)-3]...) // partial trailing batch

	aborted := []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 8, FirstOffset: 6}}

	recs, next, err := decodePartition(tp, 1, raw, aborted, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := values(recs), []string{"1:b", "2:c", "3:t1", "4:t2", "6:x1", "7:d", "8:x2", "10:y1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read_uncommitted: %v, want %v", got, want)
	}
	if next != 11 {
		t.Fatalf("next %d, want 11 (partial batch ignored)", next)
	}

	recs, next, err = decodePartition(tp, 1, raw, aborted, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := values(recs), []string{"1:b", "2:c", "3:t1", "4:t2", "7:d", "10:y1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read_committed: %v, want %v", got, want)
	}
	if next != 11 {
		t.Fatalf("next %d", next)
	}

	// Starting past everything but the partial batch: nothing, offset unchanged.
	recs, next, _ = decodePartition(tp, 11, raw, nil, false)
	if len(recs) != 0 || next != 11 {
		t.Fatalf("past the end: %v next %d", values(recs), next)
	}

	// A corrupt batch: records before it are kept, the error reported.
	bad := encodeAt(t, 11, -1, false, "z")
	bad[len(bad)-1] ^= 0xff
	recs, next, err = decodePartition(tp, 7, append(encodeAt(t, 7, -1, false, "d"), bad...), nil, false)
	if err == nil || len(recs) != 1 || next != 8 {
		t.Fatalf("corrupt: %v next %d err %v", values(recs), next, err)
	}
}
