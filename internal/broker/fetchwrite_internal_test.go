package broker

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/server"
)

// exactBatches returns batches (one or two) totalling exactly n bytes.
func exactBatches(t *testing.T, n int) [][]byte {
	t.Helper()
	enc := func(valueBytes ...int) []byte {
		var recs []kmsg.Record
		for _, v := range valueBytes {
			recs = append(recs, kmsg.Record{Value: bytes.Repeat([]byte{byte(v)}, v)})
		}
		b, err := batch.Encode(nil, batch.NoProducer(0, 1_700_000_000_000), recs, batch.CodecNone)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// One record; else a small record and a large one (record sizes skip a value where
	// their length varint grows); else a small batch and a large one.
	for small := -1; small < 8; small++ {
		for v := max(n-150, 0); v <= n; v++ {
			if small < 0 {
				if b := enc(v); len(b) == n {
					return [][]byte{b}
				}
			} else if b := enc(small, v); len(b) == n {
				return [][]byte{b}
			} else if first := enc(small); len(first)+len(enc(v)) == n {
				return [][]byte{first, enc(v)}
			}
		}
	}
	t.Fatalf("no batches of exactly %d bytes", n)
	return nil
}

// recordsLog is a log holding batches of exactly n bytes in all.
func recordsLog(t *testing.T, n int) *log.Log {
	t.Helper()
	l, err := log.Open(t.TempDir(), log.DefaultConfig(), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, _, err := l.Append(exactBatches(t, n)); err != nil {
		t.Fatal(err)
	}
	return l
}

// materialize is what the server puts on the wire for a spliced body: the encoded bytes
// with each insert's file bytes put in.
func materialize(t *testing.T, enc []byte, ins []server.Insert) []byte {
	t.Helper()
	var out []byte
	at := 0
	for _, in := range ins {
		out = append(out, enc[at:in.At]...)
		b := make([]byte, in.Chunk.Len)
		if _, err := in.Chunk.File.ReadAt(b, in.Chunk.Off); err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
		at = in.At
	}
	return append(out, enc[at:]...)
}

// wantEncodings checks that r's spliced body (appended after a prefix it must keep) and its
// copying encoding are both want.
func wantEncodings(t *testing.T, r server.SplicedResponse, want []byte) {
	t.Helper()
	enc, ins, err := r.AppendSpliced([]byte("prefix"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(enc[:6]) != "prefix" {
		t.Fatal("AppendSpliced overwrote dst")
	}
	for i := range ins {
		ins[i].At -= 6
	}
	if got := materialize(t, enc[6:], ins); !bytes.Equal(got, want) {
		t.Fatalf("spliced body (%d bytes, %d inserts) differs from the copying encoding (%d bytes)", len(got), len(ins), len(want))
	}
	if got := r.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("AppendTo (%d bytes) differs from the copying encoding (%d bytes)", len(got), len(want))
	}
}

// TestFetchReplyEncoding: for every Fetch version and records lengths at every width
// boundary of the length prefix (INT32, or UVARINT length+1 in 1 to 4 bytes), in responses
// with several topics and partitions, some empty, some erroring, some with aborted
// transactions or tagged fields, the zero-copy body (kmsg's encoding with the file bytes
// spliced in) is byte for byte the copying path's (kmsg encoding the records read with
// Log.Read), and encoding leaves the response as it was.
func TestFetchReplyEncoding(t *testing.T) {
	sizes := []int{72, 126, 127, 128, 5000, 16382, 16383, 16384, 300_000, 1<<21 - 2, 1<<21 - 1, 1 << 21}
	logs := make([]*log.Log, len(sizes))
	for i, n := range sizes {
		logs[i] = recordsLog(t, n)
	}
	type part struct {
		topic     int // 0: "alpha", 1: "beta"
		partition int32
		log       int // index into logs, -1 none
		errCode   int16
		aborted   bool
		leader    bool // a tagged field (flexible versions)
	}
	layouts := map[string][]part{
		"one": {{0, 0, 10, 0, false, false}},
		"mixed": {{0, 0, 0, 0, false, false}, {0, 1, -1, 0, false, false}, {0, 2, 1, 0, true, false},
			{0, 3, -1, kerr.OffsetOutOfRange.Code, false, true}, {1, 0, 2, 0, false, true}, {1, 5, 3, 0, true, true}},
		"widths": {{0, 0, 4, 0, false, false}, {0, 1, 5, 0, false, false}, {0, 2, 6, 0, false, false},
			{1, 0, 7, 0, false, false}, {1, 1, 8, 0, false, false}, {1, 2, 9, 0, false, false}, {1, 3, 11, 0, false, false}},
		"noRecords": {{0, 0, -1, 0, false, false}, {1, 0, -1, kerr.UnknownTopicOrPartition.Code, false, false}},
	}
	names := []string{"alpha", "beta"}
	ids := [][16]byte{{1, 2, 3}, {4, 5, 6}}
	for name, layout := range layouts {
		for version := int16(4); version <= 18; version++ {
			t.Run(fmt.Sprintf("%s/v%d", name, version), func(t *testing.T) {
				resp := kmsg.NewPtrFetchResponse()
				resp.SetVersion(version)
				resp.SessionID = 77
				fr := newFetchReply(resp)
				reference := kmsg.NewPtrFetchResponse() // the copying path: kmsg with Read's bytes
				reference.SetVersion(version)
				reference.SessionID = 77
				for _, p := range layout {
					for _, r := range []*kmsg.FetchResponse{resp, reference} {
						if n := len(r.Topics); n == 0 || r.Topics[n-1].Topic != names[p.topic] {
							rt := kmsg.NewFetchResponseTopic()
							rt.Topic, rt.TopicID = names[p.topic], ids[p.topic]
							r.Topics = append(r.Topics, rt)
						}
						rp := kmsg.NewFetchResponseTopicPartition()
						rp.Partition, rp.ErrorCode, rp.HighWatermark = p.partition, p.errCode, 1234
						rp.RecordBatches = []byte{}
						if p.aborted {
							a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
							a.ProducerID, a.FirstOffset = 9, 3
							rp.AbortedTransactions = append(rp.AbortedTransactions, a)
						}
						if p.leader {
							rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = 1, 2
						}
						rt := &r.Topics[len(r.Topics)-1]
						rt.Partitions = append(rt.Partitions, rp)
					}
					if p.log < 0 {
						continue
					}
					tg := fetchTarget{topic: names[p.topic], topicID: ids[p.topic], partition: p.partition}
					if _, err := fr.readRecords(logs[p.log], tg, math.MaxInt32, math.MaxInt64, func(int64) bool { return true }); err != nil {
						t.Fatal(err)
					}
					data, err := logs[p.log].Read(0, math.MaxInt32, math.MaxInt64)
					if err != nil || len(data) != sizes[p.log] {
						t.Fatalf("Read: %d bytes, %v", len(data), err)
					}
					rt := &reference.Topics[len(reference.Topics)-1]
					rt.Partitions[len(rt.Partitions)-1].RecordBatches = data
				}
				defer fr.Release()
				want := reference.AppendTo(nil)
				before := resp.AppendTo(nil)

				wantEncodings(t, fr, want)
				if after := resp.AppendTo(nil); !bytes.Equal(after, before) {
					t.Fatal("encoding changed the response")
				}
				var back kmsg.FetchResponse
				back.SetVersion(version)
				if err := back.ReadFrom(want); err != nil {
					t.Fatalf("kmsg cannot decode the response: %v", err)
				}
			})
		}
	}
}

// TestFetchReplyTrimmed: partitions dropped after the read (an incremental fetch session
// drops unchanged ones) take their records with them; the others keep theirs.
func TestFetchReplyTrimmed(t *testing.T) {
	l1, l2, l3 := recordsLog(t, 500), recordsLog(t, 70_000), recordsLog(t, 900)
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	fr := newFetchReply(resp)
	defer fr.Release()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	for i, l := range []*log.Log{l1, l2, l3} {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = int32(i)
		rp.RecordBatches = []byte{}
		rt.Partitions = append(rt.Partitions, rp)
		if _, err := fr.readRecords(l, fetchTarget{topic: "t", partition: int32(i)}, math.MaxInt32, math.MaxInt64, func(int64) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
	resp.Topics = append(resp.Topics, rt)
	resp.Topics[0].Partitions = append(resp.Topics[0].Partitions[:1], resp.Topics[0].Partitions[2]) // drop partition 1

	enc, ins, err := fr.AppendSpliced(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := materialize(t, enc, ins)
	var back kmsg.FetchResponse
	back.SetVersion(12)
	if err := back.ReadFrom(got); err != nil {
		t.Fatal(err)
	}
	ps := back.Topics[0].Partitions
	want1, _ := l1.Read(0, math.MaxInt32, math.MaxInt64)
	want3, _ := l3.Read(0, math.MaxInt32, math.MaxInt64)
	if len(ps) != 2 || ps[0].Partition != 0 || ps[1].Partition != 2 ||
		!bytes.Equal(ps[0].RecordBatches, want1) || !bytes.Equal(ps[1].RecordBatches, want3) {
		t.Fatalf("trimmed response decoded to %d partitions with the wrong records", len(ps))
	}
	if !fr.hasRecords(&resp.Topics[0], &resp.Topics[0].Partitions[1]) {
		t.Fatal("hasRecords: partition 2 has records")
	}
}

// TestFetchReplyOutlivesSegments: a response read before its topic's data is deleted
// (DeleteRecords, then the whole log) still encodes to the bytes it was read with.
func TestFetchReplyOutlivesSegments(t *testing.T) {
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 4000
	l, err := log.Open(t.TempDir(), cfg, log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, _, err := l.Append(exactBatches(t, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(16)
	rt := kmsg.NewFetchResponseTopic()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = []byte{}
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	fr := newFetchReply(resp)
	defer fr.Release()
	if _, err := fr.readRecords(l, fetchTarget{}, 1<<20, math.MaxInt64, func(int64) bool { return true }); err != nil {
		t.Fatal(err)
	}
	want := fr.AppendTo(nil)
	if _, err := l.DeleteRecordsBefore(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	enc, ins, err := fr.AppendSpliced(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := materialize(t, enc, ins); !bytes.Equal(got, want) {
		t.Fatal("records changed after their segments were deleted")
	}
}
