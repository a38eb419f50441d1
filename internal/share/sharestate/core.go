package sharestate

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/coordlog"
)

// Core is the share coordinator of one __share_group_state partition: no I/O, no clock
// reads, no goroutines. Its memory changes in Step, in input order, and a Step says what
// the caller must append, and in which order, before it may release the reply.
//
// Memory runs ahead of the log: a Step applies its change at once, so the next input sees
// it, although its batches are not yet durable. The caller (the driver) therefore answers
// a round's replies only once every batch of the round is committed, and when an append
// fails it throws the Core away and replays the log into a new one: the Core never has to
// undo anything.
//
// The commit and abort rule of KIP-1289 staged state is applied here (Marker, and Replayed
// markers) and nowhere else; a share-partition leader restates it from the resolutions.
type Core struct {
	cfg CoreConfig
	keyspace
	// inflight is the number of records stepped into Append since the last Committed:
	// their offsets are known only once the log has taken them.
	inflight int64
	// unconfirmed are the snapshots among the in-flight records, in step order, whose
	// entry's snapshotOffset is a guess until Committed gives the real offset.
	unconfirmed []inflightSnapshot
}

type inflightSnapshot struct {
	key Key
	seq int64 // index among the in-flight records
}

// CoreConfig is what a Core needs to decide; Config's defaults apply to zero values.
type CoreConfig struct {
	// Partition is the __share_group_state partition the Core owns (for messages).
	Partition int32
	// UpdatesPerSnapshot is Config.UpdatesPerSnapshot.
	UpdatesPerSnapshot int
	// ColdSnapshotIntervalMs is Config.ColdSnapshotInterval in milliseconds.
	ColdSnapshotIntervalMs int64
	// HotBatches is how many batches the Core keeps decoded (compact.go); 0: hotBudget.
	HotBatches int
}

// NewCore returns the Core of an empty partition; step every stored batch into it
// (Replayed) before anything else.
func NewCore(cfg CoreConfig) *Core {
	if cfg.UpdatesPerSnapshot <= 0 {
		cfg.UpdatesPerSnapshot = 500
	}
	if cfg.ColdSnapshotIntervalMs <= 0 {
		cfg.ColdSnapshotIntervalMs = 5 * 60 * 1000
	}
	if cfg.HotBatches <= 0 {
		cfg.HotBatches = hotBudget
	}
	c := &Core{cfg: cfg}
	c.reset()
	c.hotLimit = cfg.HotBatches
	return c
}

// Tidy encodes the keys over the Core's budget of decoded batches, the last changed
// included; the driver calls it whenever its queue is empty.
func (c *Core) Tidy() { c.tidy() }

// Input is one of the Core's inputs: the persister requests (Initialize, Reinitialize,
// Read, Write, Delete, ReadSummary, DeleteTopics), a transaction Marker for the
// partition, Replayed (load), Committed (the log's answer to an append) and Tick.
type Input interface{ input() }

// Initialize is InitializeShareGroupState (Store.Initialize). NowMs stamps the snapshot.
type Initialize struct {
	Key         Key
	StateEpoch  int32
	StartOffset int64
	NowMs       int64
}

// Reinitialize is Store.Reinitialize (AlterShareGroupOffsets). Reply: ReinitializeReply.
type Reinitialize struct {
	Key         Key
	StateEpoch  int32
	StartOffset int64
	NowMs       int64
}

// Read is ReadShareGroupState (Store.Read). NowMs stamps a snapshot if the recorded
// leader epoch makes one due. Reply: ReadReply.
type Read struct {
	Key         Key
	LeaderEpoch int32
	NowMs       int64
}

// Write is WriteShareGroupState (Store.Write). Reply: Done.
type Write struct {
	Key                   Key
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int64
	Batches               []StateBatch
	NowMs                 int64
}

// Delete is DeleteShareGroupState (Store.Delete). Reply: Done.
type Delete struct{ Key Key }

// ReadSummary is ReadShareGroupStateSummary (Store.ReadSummary). Reply: SummaryReply.
type ReadSummary struct {
	Key         Key
	LeaderEpoch int32
}

// DeleteTopics tombstones every key whose topic Deleted reports (Store.DeleteTopics).
// Deleted is called during the Step only. Reply: DeleteTopicsReply.
type DeleteTopics struct{ Deleted func(topicID [16]byte) bool }

// Marker is a transaction marker for this partition (WriteTxnMarkers). The Step's Marker
// asks the caller to append its control batch. Reply: MarkerReply.
type Marker struct {
	ProducerID       int64
	Epoch            int16
	Commit           bool
	CoordinatorEpoch int32
	// Orphan makes it a marker written again for acknowledgements staged at epoch
	// StagedEpoch or below whose own marker never reached the log (share.Manager's
	// orphan recovery). Such a marker is checked against the Core when it applies, not
	// when the transaction coordinator was asked, because the share partition kept
	// running in between: it resolves nothing and is not appended when nothing of the
	// producer is staged at StagedEpoch or below any more (the lost marker's transaction
	// was resolved meanwhile), and it is refused with ErrLaterStaging when the producer
	// has staged at an epoch above StagedEpoch and up to Epoch since (a later
	// transaction's acknowledgements, which this marker's epoch would resolve too).
	Orphan      bool
	StagedEpoch int16
}

// ErrLaterStaging refuses an Orphan marker that would also resolve acknowledgements
// staged by a later transaction of the producer.
var ErrLaterStaging = errors.New("sharestate: the producer has staged acknowledgements in a later transaction that this marker would resolve")

// Replayed is one stored batch, stepped in log order while loading. Reply: Done (a
// malformed record).
type Replayed struct{ Stored coordlog.Stored }

// Committed tells the Core that the log took the next Records in-flight records of its
// Steps (in step order, markers not counted) at offsets BaseOffset and up. The caller
// steps it after every successful plain append, before any other input: it is how the
// Core learns the offsets LastRedundantOffset is made of. Reply: nil.
type Committed struct {
	BaseOffset int64
	Records    int
}

// Tick is the clock: keys whose last snapshot is older than the cold snapshot interval at
// NowMs get a fresh snapshot (Store.SnapshotCold). Reply: TickReply.
type Tick struct{ NowMs int64 }

func (Initialize) input()   {}
func (Reinitialize) input() {}
func (Read) input()         {}
func (Write) input()        {}
func (Delete) input()       {}
func (ReadSummary) input()  {}
func (DeleteTopics) input() {}
func (Marker) input()       {}
func (Replayed) input()     {}
func (Committed) input()    {}
func (Tick) input()         {}

// Step is what one input produced.
type Step struct {
	// Append are the batches to append, in this order, each as it is (a caller may join
	// consecutive batches of consecutive Steps into one write).
	Append []coordlog.Batch
	// Marker, set for a Marker input, is the control batch to append after Append.
	Marker *Marker
	// Reply is released once Append, Marker and every earlier append are committed.
	Reply any
	// Resolved are the TX_PENDING records a marker decided, per key, sorted by key.
	Resolved []Resolution
}

// Resolution says that a marker resolved key's batches staged by ProducerID with an epoch
// at or below Epoch; a share-partition leader of the key applies the same rule.
type Resolution struct {
	Key        Key
	ProducerID int64
	Epoch      int16
	Commit     bool
}

// Done is the reply of inputs that answer only an error.
type Done struct{ Err error }

// ReadReply answers Read.
type ReadReply struct {
	State State
	Err   error
}

// SummaryReply answers ReadSummary.
type SummaryReply struct {
	Summary Summary
	Err     error
}

// ReinitializeReply answers Reinitialize with the state epoch written.
type ReinitializeReply struct {
	StateEpoch int32
	Err        error
}

// DeleteTopicsReply answers DeleteTopics with the keys deleted, sorted.
type DeleteTopicsReply struct{ Keys []Key }

// MarkerReply answers Marker.
type MarkerReply struct {
	Result MarkerResult
	Err    error // an Orphan marker refused: ErrLaterStaging
}

// TickReply answers Tick with the number of cold snapshots written.
type TickReply struct{ ColdSnapshots int }

// Step applies in to memory and returns what to append and answer.
func (c *Core) Step(in Input) Step {
	switch in := in.(type) {
	case Initialize:
		return c.initialize(in)
	case Reinitialize:
		return c.reinitialize(in)
	case Read:
		return c.read(in)
	case Write:
		return c.write(in)
	case Delete:
		return c.delete(in)
	case ReadSummary:
		return Step{Reply: c.readSummary(in)}
	case DeleteTopics:
		return c.deleteTopics(in)
	case Marker:
		return c.marker(in)
	case Replayed:
		return Step{Reply: Done{Err: c.replay(in.Stored)}}
	case Committed:
		c.committed(in)
		return Step{}
	case Tick:
		return c.tick(in)
	}
	panic(fmt.Sprintf("sharestate: unknown input %T", in))
}

func done(err error) Step { return Step{Reply: Done{Err: err}} }

func (c *Core) initialize(in Initialize) Step {
	k := in.Key
	if k.Partition < 0 || in.StateEpoch < 0 || in.StartOffset < -1 {
		return done(errorf(kerr.InvalidRequest, "initialize %s: partition %d, state epoch %d, start offset %d", k, k.Partition, in.StateEpoch, in.StartOffset))
	}
	v := &snapshotValue{StateEpoch: in.StateEpoch, StartOffset: in.StartOffset, DeliveryCompleteCount: -1}
	if e := c.keys[k]; e != nil {
		if in.StateEpoch < e.stateEpoch {
			return done(errorf(kerr.FencedStateEpoch, "initialize %s: state epoch %d < %d", k, in.StateEpoch, e.stateEpoch))
		}
		v.SnapshotEpoch = e.snapshotEpoch + 1
		v.LeaderEpoch = e.leaderEpoch
	}
	v.CreateTimestamp, v.WriteTimestamp = in.NowMs, in.NowMs
	var st Step
	c.snapshot(&st, k, v)
	st.Reply = Done{}
	return st
}

func (c *Core) reinitialize(in Reinitialize) Step {
	k := in.Key
	fail := func(err error) Step { return Step{Reply: ReinitializeReply{Err: err}} }
	if k.Partition < 0 || in.StateEpoch < 0 || in.StartOffset < -1 {
		return fail(errorf(kerr.InvalidRequest, "reinitialize %s: partition %d, state epoch %d, start offset %d", k, k.Partition, in.StateEpoch, in.StartOffset))
	}
	if err := c.refuseIfStaged(k, "reinitialize"); err != nil {
		return fail(err)
	}
	v := &snapshotValue{StateEpoch: in.StateEpoch, StartOffset: in.StartOffset, DeliveryCompleteCount: -1}
	if e := c.keys[k]; e != nil {
		if e.stateEpoch == math.MaxInt32 {
			return fail(errorf(kerr.FencedStateEpoch, "reinitialize %s: state epoch exhausted", k))
		}
		v.StateEpoch = max(in.StateEpoch, e.stateEpoch+1)
		v.SnapshotEpoch = e.snapshotEpoch + 1
		v.LeaderEpoch = e.leaderEpoch
	}
	v.CreateTimestamp, v.WriteTimestamp = in.NowMs, in.NowMs
	var st Step
	c.snapshot(&st, k, v)
	st.Reply = ReinitializeReply{StateEpoch: v.StateEpoch}
	return st
}

func (c *Core) read(in Read) Step {
	k := in.Key
	fail := func(err error) Step { return Step{Reply: ReadReply{Err: err}} }
	if k.Partition < 0 || in.LeaderEpoch < -1 {
		return fail(errorf(kerr.InvalidRequest, "read %s: partition %d, leader epoch %d", k, k.Partition, in.LeaderEpoch))
	}
	e := c.keys[k]
	if e == nil {
		return fail(errorf(kerr.InvalidRequest, "read %s: share-partition state not initialized", k))
	}
	if in.LeaderEpoch >= 0 && in.LeaderEpoch < e.leaderEpoch {
		return fail(errorf(kerr.FencedLeaderEpoch, "read %s: leader epoch %d < %d", k, in.LeaderEpoch, e.leaderEpoch))
	}
	var st Step
	if in.LeaderEpoch > e.leaderEpoch {
		// A higher leader epoch is recorded before it is answered, so older leaders are
		// fenced from then on.
		c.change(&st, k, e, in.LeaderEpoch, -1, -1, nil, in.NowMs)
	}
	st.Reply = ReadReply{State: c.state(e)}
	return st
}

func (c *Core) readSummary(in ReadSummary) SummaryReply {
	k := in.Key
	if k.Partition < 0 || in.LeaderEpoch < -1 {
		return SummaryReply{Err: errorf(kerr.InvalidRequest, "read summary %s: partition %d, leader epoch %d", k, k.Partition, in.LeaderEpoch)}
	}
	e := c.keys[k]
	if e == nil {
		return SummaryReply{Summary: Summary{StartOffset: UninitializedStartOffset, DeliveryCompleteCount: UninitializedDeliveryCompleteCount}}
	}
	if in.LeaderEpoch >= 0 && in.LeaderEpoch < e.leaderEpoch {
		return SummaryReply{Err: errorf(kerr.FencedLeaderEpoch, "read summary %s: leader epoch %d < %d", k, in.LeaderEpoch, e.leaderEpoch)}
	}
	return SummaryReply{Summary: Summary{StateEpoch: e.stateEpoch, LeaderEpoch: e.leaderEpoch, StartOffset: e.startOffset, DeliveryCompleteCount: e.dcc}}
}

func (c *Core) write(in Write) Step {
	k := in.Key
	if k.Partition < 0 || in.StateEpoch < 0 || in.LeaderEpoch < 0 || in.StartOffset < -1 ||
		in.DeliveryCompleteCount < -1 || in.DeliveryCompleteCount > math.MaxInt32 {
		return done(errorf(kerr.InvalidRequest, "write %s: partition %d, state epoch %d, leader epoch %d, start offset %d, delivery-complete count %d",
			k, k.Partition, in.StateEpoch, in.LeaderEpoch, in.StartOffset, in.DeliveryCompleteCount))
	}
	norm, err := normalizeWrite(in.Batches)
	if err != nil {
		return done(errorf(kerr.InvalidRequest, "write %s: %v", k, err))
	}
	e := c.keys[k]
	if e == nil {
		return done(errorf(kerr.InvalidRequest, "write %s: share-partition state not initialized", k))
	}
	if in.LeaderEpoch < e.leaderEpoch {
		return done(errorf(kerr.FencedLeaderEpoch, "write %s: leader epoch %d < %d", k, in.LeaderEpoch, e.leaderEpoch))
	}
	if in.StateEpoch < e.stateEpoch {
		return done(errorf(kerr.FencedStateEpoch, "write %s: state epoch %d < %d", k, in.StateEpoch, e.stateEpoch))
	}
	if err := c.fenceStaging(k, norm); err != nil {
		return done(err)
	}
	dcc := int64(-1)
	switch {
	case in.DeliveryCompleteCount == -1:
	case in.StartOffset == -1 || in.StartOffset == e.startOffset:
		if in.DeliveryCompleteCount > e.dcc {
			dcc = in.DeliveryCompleteCount
		}
	case in.StartOffset > e.startOffset:
		dcc = in.DeliveryCompleteCount
	}
	newStart := int64(-1)
	if in.StartOffset > e.startOffset {
		newStart = in.StartOffset
	}
	var st Step
	c.change(&st, k, e, in.LeaderEpoch, newStart, dcc, norm, in.NowMs)
	st.Reply = Done{}
	return st
}

// fenceStaging refuses a staging by a producer epoch below a marker already seen for that
// producer on the partition: its transaction is over, and accepting it would leave the
// offsets TX_PENDING for ever (the KIP-1289 hanging-transaction rule).
func (c *Core) fenceStaging(k Key, batches []StateBatch) error {
	for i := range batches {
		b := &batches[i]
		if b.DeliveryState != StateTxPending {
			continue
		}
		if me, ok := c.markerEpoch[b.TxnProducerID]; ok && b.TxnProducerEpoch < me {
			return errorf(kerr.InvalidProducerEpoch, "write %s: staging by producer %d epoch %d after its marker at epoch %d",
				k, b.TxnProducerID, b.TxnProducerEpoch, me)
		}
	}
	return nil
}

// change records a change to an initialized key: a ShareUpdate, or a ShareSnapshot once
// the key has UpdatesPerSnapshot updates. newStart, dcc and leaderEpoch are -1 when
// unchanged; batches are already validated.
func (c *Core) change(st *Step, k Key, e *entry, leaderEpoch int32, newStart, dcc int64, batches []StateBatch, nowMs int64) {
	start := e.startOffset
	if newStart != -1 {
		start = newStart
	}
	if e.updates >= c.cfg.UpdatesPerSnapshot {
		if dcc == -1 {
			dcc = e.dcc
		}
		c.snapshot(st, k, &snapshotValue{
			SnapshotEpoch:         e.snapshotEpoch + 1,
			StateEpoch:            e.stateEpoch,
			LeaderEpoch:           max(e.leaderEpoch, leaderEpoch),
			StartOffset:           start,
			DeliveryCompleteCount: clampDCC(dcc),
			CreateTimestamp:       e.createMs,
			WriteTimestamp:        nowMs,
			Batches:               combine(c.view(e), batches, start),
		})
		return
	}
	v := &updateValue{
		SnapshotEpoch:         e.snapshotEpoch,
		LeaderEpoch:           leaderEpoch,
		StartOffset:           newStart,
		DeliveryCompleteCount: clampDCC(dcc),
		Batches:               combine(nil, batches, start),
	}
	c.emit(st, kmsg.Record{
		Key:   encodeKey(nil, recordKey{Type: recordTypeUpdate, Key: k}),
		Value: encodeUpdateValue(nil, v),
	})
	c.applyUpdate(k, v)
}

// snapshot appends a ShareSnapshot of k as its own batch and applies it. Its offset is a
// guess until Committed.
func (c *Core) snapshot(st *Step, k Key, v *snapshotValue) {
	seq := c.emit(st, kmsg.Record{
		Key:   encodeKey(nil, recordKey{Type: recordTypeSnapshot, Key: k}),
		Value: encodeSnapshotValue(nil, v),
	})
	c.unconfirmed = append(c.unconfirmed, inflightSnapshot{key: k, seq: seq})
	c.applySnapshot(k, v, c.end+seq)
}

// emit appends rec to st as a batch of its own and returns its index among the in-flight
// records.
func (c *Core) emit(st *Step, recs ...kmsg.Record) int64 {
	seq := c.inflight
	st.Append = append(st.Append, coordlog.Batch{Records: recs, ProducerID: -1})
	c.inflight += int64(len(recs))
	return seq
}

func (c *Core) delete(in Delete) Step {
	k := in.Key
	if k.Partition < 0 {
		return done(errorf(kerr.InvalidRequest, "delete %s: partition %d", k, k.Partition))
	}
	if c.keys[k] == nil {
		return done(nil)
	}
	if err := c.refuseIfStaged(k, "delete"); err != nil {
		return done(err)
	}
	var st Step
	c.emit(&st, tombstone(k))
	c.applyTombstone(k)
	st.Reply = Done{}
	return st
}

func tombstone(k Key) kmsg.Record {
	return kmsg.Record{Key: encodeKey(nil, recordKey{Type: recordTypeSnapshot, Key: k})}
}

// maxTombstonesPerBatch bounds one batch of DeleteTopics (a topic deleted under
// thousands of share groups is written in several batches).
const maxTombstonesPerBatch = 500

// deleteTopics tombstones the keys of deleted topics. Unlike Delete it does not refuse
// keys with staged acknowledgements: the records are gone with the topic, and the
// transaction's marker then resolves nothing there.
func (c *Core) deleteTopics(in DeleteTopics) Step {
	var keys []Key
	for k := range c.keys {
		if in.Deleted(k.TopicID) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)
	var st Step
	for chunk := range slices.Chunk(keys, maxTombstonesPerBatch) {
		recs := make([]kmsg.Record, len(chunk))
		for i, k := range chunk {
			recs[i] = tombstone(k)
		}
		c.emit(&st, recs...)
		for _, k := range chunk {
			c.applyTombstone(k)
		}
	}
	st.Reply = DeleteTopicsReply{Keys: keys}
	return st
}

// marker resolves the TX_PENDING batches the marker ends (the KIP-1289 commit and abort
// rule, applyMarker) and asks for the control batch. Nothing else is written: the marker
// in the log is the durable record of the outcome, and replay applies it at its position.
func (c *Core) marker(in Marker) Step {
	if in.Orphan {
		upTo, later := c.stagedAround(in.ProducerID, in.StagedEpoch, in.Epoch)
		if later {
			return Step{Reply: MarkerReply{Err: ErrLaterStaging}}
		}
		if !upTo {
			return Step{Reply: MarkerReply{}} // resolved meanwhile: nothing to append
		}
	}
	res := c.applyMarker(in.ProducerID, in.Epoch, in.Commit)
	st := Step{Marker: &in, Reply: MarkerReply{Result: res}}
	for _, k := range res.Keys {
		st.Resolved = append(st.Resolved, Resolution{Key: k, ProducerID: in.ProducerID, Epoch: in.Epoch, Commit: in.Commit})
	}
	return st
}

// stagedAround reports whether pid has TX_PENDING offsets staged at epoch upTo or below,
// and whether it has some staged above upTo and at most epoch (Marker.Orphan).
func (c *Core) stagedAround(pid int64, upTo, epoch int16) (below, later bool) {
	for k := range c.pending[pid] {
		for _, b := range c.view(c.keys[k]) {
			if b.DeliveryState != StateTxPending || b.TxnProducerID != pid {
				continue
			}
			switch e := b.TxnProducerEpoch; {
			case e <= upTo:
				below = true
			case e <= epoch:
				later = true
			}
		}
	}
	return below, later
}

// committed gives the in-flight snapshots the log's offsets.
func (c *Core) committed(in Committed) {
	n := int64(in.Records)
	c.end = max(c.end, in.BaseOffset+n)
	kept := c.unconfirmed[:0]
	for _, u := range c.unconfirmed {
		if u.seq >= n {
			u.seq -= n
			kept = append(kept, u)
			continue
		}
		// A later snapshot of the same key, or its deletion, comes later in the list
		// and wins; an entry without an unconfirmed snapshot is left alone.
		if e := c.keys[u.key]; e != nil {
			e.snapshotOffset = in.BaseOffset + u.seq
		}
	}
	c.unconfirmed = kept
	c.inflight = max(c.inflight-n, 0)
}

// tick re-snapshots, with unchanged state, every key whose last snapshot is older than
// the cold interval, one batch per key, so idle keys do not hold LastRedundantOffset
// back (Kafka's snapshotColdPartitions).
func (c *Core) tick(in Tick) Step {
	cutoff := in.NowMs - c.cfg.ColdSnapshotIntervalMs
	var keys []Key
	for k, e := range c.keys {
		if e.snapshotMs < cutoff {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)
	var st Step
	for _, k := range keys {
		e := c.keys[k]
		c.snapshot(&st, k, &snapshotValue{
			SnapshotEpoch: e.snapshotEpoch + 1, StateEpoch: e.stateEpoch, LeaderEpoch: e.leaderEpoch,
			StartOffset: e.startOffset, DeliveryCompleteCount: clampDCC(e.dcc),
			CreateTimestamp: e.createMs, WriteTimestamp: in.NowMs, Batches: c.batches(e),
		})
	}
	st.Reply = TickReply{ColdSnapshots: len(keys)}
	return st
}

// Keys lists the keys that have state, sorted.
func (c *Core) Keys() []Key {
	out := make([]Key, 0, len(c.keys))
	for k := range c.keys {
		out = append(out, k)
	}
	slices.SortFunc(out, compareKeys)
	return out
}

// TxPendingRecords is the number of TX_PENDING offsets over every key.
func (c *Core) TxPendingRecords() int64 { return c.txPending.Load() }

// TxPendingByKey is TxPendingRecords per key holding any.
func (c *Core) TxPendingByKey() map[Key]int64 {
	out := map[Key]int64{}
	for _, keys := range c.pending {
		for k := range keys {
			out[k] = c.keys[k].txPending
		}
	}
	return out
}

// Stagings lists the TX_PENDING stagings, sorted by producer id and epoch.
func (c *Core) Stagings() []Staging {
	found := map[[2]int64]int64{} // (pid, epoch) -> offsets
	for pid, keys := range c.pending {
		for k := range keys {
			for _, b := range c.view(c.keys[k]) {
				if b.DeliveryState == StateTxPending && b.TxnProducerID == pid {
					found[[2]int64{pid, int64(b.TxnProducerEpoch)}] += b.LastOffset - b.FirstOffset + 1
				}
			}
		}
	}
	out := make([]Staging, 0, len(found))
	for pe, n := range found {
		out = append(out, Staging{Partition: c.cfg.Partition, ProducerID: pe[0], Epoch: int16(pe[1]), Records: n})
	}
	slices.SortFunc(out, compareStagings)
	return out
}

// LastRedundantOffset is the offset below which the log holds nothing the Core needs:
// the oldest latest-snapshot offset among the live keys, or the end of what it has seen
// when it has no keys. Meaningful only with nothing in flight.
func (c *Core) LastRedundantOffset() int64 {
	offset := c.end
	for _, e := range c.keys {
		offset = min(offset, e.snapshotOffset)
	}
	return offset
}

func compareStagings(a, b Staging) int {
	if c := cmp.Compare(a.Partition, b.Partition); c != 0 {
		return c
	}
	if c := cmp.Compare(a.ProducerID, b.ProducerID); c != 0 {
		return c
	}
	return cmp.Compare(a.Epoch, b.Epoch)
}

// maxWriteBatches bounds one Write (a share-partition has at most
// group.share.partition.max.record.locks in flight, 10000 at most, so 10x that is far
// beyond any legitimate write).
const maxWriteBatches = 100_000

// normalizeWrite validates a Write's batches and returns a copy with the staging fields
// canonical: zeroed on non-pending batches, the commit state explicit on pending ones.
func normalizeWrite(in []StateBatch) ([]StateBatch, error) {
	if len(in) > maxWriteBatches {
		return nil, fmt.Errorf("%d state batches, at most %d", len(in), maxWriteBatches)
	}
	out := slices.Clone(in)
	for i := range out {
		b := &out[i]
		// The largest offset is refused: a batch reaching it would overflow the window end
		// (LastOffset+1) and the offset counts of a restore.
		if b.FirstOffset < 0 || b.LastOffset < b.FirstOffset || b.LastOffset == math.MaxInt64 {
			return nil, fmt.Errorf("state batch %d..%d", b.FirstOffset, b.LastOffset)
		}
		if b.DeliveryCount < 0 {
			return nil, fmt.Errorf("state batch %d..%d: delivery count %d", b.FirstOffset, b.LastOffset, b.DeliveryCount)
		}
		switch b.DeliveryState {
		case StateAvailable, StateAcknowledged, StateArchiving, StateArchived:
			b.clearStaged()
			continue
		case StateTxPending:
		default:
			return nil, fmt.Errorf("state batch %d..%d: delivery state %d cannot be persisted", b.FirstOffset, b.LastOffset, b.DeliveryState)
		}
		if b.TxnProducerID < 0 || b.TxnProducerEpoch < 0 {
			return nil, fmt.Errorf("state batch %d..%d: TX_PENDING without a producer (%d, %d)", b.FirstOffset, b.LastOffset, b.TxnProducerID, b.TxnProducerEpoch)
		}
		var ok bool
		switch b.TxnAckType {
		case AckAccept:
			if b.TxnCommitState == 0 {
				b.TxnCommitState = StateAcknowledged
			}
			ok = b.TxnCommitState == StateAcknowledged
		case AckReject, AckGap:
			if b.TxnCommitState == 0 {
				b.TxnCommitState = StateArchived
			}
			ok = b.TxnCommitState == StateArchived || b.TxnCommitState == StateArchiving
		}
		if !ok {
			return nil, fmt.Errorf("state batch %d..%d: staged ack type %d with commit state %d", b.FirstOffset, b.LastOffset, b.TxnAckType, b.TxnCommitState)
		}
		if b.TxnAbortState != StateAvailable && b.TxnAbortState != StateArchived {
			return nil, fmt.Errorf("state batch %d..%d: abort state %d", b.FirstOffset, b.LastOffset, b.TxnAbortState)
		}
	}
	return out, nil
}
