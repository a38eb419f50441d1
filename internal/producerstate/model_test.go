package producerstate

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// The model keeps every batch of a producer's current epoch (not just five) and derives
// each answer from that full history, in the plainest form of Kafka's rules.
type modelBatch struct {
	first, last  int32
	off, lastOff int64
	ts           int64
}

type modelProducer struct {
	epoch    int16
	coord    int32
	lastTs   int64
	txnFirst int64
	batches  []modelBatch // all batches of the current epoch, oldest first
}

type model struct {
	producers map[int64]*modelProducer
}

func (m *model) check(pid int64, epoch int16, base, last int32, txn bool) (dup *modelBatch, code int16) {
	p := m.producers[pid]
	if p == nil {
		return nil, 0
	}
	if epoch == p.epoch {
		recent := p.batches[max(0, len(p.batches)-5):]
		for i := range recent {
			if recent[i].first == base && recent[i].last == last {
				return &recent[i], 0
			}
		}
	}
	if epoch < p.epoch {
		return nil, kerr.InvalidProducerEpoch.Code
	}
	if p.epoch == -1 {
		// No current epoch (only reachable here through a marker with epoch -1): Kafka
		// accepts any sequence.
	} else if epoch > p.epoch && base != 0 {
		return nil, kerr.OutOfOrderSequenceNumber.Code
	}
	if epoch == p.epoch && p.epoch != -1 {
		want := int64(0)
		if n := len(p.batches); n > 0 {
			want = (int64(p.batches[n-1].last) + 1) % (math.MaxInt32 + 1)
		}
		if int64(base) != want {
			return nil, kerr.OutOfOrderSequenceNumber.Code
		}
	}
	if p.txnFirst >= 0 && !txn {
		return nil, kerr.InvalidTxnState.Code
	}
	return nil, 0
}

func (m *model) get(pid int64) *modelProducer {
	p := m.producers[pid]
	if p == nil {
		p = &modelProducer{epoch: -1, coord: -1, txnFirst: -1}
		m.producers[pid] = p
	}
	return p
}

func (m *model) append(pid int64, epoch int16, b modelBatch, txn bool) {
	p := m.get(pid)
	if p.epoch != epoch {
		p.epoch, p.batches = epoch, nil
	}
	p.batches = append(p.batches, b)
	p.lastTs = b.ts
	if txn && p.txnFirst < 0 {
		p.txnFirst = b.off
	}
}

func (m *model) firstUnstable() (int64, bool) {
	best, ok := int64(math.MaxInt64), false
	for _, p := range m.producers {
		if p.txnFirst >= 0 && p.txnFirst < best {
			best, ok = p.txnFirst, true
		}
	}
	return best, ok
}

// logEntry is what the partition log saw: a batch, or an expiration run.
type logEntry struct {
	batch    []byte
	expireAt int64
}

func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const expirationMs = 500
		cfg := Config{ExpirationMs: expirationMs}
		s := NewWithConfig(cfg)
		m := &model{producers: map[int64]*modelProducer{}}
		var log []logEntry
		next := int64(0)
		now := int64(1_000)
		// Per producer: the epoch and next sequence the "client" believes in, so that
		// most batches are valid and the interesting cases are near them.
		clientEpoch := map[int64]int16{}
		clientSeq := map[int64]int32{}
		pids := []int64{1, 2, 3}

		steps := rapid.IntRange(1, 200).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			now += rapid.Int64Range(0, 60).Draw(t, "dt")
			pid := rapid.SampledFrom(pids).Draw(t, "pid")
			switch op := rapid.IntRange(0, 19).Draw(t, "op"); {
			case op < 14: // data batch
				epoch, seq := clientEpoch[pid], clientSeq[pid]
				n := rapid.Int32Range(1, 3).Draw(t, "n")
				switch kind := rapid.IntRange(0, 9).Draw(t, "kind"); kind {
				case 0: // retry an earlier batch of the model's history (recent or old)
					if p := m.producers[pid]; p != nil && len(p.batches) > 0 {
						b := p.batches[rapid.IntRange(0, len(p.batches)-1).Draw(t, "which")]
						epoch, seq = p.epoch, b.first
						n = int32((int64(b.last)-int64(b.first)+math.MaxInt32+1)%(math.MaxInt32+1)) + 1
					}
				case 1: // gap
					seq = int32((int64(seq) + rapid.Int64Range(1, 3).Draw(t, "gap")) % (math.MaxInt32 + 1))
				case 2: // epoch bump, at 0 or not
					epoch++
					seq = rapid.SampledFrom([]int32{0, 0, 1}).Draw(t, "bumpSeq")
				case 3: // stale epoch
					epoch--
				case 4: // near the wraparound (valid only for an unknown producer)
					seq = math.MaxInt32 - rapid.Int32Range(0, 2).Draw(t, "nearMax")
				}
				txn := rapid.Bool().Draw(t, "txn")
				last := LastSeq(seq, n-1)
				wantDup, wantCode := m.check(pid, epoch, seq, last, txn)
				res, err := s.Check(pid, epoch, seq, last, txn)
				if got := KafkaCode(err); got != wantCode {
					t.Fatalf("Check(pid %d, epoch %d, seq %d..%d, txn %v) = %v (%d), model says %d",
						pid, epoch, seq, last, txn, err, got, wantCode)
				}
				if (wantDup != nil) != res.Duplicate {
					t.Fatalf("duplicate %v, model says %v", res.Duplicate, wantDup != nil)
				}
				if wantDup != nil {
					if res.FirstOffset != wantDup.off || res.LastOffset != wantDup.lastOff || res.TimestampMs != wantDup.ts {
						t.Fatalf("duplicate %+v, model %+v", res, *wantDup)
					}
					continue
				}
				if err != nil {
					continue
				}
				b := Batch{ProducerID: pid, Epoch: epoch, BaseSeq: seq, LastSeq: last, Transactional: txn,
					FirstOffset: next, LastOffset: next + int64(n-1), TimestampMs: now}
				s.Update(b)
				m.append(pid, epoch, modelBatch{first: seq, last: last, off: next, lastOff: b.LastOffset, ts: now}, txn)
				log = append(log, logEntry{batch: encodeData(t, b)})
				next += int64(n)
				clientEpoch[pid], clientSeq[pid] = epoch, LastSeq(last, 1)
			case op < 17: // transaction marker
				p := m.producers[pid]
				epoch, coord := clientEpoch[pid], int32(0)
				if p != nil {
					epoch, coord = p.epoch, p.coord
				}
				epoch += int16(rapid.IntRange(-1, 1).Draw(t, "markerEpoch"))
				coord += int32(rapid.IntRange(-1, 1).Draw(t, "coord"))
				commit := rapid.Bool().Draw(t, "commit")
				wantCode := int16(0)
				if p != nil && epoch < p.epoch {
					wantCode = kerr.InvalidProducerEpoch.Code
				} else if p != nil && coord < p.coord {
					wantCode = kerr.TransactionCoordinatorFenced.Code
				}
				err := s.CheckMarker(pid, epoch, coord)
				if got := KafkaCode(err); got != wantCode {
					t.Fatalf("CheckMarker(pid %d, epoch %d, coord %d) = %v, model says %d", pid, epoch, coord, err, wantCode)
				}
				if err != nil {
					continue
				}
				done, ok := s.CompleteTxn(pid, epoch, commit, coord, next, now)
				mp := m.get(pid)
				if wantOK := mp.txnFirst >= 0; ok != wantOK || ok && (done.FirstOffset != mp.txnFirst || done.LastOffset != next || done.Aborted == commit) {
					t.Fatalf("CompleteTxn = %+v %v, model open txn at %d", done, ok, mp.txnFirst)
				}
				if mp.epoch != epoch {
					mp.epoch, mp.batches = epoch, nil
				}
				mp.coord, mp.txnFirst, mp.lastTs = coord, -1, now
				if ok {
					wantLSO := next + 1
					if fuo, open := m.firstUnstable(); open && fuo < wantLSO {
						wantLSO = fuo
					}
					if done.LastStableOffset != wantLSO {
						t.Fatalf("LSO after completion %d, model %d", done.LastStableOffset, wantLSO)
					}
				}
				cb := batch.ControlBatch(pid, epoch, commit, coord, now)
				batch.SetBaseOffset(cb, next)
				log = append(log, logEntry{batch: cb})
				next++
				clientEpoch[pid], clientSeq[pid] = epoch, 0
			case op < 19: // expiration
				n := s.Expire(now)
				wantN := 0
				for id, p := range m.producers {
					if p.txnFirst < 0 && now-p.lastTs >= expirationMs {
						delete(m.producers, id)
						wantN++
					}
				}
				if n != wantN {
					t.Fatalf("Expire removed %d, model %d", n, wantN)
				}
				log = append(log, logEntry{expireAt: now})
			default: // snapshot and restore in the middle of the history
				r, err := Restore(s.Snapshot(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				s = r
			}
			compare(t, s, m)
		}

		// Replaying the whole log (with the same expiration runs) rebuilds the same state.
		replayed := NewWithConfig(cfg)
		for _, e := range log {
			if e.batch == nil {
				replayed.Expire(e.expireAt)
				continue
			}
			h, err := batch.Parse(e.batch)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := replayed.Replay(h); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(replayed.Snapshot(), s.Snapshot()) {
			t.Fatalf("replayed state differs from the live state")
		}
	})
}

func compare(t *rapid.T, s *State, m *model) {
	if s.NumProducers() != len(m.producers) {
		t.Fatalf("%d producers, model %d", s.NumProducers(), len(m.producers))
	}
	for pid, p := range m.producers {
		e, ok := s.Producer(pid)
		if !ok || e.Epoch != p.epoch || e.CurrentTxnFirstOffset != p.txnFirst || e.CoordinatorEpoch != p.coord {
			t.Fatalf("producer %d: %+v, model %+v", pid, e, *p)
		}
		recent := p.batches[max(0, len(p.batches)-NumBatchesToRetain):]
		if len(e.Batches) != len(recent) {
			t.Fatalf("producer %d keeps %d batches, model %d", pid, len(e.Batches), len(recent))
		}
		for i, b := range recent {
			if got := e.Batches[i]; got.FirstSeq != b.first || got.LastSeq != b.last || got.FirstOffset != b.off {
				t.Fatalf("producer %d batch %d: %+v, model %+v", pid, i, got, b)
			}
		}
	}
	fuo, ok := s.FirstUnstableOffset()
	wfuo, wok := m.firstUnstable()
	if ok != wok || ok && fuo != wfuo {
		t.Fatalf("first unstable offset %d %v, model %d %v", fuo, ok, wfuo, wok)
	}
}

func encodeData(t *rapid.T, b Batch) []byte {
	n := int(b.LastOffset-b.FirstOffset) + 1
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i].Value = fmt.Appendf(nil, "v%d", b.FirstOffset+int64(i))
	}
	h := batch.Header{BaseOffset: b.FirstOffset, PartitionLeaderEpoch: 0, FirstTimestamp: b.TimestampMs,
		ProducerID: b.ProducerID, ProducerEpoch: b.Epoch, BaseSequence: b.BaseSeq}
	if b.Transactional {
		h.Attributes = batch.AttrTransactional
	}
	out, err := batch.Encode(nil, h, recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
