package txn

import (
	"cmp"
	"math"
	"slices"
)

// State is a transactional id's state. The values are the ones Kafka writes in the
// TransactionStatus field of __transaction_state values (TransactionState.java).
type State int8

const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7

	// noState marks "no pending transition".
	noState State = -1
)

// String is the name DescribeTransactions and ListTransactions use.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case Ongoing:
		return "Ongoing"
	case PrepareCommit:
		return "PrepareCommit"
	case PrepareAbort:
		return "PrepareAbort"
	case CompleteCommit:
		return "CompleteCommit"
	case CompleteAbort:
		return "CompleteAbort"
	case Dead:
		return "Dead"
	case PrepareEpochFence:
		return "PrepareEpochFence"
	}
	return "Unknown"
}

func stateFromName(name string) (State, bool) {
	for s := Empty; s <= PrepareEpochFence; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

// validPrevious is Kafka's TransactionState.VALID_PREVIOUS_STATES: a transition to the key
// is legal only from one of the listed states.
var validPrevious = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteAbort, CompleteCommit},
	PrepareEpochFence: {Ongoing},
}

// expirationAllowed reports whether an idle transactional id in this state may expire.
func (s State) expirationAllowed() bool {
	return s == Empty || s == CompleteCommit || s == CompleteAbort
}

const (
	noProducerID    int64 = -1
	noProducerEpoch int16 = -1
	maxEpoch        int16 = 32767 // Short.MAX_VALUE
)

// epochExhausted is Kafka's TransactionMetadata.isEpochExhausted: a client never gets
// epoch 32767, so the coordinator can always fence with one more bump.
func epochExhausted(e int16) bool { return e >= maxEpoch-1 }

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func compareTP(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Metadata is the durable state of one transactional id: exactly what one
// __transaction_state record holds, plus LastProducerEpoch, which Kafka keeps only in
// memory (it is -1 after a reload).
type Metadata struct {
	ProducerID     int64
	PrevProducerID int64 // the producer id before the last transition (KIP-890)
	NextProducerID int64 // set while a TV2 commit/abort rotates the producer id
	// NextProducerEpoch is the epoch that goes with NextProducerID at completion, -1 for 0
	// (Kafka's tag 3). exactq sets it only when it ends a kept transaction whose producer
	// id was rotated (see Kept).
	NextProducerEpoch int16
	ProducerEpoch     int16
	LastProducerEpoch int16 // in memory only; KIP-360 retries of InitProducerId
	TimeoutMs         int32 // math.MaxInt32: a two-phase-commit transaction, never timed out
	State             State
	Partitions        []TopicPartition // sorted, no duplicates
	StartMs           int64            // -1 when no transaction is open
	LastUpdateMs      int64
	ClientTV          int16 // transaction version the client used for the last transition

	// Kept is set while an Ongoing transaction was kept by an InitProducerId with
	// KeepPreparedTxn (KIP-939): the producer that wrote it was fenced, ProducerID and
	// ProducerEpoch are the new producer's, and KeptProducerID/KeptProducerEpoch are the
	// pair the transaction was written (and prepared) under. The new producer may only end
	// the transaction. KeptProducerID differs from ProducerID when the epoch was exhausted
	// and the new producer got a fresh producer id; the transaction's markers then go out
	// for KeptProducerID at the maximum epoch. Persisted in exactq's tags 939 and 940.
	Kept              bool
	KeptProducerID    int64
	KeptProducerEpoch int16
}

// twoPhaseTimeoutMs is the transaction timeout of a two-phase-commit participant
// (KIP-939): Kafka stores Integer.MAX_VALUE, and such a transaction is never timed out.
const twoPhaseTimeoutMs int32 = math.MaxInt32

// IsTwoPhase reports whether the id's transactions take part in two-phase commit.
func (m Metadata) IsTwoPhase() bool { return m.TimeoutMs == twoPhaseTimeoutMs }

// keptRotated reports whether a kept transaction's producer id differs from the current
// producer's (the keep rotated the producer id).
func (m Metadata) keptRotated() bool { return m.Kept && m.KeptProducerID != m.ProducerID }

// keptZombie reports whether pid is the fenced producer of a kept transaction whose
// producer id was rotated: it gets PRODUCER_FENCED rather than INVALID_PRODUCER_ID_MAPPING.
func (m Metadata) keptZombie(pid int64) bool { return m.keptRotated() && pid == m.KeptProducerID }

func (m Metadata) clone() Metadata {
	m.Partitions = slices.Clone(m.Partitions)
	return m
}

func (m Metadata) has(tp TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(m.Partitions, tp, compareTP)
	return ok
}

func (m Metadata) hasAll(tps []TopicPartition) bool {
	for _, tp := range tps {
		if !m.has(tp) {
			return false
		}
	}
	return true
}

// union returns the sorted union of a and b as a new slice.
func union(a, b []TopicPartition) []TopicPartition {
	out := make([]TopicPartition, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	slices.SortFunc(out, compareTP)
	return slices.CompactFunc(out, func(x, y TopicPartition) bool { return compareTP(x, y) == 0 })
}

// entry is the coordinator's view of one transactional id: the durable metadata, plus the
// transition being persisted. While pending is set every other transition is refused with
// CONCURRENT_TRANSACTIONS (Kafka's pendingState), which also serialises appends per id.
type entry struct {
	id      string
	meta    Metadata
	pending State
	// markers is set from the moment the Prepare* record is durable until Complete* is;
	// pending is then Complete*.
	markers *markerJob
}

// transit is a prepared transition: the metadata to persist as id's next record.
type transit struct {
	id   string
	meta Metadata
}

// prepare is Kafka's prepareTransitionTo: it checks the state table, marks the entry
// pending and returns the record to persist. PrevProducerID is always the producer id
// before the transition, as Kafka writes it.
func (e *entry) prepare(to Metadata) (*transit, error) {
	if e.pending != noState {
		return nil, errInternal("transition to %v while %v is pending", to.State, e.pending)
	}
	if to.ProducerID < 0 {
		return nil, errInternal("illegal producer id %d", to.ProducerID)
	}
	if to.State != Dead && to.ProducerEpoch < 0 {
		return nil, errInternal("illegal producer epoch %d", to.ProducerEpoch)
	}
	if !slices.Contains(validPrevious[to.State], e.meta.State) {
		return nil, errInternal("illegal transition %v -> %v", e.meta.State, to.State)
	}
	to.PrevProducerID = e.meta.ProducerID
	e.pending = to.State
	return &transit{id: e.id, meta: to}, nil
}

// complete applies a persisted transition (Kafka's completeTransitionTo).
func (e *entry) complete(t *transit) error {
	if e.pending != t.meta.State {
		return errInternal("completing %v while pending is %v", t.meta.State, e.pending)
	}
	old := e.meta
	if t.meta.ProducerID == old.ProducerID && t.meta.ProducerEpoch < old.ProducerEpoch && t.meta.State != Dead {
		return errInternal("epoch going backwards %d -> %d", old.ProducerEpoch, t.meta.ProducerEpoch)
	}
	e.meta = t.meta.clone()
	e.pending = noState
	return nil
}

// The prepare* functions mirror TransactionMetadata.java's, one per kind of transition.

// prepareIncrementEpoch is InitProducerId on an idle id (KIP-360 aware). expected is the
// epoch the client sent, or nil.
func (e *entry) prepareIncrementEpoch(timeoutMs int32, expected *int16, nowMs int64) (*transit, int16, error) {
	m := e.meta.clone()
	if epochExhausted(m.ProducerEpoch) {
		return nil, 0, errInternal("cannot bump exhausted epoch %d", m.ProducerEpoch)
	}
	bumped := m.ProducerEpoch + 1
	switch {
	case expected == nil:
		m.LastProducerEpoch = noProducerEpoch
		m.ProducerEpoch = bumped
	case m.ProducerEpoch == noProducerEpoch || *expected == m.ProducerEpoch:
		m.LastProducerEpoch = m.ProducerEpoch
		m.ProducerEpoch = bumped
	case *expected == m.LastProducerEpoch:
		// A retry of an InitProducerId that succeeded: return the current epoch again.
	default:
		return nil, codeProducerFenced, nil
	}
	m.State = Empty
	m.TimeoutMs = timeoutMs
	m.Partitions = nil
	m.StartMs = -1
	m.LastUpdateMs = nowMs
	t, err := e.prepare(m)
	return t, 0, err
}

// prepareRotate gives the id a new producer id with epoch 0 (epoch exhaustion).
func (e *entry) prepareRotate(newPID int64, timeoutMs int32, nowMs int64, recordLastEpoch bool) (*transit, error) {
	m := e.meta.clone()
	m.LastProducerEpoch = noProducerEpoch
	if recordLastEpoch {
		m.LastProducerEpoch = m.ProducerEpoch
	}
	m.ProducerID = newPID
	m.ProducerEpoch = 0
	m.State = Empty
	m.TimeoutMs = timeoutMs
	m.Partitions = nil
	m.StartMs = -1
	m.LastUpdateMs = nowMs
	return e.prepare(m)
}

func (e *entry) prepareAddPartitions(tps []TopicPartition, nowMs int64, tv int16) (*transit, error) {
	m := e.meta.clone()
	if m.State == Empty || m.State == CompleteCommit || m.State == CompleteAbort {
		m.StartMs = nowMs
	}
	m.Partitions = union(m.Partitions, tps)
	m.State = Ongoing
	m.LastUpdateMs = nowMs
	m.ClientTV = tv
	return e.prepare(m)
}

// prepareAbortOrCommit moves to PrepareCommit/PrepareAbort. With transaction version 2 the
// epoch is bumped (KIP-890): the markers then carry an epoch the old one cannot reuse.
func (e *entry) prepareAbortOrCommit(to State, tv int16, nextPID int64, nowMs int64, noPartitionAdded bool) (*transit, error) {
	m := e.meta.clone()
	if tv >= 2 {
		if !(m.ProducerEpoch == maxEpoch && to == PrepareAbort) {
			m.ProducerEpoch = m.ProducerEpoch + 1
		}
		m.LastProducerEpoch = e.meta.ProducerEpoch
	}
	if noPartitionAdded {
		m.StartMs = nowMs
	}
	m.NextProducerID = nextPID
	m.NextProducerEpoch = noProducerEpoch
	m.LastUpdateMs = nowMs
	m.ClientTV = tv
	m.State = to
	m.clearKept()
	return e.prepare(m)
}

// prepareKeptRotatedEnd decides a kept transaction whose producer id was rotated by the
// keep (Kept, KeptProducerID != ProducerID). The Prepare* record names the transaction's
// own producer id at the maximum epoch, which is above every epoch that producer id was
// used with, so its markers close the transaction on every partition and fence the old
// producer; NextProducerID/NextProducerEpoch are the pair the current producer continues
// with once the markers are written (its epoch bumped under transaction version 2, as any
// TV2 end does; a fresh producer id if that epoch is exhausted too).
func (e *entry) prepareKeptRotatedEnd(to State, tv int16, nextPID int64, nowMs int64) (*transit, error) {
	m := e.meta.clone()
	if !m.keptRotated() {
		return nil, errInternal("kept rotated end for %q without a rotated kept transaction", e.id)
	}
	clientPID, clientEpoch := m.ProducerID, m.ProducerEpoch
	m.NextProducerID, m.NextProducerEpoch = clientPID, clientEpoch
	switch {
	case nextPID != noProducerID:
		m.NextProducerID, m.NextProducerEpoch = nextPID, 0
	case tv >= 2:
		m.NextProducerEpoch = clientEpoch + 1
	}
	m.ProducerID, m.ProducerEpoch = m.KeptProducerID, maxEpoch
	m.LastProducerEpoch = clientEpoch
	m.LastUpdateMs = nowMs
	m.ClientTV = tv
	m.State = to
	m.clearKept()
	return e.prepare(m)
}

// prepareKeep is InitProducerId with KeepPreparedTxn on an Ongoing transaction (KIP-939):
// the transaction stays Ongoing with its partitions, the producer gets the next epoch
// (fencing the one that wrote the transaction), or a fresh producer id when the epoch is
// exhausted (newPID), and the pair the transaction was written under is remembered. A
// kept transaction that is kept again keeps its original pair. timeoutMs becomes the
// transaction's timeout; a transaction that is not two-phase gets its whole timeout from
// now (restart is true), a two-phase one keeps its start time.
func (e *entry) prepareKeep(newPID int64, timeoutMs int32, restart bool, nowMs int64) (*transit, error) {
	m := e.meta.clone()
	if m.State != Ongoing {
		return nil, errInternal("keep of %q in state %v", e.id, m.State)
	}
	if !m.Kept {
		m.Kept, m.KeptProducerID, m.KeptProducerEpoch = true, m.ProducerID, m.ProducerEpoch
	}
	if newPID != noProducerID {
		m.ProducerID, m.ProducerEpoch = newPID, 0
	} else {
		if epochExhausted(m.ProducerEpoch) {
			return nil, errInternal("cannot bump exhausted epoch %d", m.ProducerEpoch)
		}
		m.ProducerEpoch++
	}
	m.LastProducerEpoch = noProducerEpoch
	m.TimeoutMs = timeoutMs
	if restart {
		m.StartMs = nowMs
	}
	m.LastUpdateMs = nowMs
	return e.prepare(m)
}

func (m *Metadata) clearKept() {
	m.Kept, m.KeptProducerID, m.KeptProducerEpoch = false, noProducerID, noProducerEpoch
}

// prepareComplete moves Prepare* to Complete* once every marker is written. A TV2
// transition that exhausted the epoch switches to the next producer id here.
func (e *entry) prepareComplete(nowMs int64) (*transit, error) {
	m := e.meta.clone()
	m.State = CompleteAbort
	if e.meta.State == PrepareCommit {
		m.State = CompleteCommit
	}
	if m.NextProducerID != noProducerID && (m.ClientTV >= 2 || m.NextProducerEpoch >= 0) {
		m.ProducerID = m.NextProducerID
		m.ProducerEpoch = max(0, m.NextProducerEpoch)
	}
	m.NextProducerID, m.NextProducerEpoch = noProducerID, noProducerEpoch
	m.Partitions = []TopicPartition{}
	m.LastUpdateMs = nowMs
	return e.prepare(m)
}

func (e *entry) prepareDead() (*transit, error) {
	m := e.meta.clone()
	m.State = Dead
	m.Partitions = nil
	return e.prepare(m)
}
