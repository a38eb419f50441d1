// Package producerstate keeps the idempotent and transactional producer state of one
// partition: per producer id the epoch, the last five appended batches (for sequence
// checks and duplicate detection) and the first offset of its open transaction; per
// partition the open transactions, from which the last stable offset follows.
//
// It is a pure type: no I/O, no clock, no goroutines. The broker calls, for each produce
// batch with a producer id, Check before the append and Update after the log assigned
// offsets; for each transaction marker CheckMarker then CompleteTxn; at start-up Replay
// for every batch of the log (or Restore from a snapshot, then Replay of the rest); and
// Expire from its timer. A State is not safe for concurrent use: the partition's append
// path owns it.
//
// The rules follow Apache Kafka's storage module (ProducerStateManager.java,
// ProducerAppendInfo.java, ProducerStateEntry.java, and UnifiedLog's
// analyzeAndValidateProducerState); each rule names its source where it is implemented.
package producerstate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// NumBatchesToRetain is how many recent batches per producer are kept for duplicate
// detection (Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN). It is also why clients cap
// max.in.flight.requests.per.connection at 5 with idempotence.
const NumBatchesToRetain = 5

// DefaultExpirationMs is producer.id.expiration.ms's default: one day.
const DefaultExpirationMs = 24 * 60 * 60 * 1000

// NoSequence, NoEpoch, NoOffset are Kafka's "absent" values.
const (
	NoSequence int32 = -1
	NoEpoch    int16 = -1
	NoOffset   int64 = -1
)

// Errors of Check and CheckMarker; KafkaCode maps them to Kafka error codes.
var (
	// ErrOutOfOrderSequence: a gap, a retry older than the last five batches, or a new
	// epoch not starting at sequence 0. OUT_OF_ORDER_SEQUENCE_NUMBER (45).
	ErrOutOfOrderSequence = errors.New("producerstate: out of order sequence number")
	// ErrInvalidProducerEpoch: the epoch is older than the producer's current one.
	// INVALID_PRODUCER_EPOCH (47); Kafka answers this rather than PRODUCER_FENCED since
	// 2.7 so the client can abort and retry (ProducerAppendInfo.checkProducerEpoch).
	ErrInvalidProducerEpoch = errors.New("producerstate: producer epoch is older than the current one")
	// ErrInvalidTxnState: a non-transactional batch while the producer has an open
	// transaction on this partition. INVALID_TXN_STATE (48).
	ErrInvalidTxnState = errors.New("producerstate: non-transactional write during an open transaction")
	// ErrCoordinatorFenced: a marker from an older transaction coordinator epoch.
	// TRANSACTION_COORDINATOR_FENCED (52).
	ErrCoordinatorFenced = errors.New("producerstate: transaction coordinator epoch is older than the current one")
	// ErrCorruptSnapshot: Restore got bytes that are not a valid snapshot.
	ErrCorruptSnapshot = errors.New("producerstate: corrupt snapshot")
)

// KafkaCode returns the Kafka error code of an error returned by this package (0 for nil,
// UNKNOWN_SERVER_ERROR for anything else).
func KafkaCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, ErrCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	}
	return kerr.UnknownServerError.Code
}

// Config holds the knobs of a State.
type Config struct {
	// ExpirationMs is producer.id.expiration.ms: a producer without an open transaction
	// whose last timestamp is at least this old is forgotten by Expire.
	ExpirationMs int64
	// MaxProducers caps this partition's producer entries (<= 0: no cap). A new producer
	// beyond it evicts the least recently active producer without an open transaction.
	MaxProducers int
	// Budget, when set, caps the entries of every State sharing it (a broker's partitions):
	// a new producer while it is full evicts as MaxProducers does, in its own partition.
	Budget *Budget
}

// BatchMeta describes one appended data batch of a producer.
type BatchMeta struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	TimestampMs             int64
}

// Entry is the state of one producer on this partition.
type Entry struct {
	ProducerID       int64
	Epoch            int16
	CoordinatorEpoch int32 // of the last marker; -1 before any
	LastTimestampMs  int64 // of the last batch or marker; drives expiration
	// CurrentTxnFirstOffset is the offset of the first batch of the producer's open
	// transaction on this partition, NoOffset when none is open.
	CurrentTxnFirstOffset int64
	// Batches are the last (at most NumBatchesToRetain) batches of the current epoch,
	// oldest first.
	Batches []BatchMeta

	// older and newer link the State's entries by last activity (bound.go); copies
	// handed out have them nil.
	older, newer *Entry
}

func (e *Entry) lastSeq() int32 {
	if len(e.Batches) == 0 {
		return NoSequence
	}
	return e.Batches[len(e.Batches)-1].LastSeq
}

// setEpoch moves the producer to epoch, dropping the batches of the old epoch
// (ProducerStateEntry.maybeUpdateProducerEpoch). The open transaction is kept.
func (e *Entry) setEpoch(epoch int16) {
	if e.Epoch != epoch {
		e.Batches = e.Batches[:0]
		e.Epoch = epoch
	}
}

// addBatch retains m. A producer's first batch gets room for one: most entries of a flood
// of fresh producer ids never see a second batch, and one slot is 32 bytes against 160 for
// five. The second batch makes room for all NumBatchesToRetain at once.
func (e *Entry) addBatch(m BatchMeta) {
	switch n := len(e.Batches); {
	case n == NumBatchesToRetain:
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:NumBatchesToRetain-1]
	case n == cap(e.Batches) && n > 0:
		e.Batches = append(make([]BatchMeta, 0, NumBatchesToRetain), e.Batches...)
	case cap(e.Batches) == 0:
		e.Batches = make([]BatchMeta, 0, 1)
	}
	e.Batches = append(e.Batches, m)
}

// OpenTxn is an ongoing transaction on this partition.
type OpenTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// CompletedTxn is a transaction ended by a marker. For an aborted one the broker adds
// (ProducerID, FirstOffset, LastOffset, LastStableOffset) to the partition's aborted
// transaction index, which read_committed fetches return.
type CompletedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64 // the marker's offset
	Aborted     bool
	// LastStableOffset is the partition's LSO once this transaction is complete: the
	// first offset of the earliest other open transaction, or LastOffset+1 (Kafka's
	// ProducerStateManager.lastStableOffset(CompletedTxn)).
	LastStableOffset int64
}

// State is the producer state of one partition.
type State struct {
	cfg       Config
	producers map[int64]*Entry
	// ongoing holds the open transactions ordered by first offset. Transactions start
	// in offset order, so adding appends; completing one deletes from the middle. The
	// number of open transactions is bounded by the producers writing to the partition.
	ongoing []OpenTxn
	// endOffset is one past the last offset applied (Update, CompleteTxn, Replay): a
	// snapshot is valid up to it, and replay resumes from it.
	endOffset int64
	// oldest and newest end the list of entries by last activity (bound.go).
	oldest, newest *Entry
	evictions      int64
}

// New returns an empty State with producer.id.expiration.ms at its default.
func New() *State { return NewWithConfig(Config{ExpirationMs: DefaultExpirationMs}) }

// NewWithConfig returns an empty State with the given configuration.
func NewWithConfig(cfg Config) *State {
	if cfg.ExpirationMs <= 0 {
		cfg.ExpirationMs = DefaultExpirationMs
	}
	return &State{cfg: cfg, producers: make(map[int64]*Entry)}
}

// Result is the outcome of a successful Check.
type Result struct {
	// Duplicate reports an exact retry of one of the producer's last five batches
	// (same epoch, same first and last sequence). The broker must not append it and
	// must answer NONE with the original batch's offsets and timestamp, as Kafka does
	// (UnifiedLog.analyzeAndValidateProducerState returns the duplicate's BatchMetadata;
	// the produce response carries its first offset and timestamp, error NONE).
	Duplicate   bool
	FirstOffset int64
	LastOffset  int64
	TimestampMs int64
}

// Check validates a data batch from producer pid before it is appended. baseSeq and
// lastSeq are the batch's first and last sequence (LastSeq computes the latter with
// Kafka's wraparound). The rules, in Kafka's order:
//
//  1. An exact duplicate of one of the last five batches of the current epoch is
//     reported as Result.Duplicate (UnifiedLog, ProducerStateEntry.findDuplicateBatch).
//  2. An epoch older than the current one: ErrInvalidProducerEpoch.
//  3. A producer this partition does not know (never seen, or expired) is accepted at
//     any sequence: ProducerAppendInfo.checkSequence skips the check when there is no
//     current epoch. (Brokers stopped answering UNKNOWN_PRODUCER_ID with KIP-360; a
//     Kafka 4.x broker never returns it for produce.)
//  4. A newer epoch must start at sequence 0, else ErrOutOfOrderSequence.
//  5. The same epoch must continue at the last sequence + 1 (MaxInt32 wraps to 0), or at
//     0 if no batch of this epoch is retained, else ErrOutOfOrderSequence.
//  6. A non-transactional batch while the producer has an open transaction:
//     ErrInvalidTxnState (ProducerAppendInfo.appendDataBatch).
func (s *State) Check(pid int64, epoch int16, baseSeq, lastSeq int32, isTransactional bool) (Result, error) {
	e := s.producers[pid]
	if e == nil {
		return Result{}, nil
	}
	if epoch == e.Epoch {
		for _, b := range e.Batches {
			if b.FirstSeq == baseSeq && b.LastSeq == lastSeq {
				return Result{Duplicate: true, FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, TimestampMs: b.TimestampMs}, nil
			}
		}
	}
	if epoch < e.Epoch {
		return Result{}, fmt.Errorf("%w: producer %d epoch %d, current %d", ErrInvalidProducerEpoch, pid, epoch, e.Epoch)
	}
	switch {
	case e.Epoch == NoEpoch:
		// Rule 3: no current epoch, any sequence.
	case epoch != e.Epoch:
		if baseSeq != 0 {
			return Result{}, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, got %d",
				ErrOutOfOrderSequence, pid, epoch, baseSeq)
		}
	default:
		if !inSequence(e.lastSeq(), baseSeq) {
			return Result{}, fmt.Errorf("%w: producer %d epoch %d sequence %d after %d",
				ErrOutOfOrderSequence, pid, epoch, baseSeq, e.lastSeq())
		}
	}
	if e.CurrentTxnFirstOffset != NoOffset && !isTransactional {
		return Result{}, fmt.Errorf("%w: producer %d has a transaction open since offset %d",
			ErrInvalidTxnState, pid, e.CurrentTxnFirstOffset)
	}
	return Result{}, nil
}

// inSequence reports whether next follows last (ProducerAppendInfo.inSequence); with no
// last sequence (-1) only 0 follows.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// LastSeq returns the sequence of the last record of a batch with base sequence baseSeq
// and lastOffsetDelta, wrapping past MaxInt32 to 0 as Kafka's
// DefaultRecordBatch.incrementSequence does.
func LastSeq(baseSeq, lastOffsetDelta int32) int32 {
	if baseSeq > math.MaxInt32-lastOffsetDelta {
		return baseSeq - (math.MaxInt32 - lastOffsetDelta) - 1
	}
	return baseSeq + lastOffsetDelta
}

// Batch is an appended data batch, as given to Update.
type Batch struct {
	ProducerID    int64
	Epoch         int16
	BaseSeq       int32
	LastSeq       int32
	Transactional bool
	FirstOffset   int64
	LastOffset    int64
	// TimestampMs is the batch's max timestamp (Kafka uses batch.maxTimestamp(): the
	// client's create time, or the log append time on LogAppendTime topics). It is the
	// producer's "last seen" time for expiration and is returned for duplicates.
	TimestampMs int64
}

// Update records a data batch the log appended after Check accepted it (not a duplicate).
// It applies the batch without checks, which is also what Replay does.
func (s *State) Update(b Batch) {
	e := s.entry(b.ProducerID)
	e.setEpoch(b.Epoch)
	e.addBatch(BatchMeta{FirstSeq: b.BaseSeq, LastSeq: b.LastSeq, FirstOffset: b.FirstOffset,
		LastOffset: b.LastOffset, TimestampMs: b.TimestampMs})
	e.LastTimestampMs = b.TimestampMs
	s.touch(e)
	if b.Transactional && e.CurrentTxnFirstOffset == NoOffset {
		e.CurrentTxnFirstOffset = b.FirstOffset
		s.addOngoing(OpenTxn{ProducerID: b.ProducerID, FirstOffset: b.FirstOffset})
	}
	s.advance(b.LastOffset)
}

// entry returns producer pid's entry, making one (and room for it) if there is none.
func (s *State) entry(pid int64) *Entry {
	e := s.producers[pid]
	if e == nil {
		s.makeRoom()
		e = s.insert(pid)
	}
	return e
}

func (s *State) advance(lastOffset int64) {
	if lastOffset+1 > s.endOffset {
		s.endOffset = lastOffset + 1
	}
}

func (s *State) addOngoing(t OpenTxn) {
	n := len(s.ongoing)
	if n == 0 || s.ongoing[n-1].FirstOffset < t.FirstOffset {
		s.ongoing = append(s.ongoing, t)
		return
	}
	i := sort.Search(n, func(i int) bool { return s.ongoing[i].FirstOffset >= t.FirstOffset })
	s.ongoing = slices.Insert(s.ongoing, i, t)
}

func (s *State) removeOngoing(firstOffset int64) {
	i := sort.Search(len(s.ongoing), func(i int) bool { return s.ongoing[i].FirstOffset >= firstOffset })
	if i < len(s.ongoing) && s.ongoing[i].FirstOffset == firstOffset {
		s.ongoing = slices.Delete(s.ongoing, i, i+1)
	}
}

// CheckMarker validates a transaction marker for producer pid before it is appended
// (ProducerAppendInfo.appendEndTxnMarker): an epoch older than the producer's is
// ErrInvalidProducerEpoch, a coordinator epoch older than the last marker's is
// ErrCoordinatorFenced. A marker for an unknown producer, or one without an open
// transaction here, is valid: it completes nothing.
func (s *State) CheckMarker(pid int64, epoch int16, coordinatorEpoch int32) error {
	e := s.producers[pid]
	if e == nil {
		return nil
	}
	if epoch < e.Epoch {
		return fmt.Errorf("%w: marker for producer %d epoch %d, current %d", ErrInvalidProducerEpoch, pid, epoch, e.Epoch)
	}
	if coordinatorEpoch < e.CoordinatorEpoch {
		return fmt.Errorf("%w: marker for producer %d coordinator epoch %d, current %d",
			ErrCoordinatorFenced, pid, coordinatorEpoch, e.CoordinatorEpoch)
	}
	return nil
}

// CompleteTxn records a marker appended at markerOffset. It ends the producer's open
// transaction and returns it (ok false if none was open: an empty transaction leaves no
// trace in the aborted index, as in Kafka). The marker's epoch becomes the producer's
// (with transaction version 2 the coordinator bumps the epoch at each commit or abort,
// so the next data batch starts again at sequence 0).
func (s *State) CompleteTxn(pid int64, epoch int16, commit bool, coordinatorEpoch int32, markerOffset, timestampMs int64) (CompletedTxn, bool) {
	e := s.entry(pid)
	var done CompletedTxn
	ok := e.CurrentTxnFirstOffset != NoOffset
	if ok {
		s.removeOngoing(e.CurrentTxnFirstOffset)
		lso := markerOffset + 1
		if len(s.ongoing) > 0 && s.ongoing[0].FirstOffset < lso {
			lso = s.ongoing[0].FirstOffset
		}
		done = CompletedTxn{ProducerID: pid, FirstOffset: e.CurrentTxnFirstOffset, LastOffset: markerOffset,
			Aborted: !commit, LastStableOffset: lso}
	}
	e.setEpoch(epoch)
	e.CoordinatorEpoch = coordinatorEpoch
	e.CurrentTxnFirstOffset = NoOffset
	e.LastTimestampMs = timestampMs
	s.touch(e)
	s.advance(markerOffset)
	return done, ok
}

// Replay applies one batch read back from the log at start-up (h.FirstOffset set), without
// the checks of the produce path, like Kafka's log loading. Batches without a producer id
// only advance the end offset. For a transaction marker it returns the transaction it
// completed, so the broker can rebuild its aborted transaction index.
func (s *State) Replay(h kmsg.RecordBatch) (CompletedTxn, bool, error) {
	lastOffset := h.FirstOffset + int64(h.LastOffsetDelta)
	if h.ProducerID < 0 {
		s.advance(lastOffset)
		return CompletedTxn{}, false, nil
	}
	if h.Attributes&batch.AttrControl != 0 {
		m, err := batch.ParseMarker(&h)
		if errors.Is(err, batch.ErrNotMarker) {
			s.advance(lastOffset) // another control type, or an empty (cleaned) batch
			return CompletedTxn{}, false, nil
		}
		if err != nil {
			return CompletedTxn{}, false, err
		}
		done, ok := s.CompleteTxn(h.ProducerID, h.ProducerEpoch, m.Commit, m.CoordinatorEpoch, h.FirstOffset, h.MaxTimestamp)
		s.advance(lastOffset)
		return done, ok, nil
	}
	s.Update(Batch{
		ProducerID:    h.ProducerID,
		Epoch:         h.ProducerEpoch,
		BaseSeq:       h.FirstSequence,
		LastSeq:       LastSeq(h.FirstSequence, h.LastOffsetDelta),
		Transactional: h.Attributes&batch.AttrTransactional != 0,
		FirstOffset:   h.FirstOffset,
		LastOffset:    lastOffset,
		TimestampMs:   h.MaxTimestamp,
	})
	return CompletedTxn{}, false, nil
}

// Expire forgets producers without an open transaction whose last timestamp is at least
// ExpirationMs before nowMs (ProducerStateManager.isProducerExpired). It returns how many
// were removed.
func (s *State) Expire(nowMs int64) int {
	n := 0
	for _, e := range s.producers {
		if e.CurrentTxnFirstOffset == NoOffset && nowMs-e.LastTimestampMs >= s.cfg.ExpirationMs {
			s.remove(e)
			n++
		}
	}
	return n
}

// FirstUnstableOffset returns the first offset of the earliest open transaction; ok is
// false when none is open. The last stable offset is min(this, high watermark).
func (s *State) FirstUnstableOffset() (int64, bool) {
	if len(s.ongoing) == 0 {
		return 0, false
	}
	return s.ongoing[0].FirstOffset, true
}

// LastStableOffset returns the partition's last stable offset given its high watermark.
func (s *State) LastStableOffset(highWatermark int64) int64 {
	if fuo, ok := s.FirstUnstableOffset(); ok && fuo < highWatermark {
		return fuo
	}
	return highWatermark
}

// OngoingTxns returns the open transactions, ordered by first offset.
func (s *State) OngoingTxns() []OpenTxn { return slices.Clone(s.ongoing) }

// Producer returns a copy of the state of producer pid.
func (s *State) Producer(pid int64) (Entry, bool) {
	e := s.producers[pid]
	if e == nil {
		return Entry{}, false
	}
	return e.clone(), true
}

// clone is a copy of e for callers outside the State.
func (e *Entry) clone() Entry {
	c := *e
	c.Batches = slices.Clone(e.Batches)
	c.older, c.newer = nil, nil
	return c
}

// NumProducers returns how many producers are tracked.
func (s *State) NumProducers() int { return len(s.producers) }

// EndOffset returns one past the last offset applied: a snapshot taken now is valid up
// to it, and replay after Restore resumes there.
func (s *State) EndOffset() int64 { return s.endOffset }

// Producers returns a copy of every producer's entry, sorted by producer id (for
// DescribeProducers and operators).
func (s *State) Producers() []Entry {
	out := make([]Entry, 0, len(s.producers))
	for _, e := range s.producers {
		out = append(out, e.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
