package share

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/exactq/exactq/wire"
)

// TestRandomHistories drives the Manager with random fetches, acknowledgements, session
// closes, connection drops, lock expiries, produces and restarts from several members,
// and checks the guarantees a share consumer relies on:
//   - an offset whose acknowledgement (ACCEPT or REJECT) was answered NONE is never
//     acquired again, across restarts;
//   - an offset is never held by two members at once;
//   - delivery counts never go down and never exceed the delivery limit;
//   - every produced offset is eventually delivered or finished (checked at the end by
//     draining);
//   - KIP-1289: offsets staged in a producer transaction (answered NONE) are never
//     delivered while TX_PENDING, across restarts; a commit finishes them for good, an
//     abort makes them deliverable again; the Manager's TxnStats match.
func TestRandomHistories(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		e := newEnv(t)
		gc := DefaultGroupConfig()
		gc.DeliveryCountLimit = 3
		gc.RecordLockDurationMs = 1000
		e.groups[group] = gc
		e.init(group, topicA, 0)
		members := []string{"m1", "m2", "m3"}
		epochs := map[string]int32{}
		holder := map[int64]string{} // offset -> member holding it (as far as responses said)
		done := map[int64]bool{}     // acknowledged for good
		count := map[int64]int16{}
		produced := int64(0)
		// KIP-1289: one producer (id 1) whose open transaction stages offsets.
		pending := map[int64]bool{} // staged in the open transaction
		txEpoch := int16(0)
		var staged, resolved int64 // since the last restart (the Manager's counters)
		endTxn := func(commit bool) {
			e.marker(1, txEpoch+1, commit) // TV2: the marker carries the bumped epoch
			txEpoch++
			for o := range pending {
				if commit {
					done[o] = true
				}
				resolved++
			}
			pending = map[int64]bool{}
			st := e.m.TxnStats()
			if st.Staged != staged || st.Committed+st.Aborted != resolved || st.Pending != 0 {
				rt.Fatalf("txn stats %+v, model staged %d resolved %d", st, staged, resolved)
			}
		}

		record := func(m string, resp *kmsg.ShareFetchResponse) {
			for _, a := range acq(part(resp, topicA, 0)) {
				for o := a.first; o <= a.last; o++ {
					if pending[o] {
						rt.Fatalf("offset %d delivered while TX_PENDING", o)
					}
					if done[o] {
						rt.Fatalf("offset %d delivered again after a successful terminal ack", o)
					}
					if h, ok := holder[o]; ok && h != m {
						rt.Fatalf("offset %d acquired by %s while %s holds it", o, m, h)
					}
					if a.count < count[o] || a.count > 3 {
						rt.Fatalf("offset %d delivery count %d after %d", o, a.count, count[o])
					}
					holder[o], count[o] = m, a.count
				}
			}
		}
		forgetMember := func(m string) {
			for o, h := range holder {
				if h == m {
					delete(holder, o)
				}
			}
		}
		fetch := func(m string, a acks) {
			ep, ok := epochs[m]
			if !ok {
				a = nil
			}
			resp := e.fetch(fetchReq{member: m, epoch: ep, parts: []int32{0}, acks: a, conn: connOf(m), maxRecords: int32(rapid.IntRange(1, 8).Draw(rt, "max"))})
			if resp.ErrorCode != 0 {
				rt.Fatalf("fetch %s epoch %d: error %d", m, ep, resp.ErrorCode)
			}
			epochs[m] = nextEpoch(ep)
			if rp := part(resp, topicA, 0); rp != nil && len(a) > 0 && rp.AcknowledgeErrorCode == 0 {
				apply(a[0][0], holder, done, m)
			}
			record(m, resp)
		}

		for i := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			m := rapid.SampledFrom(members).Draw(rt, fmt.Sprint("member", i))
			switch rapid.IntRange(0, 9).Draw(rt, fmt.Sprint("op", i)) {
			case 0:
				n := rapid.IntRange(1, 4).Draw(rt, "n")
				e.logs.produce(topicA, 0, n, 0)
				produced += int64(n)
			case 1:
				fetch(m, nil)
			case 2, 3: // ack (piggybacked or not) a random run of what m holds
				mine := heldBy(holder, m)
				if len(mine) == 0 {
					continue
				}
				o := rapid.SampledFrom(mine).Draw(rt, "off")
				typ := int8(rapid.IntRange(1, 3).Draw(rt, "type"))
				a := acks{0: {ackBatch(o, o, typ)}}
				if _, ok := epochs[m]; !ok {
					continue
				}
				if rapid.Bool().Draw(rt, "piggyback") {
					fetch(m, a)
				} else {
					ar := e.ack(ackReq{member: m, epoch: epochs[m], acks: a})
					if ar.ErrorCode != 0 {
						rt.Fatalf("ack: %d", ar.ErrorCode)
					}
					epochs[m] = nextEpoch(epochs[m])
					if ar.Topics[0].Partitions[0].ErrorCode == 0 {
						apply(a[0][0], holder, done, m)
					}
				}
			case 4: // close the session
				if _, ok := epochs[m]; !ok {
					continue
				}
				e.fetch(fetchReq{member: m, epoch: -1, conn: connOf(m)})
				delete(epochs, m)
				forgetMember(m)
			case 5:
				e.m.ConnClosed(connOf(m))
				e.settle()
				delete(epochs, m)
				forgetMember(m)
			case 6:
				e.advance(time.Second)
				holder = map[int64]string{}
			case 7:
				e.restart()
				epochs = map[string]int32{}
				holder = map[int64]string{}
				staged, resolved = 0, 0
			case 8: // stage one offset m holds in the open transaction
				mine := heldBy(holder, m)
				if len(mine) == 0 {
					continue
				}
				o := rapid.SampledFrom(mine).Draw(rt, "stageOff")
				typ := rapid.SampledFrom([]int8{tGap, tAccept, tReject}).Draw(rt, "stageType")
				resp := e.txnAck(txnAck{member: m, pid: 1, epoch: txEpoch, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(o, o, typ)}}})
				if resp.ErrorCode != 0 || resp.Responses[0].Partitions[0].ErrorCode != 0 {
					rt.Fatalf("staging offset %d held by %s: %+v", o, m, resp)
				}
				delete(holder, o)
				pending[o] = true
				staged++
			case 9:
				endTxn(rapid.Bool().Draw(rt, "commit"))
			}
		}
		endTxn(rapid.Bool().Draw(rt, "finalCommit"))
		// Drain: every produced offset is finished or deliverable.
		e.advance(time.Second)
		holder = map[int64]string{}
		for range 3 * 4 {
			ep := epochs["m1"]
			resp := e.fetch(fetchReq{member: "m1", epoch: ep, parts: []int32{0}, conn: connOf("m1")})
			epochs["m1"] = nextEpoch(ep)
			record("m1", resp)
			var a []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
			for _, r := range acq(part(resp, topicA, 0)) {
				a = append(a, ackBatch(r.first, r.last, typeAccept))
			}
			if len(a) == 0 {
				break
			}
			ar := e.ack(ackReq{member: "m1", epoch: epochs["m1"], acks: acks{0: a}})
			epochs["m1"] = nextEpoch(epochs["m1"])
			if ar.Topics[0].Partitions[0].ErrorCode == 0 {
				for _, b := range a {
					for o := b.FirstOffset; o <= b.LastOffset; o++ {
						done[o] = true
						delete(holder, o)
					}
				}
			}
		}
		d := e.m.Describe(group)
		if len(d) != 1 || d[0].StartOffset != produced {
			rt.Fatalf("after draining: %+v, produced %d", d, produced)
		}
	})
}

func connOf(m string) uint64 { return uint64(m[len(m)-1]) }

// apply records a successful acknowledgement of one offset.
func apply(b kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, holder map[int64]string, done map[int64]bool, m string) {
	for o := b.FirstOffset; o <= b.LastOffset; o++ {
		switch b.AcknowledgeTypes[0] {
		case typeAccept, typeReject:
			done[o] = true
		}
		if holder[o] == m {
			delete(holder, o)
		}
	}
}

func sortedOffsets(os []int64) []int64 {
	for i := 1; i < len(os); i++ {
		for j := i; j > 0 && os[j] < os[j-1]; j-- {
			os[j], os[j-1] = os[j-1], os[j]
		}
	}
	return os
}

// heldBy lists, in order, the offsets holder says member m holds.
func heldBy(holder map[int64]string, m string) []int64 {
	var mine []int64
	for o, h := range holder {
		if h == m {
			mine = append(mine, o)
		}
	}
	return sortedOffsets(mine)
}
