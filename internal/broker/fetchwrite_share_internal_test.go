package broker

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/share"
)

// readShareRecords reads like shareLogs.Read: chunks held in the files.
func readShareRecords(t *testing.T, l *log.Log, offset int64, maxBytes int32, maxOffset int64) *shareRecords {
	t.Helper()
	chunks, n, err := l.ReadChunks(nil, offset, maxBytes, maxOffset)
	if err != nil || n == 0 {
		t.Fatalf("ReadChunks(%d): %d bytes, %v", offset, n, err)
	}
	return &shareRecords{chunks: chunks, n: n}
}

// splitRead describes the batches of a copied read (Log.Read), the reference for
// shareRecords.Batches.
func splitRead(t *testing.T, b []byte) []share.ReadBatch {
	t.Helper()
	var out []share.ReadBatch
	for pos := int64(0); pos < int64(len(b)); {
		n := share.BatchLen(b[pos:])
		fb, err := share.DescribeBatch(b[pos : pos+n])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, share.ReadBatch{FetchedBatch: fb, Pos: pos, Len: n})
		pos += n
	}
	return out
}

// shareTestLog is a log of small segments holding many tiny batches (several headers per
// read window), batches larger than the window, and transactions with COMMIT and ABORT
// markers at every position relative to the window, spanning segments.
func shareTestLog(t *testing.T, dir string) *log.Log {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 40_000
	l, err := log.Open(dir, cfg, log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	enc := func(h batch.Header, n, size int) []byte {
		recs := make([]kmsg.Record, n)
		for i := range recs {
			recs[i].Value = bytes.Repeat([]byte{byte(i)}, size)
		}
		b, err := batch.Encode(nil, h, recs, batch.CodecNone)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i := range 60 {
		var bs [][]byte
		for j := range i % 7 {
			bs = append(bs, enc(batch.NoProducer(0, 1_700_000_000_000), 1, 10+j))
		}
		if i%5 == 0 {
			bs = append(bs, enc(batch.NoProducer(0, 1_700_000_000_000), 20, 1000)) // ~20 KB
		}
		pid := int64(100 + i)
		h := batch.Header{PartitionLeaderEpoch: -1, Attributes: batch.AttrTransactional, ProducerID: pid,
			FirstTimestamp: 1_700_000_000_000}
		bs = append(bs, enc(h, 3, 30), batch.ControlBatch(pid, 0, i%3 != 0, 0, 1_700_000_000_000))
		if _, _, err := l.Append(bs); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestShareRecordsBatches: the batch headers read from the files (a window of several
// headers, big batches' headers alone, control batches whole) describe exactly what
// splitting the copied read describes, for reads from every batch, spanning segments; and
// Slice keeps exactly the bytes of the batches asked for and lets go of the segments it
// drops.
func TestShareRecordsBatches(t *testing.T) {
	dir := t.TempDir()
	l := shareTestLog(t, dir)
	aborts, commits := 0, 0
	for offset := int64(0); offset < l.EndOffset(); offset += 7 {
		for _, maxBytes := range []int32{1, 30_000, 200_000} {
			want, err := l.Read(offset, maxBytes, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			ref := splitRead(t, want)
			r := readShareRecords(t, l, offset, maxBytes, math.MaxInt64)
			got, err := r.Batches()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, ref) {
				t.Fatalf("offset %d, %d bytes: batches from the files differ from the copied read's", offset, maxBytes)
			}
			for _, b := range got {
				if b.Control && b.AbortMarker {
					aborts++
				} else if b.Control {
					commits++
				}
			}
			// Keep a run of whole batches from the middle.
			i, j := len(ref)/3, 2*len(ref)/3
			from, to := ref[i].Pos, ref[j].Pos+ref[j].Len
			r.Slice(from, to)
			sliced, err := r.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sliced, want[from:to]) || r.Len() != to-from {
				t.Fatalf("offset %d, %d bytes: Slice(%d, %d) kept %d other bytes", offset, maxBytes, from, to, len(sliced))
			}
			r.Release()
		}
	}
	if aborts == 0 || commits == 0 {
		t.Fatalf("reads saw %d ABORT and %d COMMIT markers; want both", aborts, commits)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if open := OpenFilesUnder(t, dir); len(open) > 0 {
		t.Fatalf("segments still open after every read was released and the log closed: %v", open)
	}

	// A control batch whose header ends inside the first window and whose marker does not.
	marker := batch.ControlBatch(7, 0, false, 0, 1_700_000_000_000)
	straddle, err := log.Open(t.TempDir(), log.DefaultConfig(), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer straddle.Close()
	if _, _, err := straddle.Append(append(exactBatches(t, shareHeaderWindow-len(marker)+3), marker)); err != nil {
		t.Fatal(err)
	}
	r := readShareRecords(t, straddle, 0, math.MaxInt32, math.MaxInt64)
	defer r.Release()
	got, err := r.Batches()
	if err != nil {
		t.Fatal(err)
	}
	if last := got[len(got)-1]; !last.Control || !last.AbortMarker || last.Pos+int64(batch.HeaderSize) > shareHeaderWindow ||
		last.Pos+last.Len <= shareHeaderWindow {
		t.Fatalf("straddling marker read as %+v", last)
	}
}

// TestShareFetchReplyEncoding: for every ShareFetch version and records lengths at every
// width boundary of the length prefix (UVARINT length+1 in 1 to 4 bytes), in responses with
// several topics and partitions, some without records, some with errors, acknowledgement
// errors or a current leader, the zero-copy body (kmsg's encoding with the file bytes
// spliced in) is byte for byte the copying path's (kmsg encoding the records read with
// Log.Read), as is each copying AppendTo (share.FetchResponse's, shareFetchReply's).
func TestShareFetchReplyEncoding(t *testing.T) {
	sizes := []int{72, 126, 127, 128, 16382, 16383, 16384, 300_000, 1<<21 - 2, 1<<21 - 1, 1 << 21}
	logs := make([]*log.Log, len(sizes))
	for i, n := range sizes {
		logs[i] = recordsLog(t, n)
	}
	ids := [][16]byte{{1, 2, 3}, {4, 5, 6}}
	// Each partition: topic, index, log (-1: no records), error, acknowledgement error.
	type part struct {
		topic, partition, log int
		errCode, ackCode      int16
	}
	layouts := map[string][]part{
		"one":   {{0, 0, 7, 0, 0}},
		"mixed": {{0, 0, 0, 0, 0}, {0, 1, -1, 0, kerr.InvalidRecordState.Code}, {0, 2, 1, 0, 0}, {1, 0, -1, kerr.UnknownTopicID.Code, 0}, {1, 3, 2, 0, 0}},
		"widths": {{0, 0, 3, 0, 0}, {0, 1, 4, 0, 0}, {0, 2, 5, 0, 0}, {0, 3, 6, 0, 0},
			{1, 0, 8, 0, 0}, {1, 1, 9, 0, 0}, {1, 2, 10, 0, 0}},
		"noRecords": {{0, 0, -1, 0, 0}, {1, 0, -1, kerr.NotLeaderForPartition.Code, 0}},
	}
	for name, layout := range layouts {
		for version := int16(0); version <= 2; version++ {
			t.Run(fmt.Sprintf("%s/v%d", name, version), func(t *testing.T) {
				// where[i] is layout[i]'s place: Topics[where[i][0]].Partitions[where[i][1]].
				var where [][2]int
				build := func() *kmsg.ShareFetchResponse {
					r := kmsg.NewPtrShareFetchResponse()
					r.SetVersion(version)
					r.AcquisitionLockTimeoutMillis = 30000
					where = where[:0]
					for _, p := range layout {
						if n := len(r.Topics); n == 0 || r.Topics[n-1].TopicID != ids[p.topic] {
							rt := kmsg.NewShareFetchResponseTopic()
							rt.TopicID = ids[p.topic]
							r.Topics = append(r.Topics, rt)
						}
						rp := kmsg.NewShareFetchResponseTopicPartition()
						rp.Partition, rp.ErrorCode, rp.AcknowledgeErrorCode = int32(p.partition), p.errCode, p.ackCode
						rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
						rp.Records = []byte{}
						if p.log >= 0 {
							a := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
							a.FirstOffset, a.LastOffset, a.DeliveryCount = 0, 1, 1
							rp.AcquiredRecords = append(rp.AcquiredRecords, a)
						}
						rt := &r.Topics[len(r.Topics)-1]
						rt.Partitions = append(rt.Partitions, rp)
						where = append(where, [2]int{len(r.Topics) - 1, len(rt.Partitions) - 1})
					}
					return r
				}
				// The reference: kmsg encoding the bytes Log.Read copies.
				reference := build()
				// The share path's response: records still in the files.
				resp := &share.FetchResponse{ShareFetchResponse: build()}
				for i, p := range layout {
					if p.log < 0 {
						continue
					}
					data, err := logs[p.log].Read(0, math.MaxInt32, math.MaxInt64)
					if err != nil || len(data) != sizes[p.log] {
						t.Fatalf("Read: %d bytes, %v", len(data), err)
					}
					reference.Topics[where[i][0]].Partitions[where[i][1]].Records = data
					resp.Records = append(resp.Records, share.PartitionRecords{TopicID: ids[p.topic], Partition: int32(p.partition),
						Records: readShareRecords(t, logs[p.log], 0, math.MaxInt32, math.MaxInt64), TopicIndex: where[i][0], PartitionIndex: where[i][1]})
				}
				want := reference.AppendTo(nil)
				if got := resp.AppendTo(nil); !bytes.Equal(got, want) {
					t.Fatalf("share.FetchResponse.AppendTo (%d bytes) differs from the copying encoding (%d bytes)", len(got), len(want))
				}
				sr := newShareFetchReply(resp)
				defer sr.Release()
				if resp.Records != nil {
					t.Fatal("newShareFetchReply left the records in the share response")
				}
				wantEncodings(t, sr, want)
				back := kmsg.NewPtrShareFetchResponse()
				back.SetVersion(version)
				if err := back.ReadFrom(want); err != nil {
					t.Fatalf("kmsg cannot decode the response: %v", err)
				}
			})
		}
	}
}
