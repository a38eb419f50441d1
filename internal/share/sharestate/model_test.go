package sharestate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"pgregory.net/rapid"
)

// The model keeps every key's state as a plain per-offset map and applies the rules
// naively: an offset takes the written batch if it outranks the stored one (delivery count,
// then state, then staging fields), offsets below the start offset disappear, and a marker
// rewrites the offsets its producer staged.

type modelKey struct {
	stateEpoch, leaderEpoch int32
	start, dcc              int64
	offs                    map[int64]StateBatch // single-offset batches
}

type model struct {
	keys        map[Key]*modelKey
	markerEpoch map[int32]map[int64]int16
}

func outranks(a, b StateBatch) bool {
	ka := []int64{int64(a.DeliveryCount), int64(a.DeliveryState), a.TxnProducerID, int64(a.TxnProducerEpoch), int64(a.TxnAckType), int64(a.TxnCommitState), int64(a.TxnAbortState)}
	kb := []int64{int64(b.DeliveryCount), int64(b.DeliveryState), b.TxnProducerID, int64(b.TxnProducerEpoch), int64(b.TxnAckType), int64(b.TxnCommitState), int64(b.TxnAbortState)}
	return slices.Compare(ka, kb) > 0
}

// staged reports whether any offset is TX_PENDING.
func (m *modelKey) staged() bool {
	for _, b := range m.offs {
		if b.DeliveryState == StateTxPending {
			return true
		}
	}
	return false
}

func (m *modelKey) prune() {
	if m.start < 0 {
		return
	}
	for o := range m.offs {
		if o < m.start {
			delete(m.offs, o)
		}
	}
}

var modelKeys = []Key{key("a", 0), key("b", 1), key("c", 2), key("d", 0)}

const modelPartitions = 2

func drawBatch(t *rapid.T, label string) StateBatch {
	first := rapid.Int64Range(0, 20).Draw(t, label+"first")
	b := StateBatch{
		FirstOffset:   first,
		LastOffset:    first + rapid.Int64Range(0, 4).Draw(t, label+"len"),
		DeliveryState: rapid.SampledFrom([]int8{0, 2, 3, 4, 5, 5}).Draw(t, label+"state"),
		DeliveryCount: int16(rapid.IntRange(0, 3).Draw(t, label+"count")),
	}
	if b.DeliveryState == StateTxPending {
		b.TxnProducerID = rapid.Int64Range(1, 2).Draw(t, label+"pid")
		b.TxnProducerEpoch = int16(rapid.IntRange(0, 2).Draw(t, label+"epoch"))
		b.TxnAckType = rapid.SampledFrom([]int8{AckGap, AckAccept, AckReject}).Draw(t, label+"ack")
		b.TxnAbortState = rapid.SampledFrom([]int8{StateAvailable, StateArchived}).Draw(t, label+"abort")
		if b.TxnAckType != AckAccept && rapid.Bool().Draw(t, label+"dlq") {
			b.TxnCommitState = StateArchiving
		}
	}
	return b
}

func TestModel(t *testing.T) {
	defer coldKeys()()
	rapid.Check(t, func(rt *rapid.T) {
		f := newFixture(t, modelPartitions, rapid.IntRange(1, 4).Draw(rt, "updatesPerSnapshot"))
		m := &model{keys: map[Key]*modelKey{}, markerEpoch: map[int32]map[int64]int16{}}
		check := func(op string, err, want error) {
			if want == nil && err != nil || want != nil && !errors.Is(err, want) {
				rt.Fatalf("%s: got %v, want %v", op, err, want)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"initialize": func(rt *rapid.T) {
				k := rapid.SampledFrom(modelKeys).Draw(rt, "key")
				se := int32(rapid.IntRange(0, 3).Draw(rt, "stateEpoch"))
				start := rapid.Int64Range(-1, 5).Draw(rt, "start")
				err := f.s.Initialize(ctx, k, se, start)
				mk := m.keys[k]
				if mk != nil && se < mk.stateEpoch {
					check("initialize", err, kerr.FencedStateEpoch)
					return
				}
				check("initialize", err, nil)
				le := int32(0)
				if mk != nil {
					le = mk.leaderEpoch
				}
				m.keys[k] = &modelKey{stateEpoch: se, leaderEpoch: le, start: start, dcc: -1, offs: map[int64]StateBatch{}}
			},
			"write": func(rt *rapid.T) {
				k := rapid.SampledFrom(modelKeys).Draw(rt, "key")
				se := int32(rapid.IntRange(0, 3).Draw(rt, "stateEpoch"))
				le := int32(rapid.IntRange(0, 3).Draw(rt, "leaderEpoch"))
				start := rapid.Int64Range(-1, 12).Draw(rt, "start")
				dcc := rapid.Int64Range(-1, 10).Draw(rt, "dcc")
				n := rapid.IntRange(0, 3).Draw(rt, "batches")
				var bs []StateBatch
				for i := range n {
					bs = append(bs, drawBatch(rt, fmt.Sprint(i)))
				}
				err := f.s.Write(ctx, k, se, le, start, dcc, bs)
				mk := m.keys[k]
				switch {
				case mk == nil:
					check("write", err, kerr.InvalidRequest)
					return
				case le < mk.leaderEpoch:
					check("write", err, kerr.FencedLeaderEpoch)
					return
				case se < mk.stateEpoch:
					check("write", err, kerr.FencedStateEpoch)
					return
				}
				me := m.markerEpoch[f.s.PartitionFor(k)]
				for _, b := range bs {
					if e, ok := me[b.TxnProducerID]; ok && b.DeliveryState == StateTxPending && b.TxnProducerEpoch < e {
						check("write", err, kerr.InvalidProducerEpoch)
						return
					}
				}
				check("write", err, nil)
				mk.leaderEpoch = le
				switch {
				case dcc == -1:
				case start == -1 || start == mk.start:
					mk.dcc = max(mk.dcc, dcc)
				case start > mk.start:
					mk.dcc = dcc
				}
				mk.start = max(mk.start, start)
				for _, b := range bs {
					if b.DeliveryState != StateTxPending {
						b.clearStaged()
					} else if b.TxnCommitState == 0 {
						b.TxnCommitState = StateArchived
						if b.TxnAckType == AckAccept {
							b.TxnCommitState = StateAcknowledged
						}
					}
					for o := b.FirstOffset; o <= b.LastOffset; o++ {
						one := b
						one.FirstOffset, one.LastOffset = o, o
						if old, ok := mk.offs[o]; !ok || outranks(one, old) {
							mk.offs[o] = one
						}
					}
				}
				mk.prune()
			},
			"read": func(rt *rapid.T) {
				k := rapid.SampledFrom(modelKeys).Draw(rt, "key")
				le := int32(rapid.IntRange(-1, 4).Draw(rt, "leaderEpoch"))
				_, err := f.s.Read(ctx, k, le)
				mk := m.keys[k]
				switch {
				case mk == nil:
					check("read", err, kerr.InvalidRequest)
				case le >= 0 && le < mk.leaderEpoch:
					check("read", err, kerr.FencedLeaderEpoch)
				default:
					check("read", err, nil)
					mk.leaderEpoch = max(mk.leaderEpoch, le)
				}
			},
			"delete": func(rt *rapid.T) {
				k := rapid.SampledFrom(modelKeys).Draw(rt, "key")
				if mk := m.keys[k]; mk != nil && mk.staged() {
					// Staged acknowledgements pin the state until their marker.
					check("delete", f.s.Delete(ctx, k), kerr.ConcurrentTransactions)
					return
				}
				check("delete", f.s.Delete(ctx, k), nil)
				delete(m.keys, k)
			},
			"marker": func(rt *rapid.T) {
				p := int32(rapid.IntRange(0, modelPartitions-1).Draw(rt, "partition"))
				pid := rapid.Int64Range(1, 3).Draw(rt, "pid")
				epoch := int16(rapid.IntRange(0, 3).Draw(rt, "epoch"))
				commit := rapid.Bool().Draw(rt, "commit")
				var got []Key
				if rapid.Bool().Draw(rt, "viaApplyMarker") {
					var err error
					got, err = f.s.ApplyMarker(ctx, p, pid, epoch, commit, func(context.Context) error {
						f.parts[p].AppendMarker(pid, epoch, commit, 0)
						return nil
					})
					check("marker", err, nil)
				} else {
					f.parts[p].AppendMarker(pid, epoch, commit, 0)
					got = f.s.CompleteTxn(p, pid, epoch, commit)
				}
				if m.markerEpoch[p] == nil {
					m.markerEpoch[p] = map[int64]int16{}
				}
				if old, ok := m.markerEpoch[p][pid]; !ok || epoch > old {
					m.markerEpoch[p][pid] = epoch
				}
				var want []Key
				for k, mk := range m.keys {
					if f.s.PartitionFor(k) != p {
						continue
					}
					n := int64(0)
					for o, b := range mk.offs {
						if b.DeliveryState != StateTxPending || b.TxnProducerID != pid || b.TxnProducerEpoch > epoch {
							continue
						}
						if commit {
							b.DeliveryState = b.TxnCommitState
						} else {
							b.DeliveryState = b.TxnAbortState
						}
						b.clearStaged()
						mk.offs[o] = b
						if b.DeliveryState == StateAcknowledged || b.DeliveryState == StateArchived {
							n++
						}
						if !slices.Contains(want, k) {
							want = append(want, k)
						}
					}
					if mk.dcc >= 0 {
						mk.dcc += n
					}
				}
				slices.SortFunc(want, compareKeys)
				if !slices.Equal(got, want) {
					rt.Fatalf("marker affected %v, want %v", got, want)
				}
			},
			"restart": func(rt *rapid.T) {
				f.restart()
			},
			"": func(rt *rapid.T) {
				compareModel(rt, f, m)
			},
		})
	})
}

func compareModel(rt *rapid.T, f *fixture, m *model) {
	for _, k := range modelKeys {
		mk := m.keys[k]
		// A copy taken on the driver's goroutine: the driver tidies its Core whenever its
		// queue is empty, so the Core is not the test's to read otherwise.
		var e *entry
		var batches []StateBatch
		f.s.parts[f.s.PartitionFor(k)].inspect(func(c *Core) {
			if ce := c.keys[k]; ce != nil {
				cp := *ce
				e, batches = &cp, c.batches(ce)
			}
		})
		if (mk == nil) != (e == nil) {
			rt.Fatalf("%s: exists %v, model %v", k, e != nil, mk != nil)
		}
		if mk == nil {
			continue
		}
		if e.stateEpoch != mk.stateEpoch || e.leaderEpoch != mk.leaderEpoch || e.startOffset != mk.start || e.dcc != mk.dcc {
			rt.Fatalf("%s: epochs %d/%d start %d dcc %d, model %d/%d %d %d", k, e.stateEpoch, e.leaderEpoch, e.startOffset, e.dcc,
				mk.stateEpoch, mk.leaderEpoch, mk.start, mk.dcc)
		}
		got := map[int64]StateBatch{}
		for i, b := range batches {
			if b.LastOffset < b.FirstOffset || (mk.start >= 0 && b.FirstOffset < mk.start) {
				rt.Fatalf("%s: bad batch %+v", k, b)
			}
			if i > 0 {
				prev := batches[i-1]
				if prev.LastOffset >= b.FirstOffset {
					rt.Fatalf("%s: overlapping batches %+v", k, batches)
				}
				if prev.LastOffset+1 == b.FirstOffset && sameContent(&prev, &b) {
					rt.Fatalf("%s: uncoalesced batches %+v", k, batches)
				}
			}
			for o := b.FirstOffset; o <= b.LastOffset; o++ {
				one := b
				one.FirstOffset, one.LastOffset = o, o
				got[o] = one
			}
		}
		if !maps.Equal(got, mk.offs) {
			rt.Fatalf("%s: offsets\n%v\nmodel\n%v", k, got, mk.offs)
		}
	}
}
