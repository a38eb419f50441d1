package sim

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/share/sharepartition"
)

var bg = context.Background()

// ---- Producer side (transaction coordinator requests, as the broker serves them). ----

// initProducer runs InitProducerId for c (a new instance when c is fresh), retrying
// while the coordinator is still aborting the fenced transaction.
func (w *world) initProducer(c *client) {
	for attempt := 0; attempt < 3; attempt++ {
		req := kmsg.NewPtrInitProducerIDRequest()
		id := c.txnID
		req.TransactionalID, req.TransactionTimeoutMillis = &id, c.timeoutMs
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp := w.coord.InitProducerID(bg, 4, req)
		w.settle()
		w.logf("%s InitProducerId -> %v pid=%d epoch=%d", c.name, kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
		if resp.ErrorCode == 0 {
			c.ready, c.pid, c.epoch, c.txn, c.doomed, c.pending = true, resp.ProducerID, resp.ProducerEpoch, nil, false, nil
			return
		}
		if resp.ErrorCode != kerr.ConcurrentTransactions.Code {
			return
		}
	}
}

// register adds a partition to c's transaction as the produce path and
// TxnShareAcknowledge do (VerifyOrAdd with add=true); the transaction exists for the
// simulation from its first registered partition.
func (w *world) register(c *client, topic string, part int32) bool {
	code := w.coord.VerifyOrAdd(bg, c.txnID, c.pid, c.epoch, topic, part, true)
	w.settle()
	w.logf("%s add %s-%d pid=%d e=%d -> %v", c.name, topic, part, c.pid, c.epoch, kerr.ErrorForCode(code))
	if code != 0 {
		c.doomed = true
		if code == kerr.InvalidProducerEpoch.Code || code == kerr.InvalidTxnState.Code {
			c.ready = false // fenced (or aborted by the coordinator): a new epoch is needed
		}
		return false
	}
	if c.txn == nil || c.txn.pid != c.pid || c.txn.epoch != c.epoch {
		t := &simTxn{id: len(w.txns), client: c.name, pid: c.pid, epoch: c.epoch, applied: map[int32]bool{}}
		w.txns = append(w.txns, t)
		w.open[c.pid] = append(w.open[c.pid], t)
		c.txn = t
		w.logf("%s begins %s", c.name, t)
	}
	return true
}

// endTxn sends EndTxn v5 (transaction version 2). fault is injected into the markers.
func (w *world) endTxn(c *client, commit bool, fault markerFault) {
	w.fault = fault
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = c.txnID, c.pid, c.epoch, commit
	resp := w.coord.EndTxn(bg, 5, req)
	w.settle()
	w.fault = faultNone
	w.logf("%s EndTxn commit=%v %v -> %v pid=%d epoch=%d", c.name, commit, c.txn, kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	switch resp.ErrorCode {
	case 0:
		c.pid, c.epoch, c.txn, c.doomed = resp.ProducerID, resp.ProducerEpoch, nil, false
	case kerr.ConcurrentTransactions.Code:
		// retried by a later step
	default:
		c.ready, c.txn = false, nil
	}
}

// ---- Consumer side. ----

func (w *world) acquire(wk *worker, p int) {
	sp := w.sps[p]
	if wk.member == "" || !sp.CanAcquire() {
		return
	}
	from := sp.NextFetchOffset()
	var batches []sharepartition.FetchedBatch
	for _, b := range w.inLogs[p] {
		if b.last >= from && len(batches) < 6 {
			batches = append(batches, sharepartition.FetchedBatch{BaseOffset: b.base, LastOffset: b.last, ProducerID: -1})
		}
	}
	if len(batches) == 0 {
		return
	}
	spso, before := spView(sp)
	req := sharepartition.AcquireRequest{Member: wk.member, FetchOffset: from, Batches: batches,
		MaxRecords: 1 + w.rng.IntN(8), BatchSize: 1 + w.rng.IntN(4), Mode: sharepartition.AcquireMode(w.rng.IntN(2))}
	res := sp.Acquire(w.nowMs, req)
	w.logf("%s acquire in-%d from %d -> %v", wk.member, p, from, res.Records)
	w.stats["records acquired"] += res.Count
	for _, r := range res.Records {
		for o := r.FirstOffset; o <= r.LastOffset; o++ {
			k := recKey{p, o}
			in := w.inputs[k]
			pre, ok := before[o]
			switch {
			case in == nil:
				w.violate("acquired %s, which is not in the log", k)
				continue
			case in.terminal != 0:
				w.violate("acquired %s after it was %v (invariant 2)", k, in.terminal)
			case o < spso:
				w.violate("acquired %s below the SPSO %d", k, spso)
			case ok && pre.state == sharepartition.Acquired:
				w.violate("acquired %s for %s while ACQUIRED by %s (invariant 3)", k, wk.member, pre.member)
			case ok && pre.state == sharepartition.TxPending:
				w.violate("acquired %s while TX_PENDING in pid=%d (invariant 3)", k, pre.pid)
			case ok && pre.state != sharepartition.Available:
				w.violate("acquired %s from state %v", k, pre.state)
			}
			wk.held = append(wk.held, k)
		}
	}
	w.mustWrite(p, res.Update, "acquire")
}

// takeHeld removes up to n records of one partition from wk.held, lowest offsets first.
func (w *world) takeHeld(wk *worker, n int) (int, []recKey) {
	if len(wk.held) == 0 {
		return 0, nil
	}
	p := wk.held[w.rng.IntN(len(wk.held))].part
	var mine, rest []recKey
	for _, k := range wk.held {
		if k.part == p && len(mine) < n {
			mine = append(mine, k)
		} else {
			rest = append(rest, k)
		}
	}
	wk.held = rest
	slices.SortFunc(mine, func(a, b recKey) int { return int(a.off - b.off) })
	return p, mine
}

func ackBatches(recs []recKey, acks []sharepartition.AckType) []sharepartition.AckBatch {
	var out []sharepartition.AckBatch
	for i, k := range recs {
		if n := len(out); n > 0 && out[n-1].LastOffset+1 == k.off {
			out[n-1].LastOffset = k.off
			out[n-1].Types = append(out[n-1].Types, acks[i])
			continue
		}
		out = append(out, sharepartition.AckBatch{FirstOffset: k.off, LastOffset: k.off, Types: []sharepartition.AckType{acks[i]}})
	}
	// A batch with one type for all its offsets uses the single-type form.
	for i := range out {
		if len(out[i].Types) > 1 && !slices.ContainsFunc(out[i].Types, func(t sharepartition.AckType) bool { return t != out[i].Types[0] }) {
			out[i].Types = out[i].Types[:1]
		}
	}
	return out
}

// process is one consume-transform-produce iteration of a worker: take some held
// records, produce an output for each one it accepts (transactionally), and stage the
// acknowledgements in the same transaction. The staging may be left in flight (it then
// lands in a later step, possibly after the coordinator aborted the transaction).
func (w *world) process(wk *worker, c *client) {
	if !c.ready || c.pending != nil || len(wk.held) == 0 || wk.member == "" {
		return
	}
	p, recs := w.takeHeld(wk, 1+w.rng.IntN(4))
	acks := make([]sharepartition.AckType, len(recs))
	for i := range acks {
		switch r := w.rng.IntN(20); {
		case r < 2:
			acks[i] = sharepartition.AckGap
		case r < 5:
			acks[i] = sharepartition.AckReject
		default:
			acks[i] = sharepartition.AckAccept
		}
	}
	ps := &pendingStage{member: wk.member, batches: ackBatches(recs, acks), recs: recs, acks: acks, part: p}
	produceFirst := w.rng.IntN(2) == 0
	if produceFirst && !w.produceOutputs(c, ps) {
		return
	}
	// TxnShareAcknowledge: register the state partition before any state change (D8).
	if !w.register(c, stateTopic, w.statePart(p)) {
		return
	}
	if w.rng.IntN(4) == 0 {
		c.pending = ps
		ps.produceAfter = !produceFirst
		w.logf("%s staging of %v in flight", c.name, recs)
		return
	}
	if !w.stage(c, ps) {
		return
	}
	if !produceFirst {
		w.produceOutputs(c, ps)
	}
}

// produceOutputs appends one transactional output record per accepted input.
func (w *world) produceOutputs(c *client, ps *pendingStage) bool {
	for i, k := range ps.recs {
		if ps.acks[i] != sharepartition.AckAccept {
			continue
		}
		if !w.register(c, outTopic, 0) {
			return false
		}
		w.data = append(w.data, dataEntry{pid: c.pid, epoch: c.epoch, input: k, txn: c.txn})
		c.txn.outputs = append(c.txn.outputs, len(w.data)-1)
		w.logf("%s produce out for %s in %s", c.name, k, c.txn)
	}
	return true
}

// stage is the share-partition leader's part of TxnShareAcknowledge: StageTxnAcks, the
// durable write, UnstageTxnAcks if the store refuses it.
func (w *world) stage(c *client, ps *pendingStage) bool {
	sp := w.sps[ps.part]
	u, err := sp.StageTxnAcks(ps.member, c.pid, c.epoch, ps.batches)
	if err != nil {
		w.logf("%s stage %v %v -> %v", c.name, ps.recs, ps.acks, err)
		c.doomed = true
		return false
	}
	if n := staged(sp, c, ps.recs); n != len(ps.recs) {
		// A staging answered success must stage every record it names (bug B1, fixed:
		// offsets below the SPSO used to be skipped silently; TestStageBelowStartOffset).
		w.violate("StageTxnAcks answered success for %v but staged %d of them", ps.recs, n)
		return false
	}
	if err := w.writeUpdate(ps.part, u); err != nil {
		n := sp.UnstageTxnAcks(w.nowMs, c.pid, c.epoch, ps.batches)
		w.logf("%s stage %v write refused (%v); unstaged %d", c.name, ps.recs, err, n)
		w.stats["stagings refused"]++
		if int(n) != len(ps.recs) {
			w.violate("unstaged %d of %d records of a refused staging", n, len(ps.recs))
		}
		c.doomed = true
		return false
	}
	w.logf("%s staged %v %v in %s", c.name, ps.recs, ps.acks, c.txn)
	w.stats["records staged"] += len(ps.recs)
	for i, k := range ps.recs {
		in := w.inputs[k]
		if in.stagedIn != nil {
			w.violate("%s staged in %s while staged in %s", k, c.txn, in.stagedIn)
		}
		in.stagedIn, in.stagedAck = c.txn, ps.acks[i]
		_, v := spView(sp)
		in.abortArch = v[k.off].abort == sharepartition.Archived
		if in.abortArch != (v[k.off].count >= deliveryLimit) {
			w.violate("%s staged with delivery count %d and abort state %v", k, v[k.off].count, v[k.off].abort)
		}
		c.txn.staged = append(c.txn.staged, k)
	}
	return true
}

func (w *world) plainAck(wk *worker) {
	if wk.member == "" || len(wk.held) == 0 {
		return
	}
	p, recs := w.takeHeld(wk, 1+w.rng.IntN(3))
	acks := make([]sharepartition.AckType, len(recs))
	for i := range acks {
		acks[i] = []sharepartition.AckType{sharepartition.AckAccept, sharepartition.AckRelease, sharepartition.AckReject}[w.rng.IntN(3)]
	}
	u, err := w.sps[p].Acknowledge(w.nowMs, wk.member, ackBatches(recs, acks))
	w.logf("%s ack %v %v -> %v", wk.member, recs, acks, err)
	if err == nil {
		w.mustWrite(p, u, "acknowledge")
	}
}

func (w *world) leave(wk *worker) {
	if wk.member == "" {
		return
	}
	w.logf("%s leaves the group", wk.member)
	for p, sp := range w.sps {
		w.mustWrite(p, sp.ReleaseMember(wk.member), "release member")
	}
	wk.member, wk.held = "", nil
}

func (w *world) join(wk *worker) {
	if wk.member != "" {
		return
	}
	wk.gen++
	wk.member = fmt.Sprintf("member-%d-%d", wk.idx, wk.gen)
	w.logf("%s joins the group", wk.member)
}

// ---- Time. ----

// advance moves the clock by d ms, stopping at every transaction timeout and marker
// retry on the way so that the coordinator handles them one at a time, in order.
func (w *world) advance(d int64) {
	target := w.nowMs + d
	var events []int64
	for _, s := range w.describeTxns() {
		if s.State == "Ongoing" {
			if at := s.StartTimestamp + int64(s.TimeoutMillis) + 1; at <= target {
				events = append(events, at)
			}
		}
	}
	if w.retryAtMs != 0 && w.retryAtMs <= target {
		events = append(events, w.retryAtMs)
		w.retryAtMs = 0
	}
	events = append(events, target)
	slices.Sort(events)
	for _, at := range slices.Compact(events) {
		if at < w.nowMs {
			at = w.nowMs
		}
		w.nowMs = at
		w.coord.Tick()
		w.settle()
		for p, sp := range w.sps {
			u := sp.Tick(w.nowMs)
			if !u.Empty() {
				w.logf("lock expiry in-%d: %d ranges", p, len(u.Batches))
				w.stats["lock expiries"]++
			}
			w.mustWrite(p, u, "lock expiry")
		}
	}
}

// ---- Crash and replay. ----

// crash drops every in-memory structure of the broker (coordinator, store, share
// partitions, in-flight requests) and rebuilds it from the logs, checking that the share
// state comes back as it was durable (invariant 5).
func (w *world) crash() {
	w.logf("CRASH")
	w.stats["crashes"]++
	var preSP [numInputParts]map[int64]view
	var preStart [numInputParts]int64
	var preDur [numInputParts]map[int64]view
	var preDurStart [numInputParts]int64
	for p, sp := range w.sps {
		preStart[p], preSP[p] = spView(sp)
		var err error
		preDurStart[p], preDur[p], err = w.storeView(p)
		if err != nil {
			w.violate("read before crash: %v", err)
		}
	}
	w.coord.Close()
	w.store.Close()
	w.retryAtMs = 0
	for _, wk := range w.workers {
		for _, c := range []*client{wk.cl, wk.zombie} {
			if c != nil && c.pending != nil {
				c.pending, c.doomed = nil, true // the request is lost with the broker
			}
		}
	}
	w.startStore()
	w.startPartitions()
	for p, sp := range w.sps {
		durStart, dur, err := w.storeView(p)
		if err != nil {
			w.violate("read after crash: %v", err)
			continue
		}
		if durStart != preDurStart[p] || !mapsEqual(dur, preDur[p]) {
			w.violate("in-%d: store replay differs from the store before the crash (start %d vs %d)", p, durStart, preDurStart[p])
		}
		start, post := spView(sp)
		if start != preStart[p] {
			w.violate("in-%d: SPSO %d after replay, %d before the crash", p, start, preStart[p])
		}
		w.durableEqual(fmt.Sprintf("replay of in-%d", p), p, preStart[p], preSP[p], start, post)
		for o, v := range post {
			if v.state == sharepartition.Acquired {
				w.violate("in-%d@%d ACQUIRED after replay", p, o)
			}
		}
	}
	w.startCoordinator() // completes PREPARE'd transactions: markers to the new store
}

func mapsEqual(a, b map[int64]view) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if u, ok := b[k]; !ok || u != v {
			return false
		}
	}
	return true
}

// staged counts the records of recs that are TX_PENDING in c's transaction.
func staged(sp *sharepartition.SharePartition, c *client, recs []recKey) int {
	_, v := spView(sp)
	n := 0
	for _, k := range recs {
		if r, ok := v[k.off]; ok && r.state == sharepartition.TxPending && r.pid == c.pid && r.epoch == c.epoch {
			n++
		}
	}
	return n
}
