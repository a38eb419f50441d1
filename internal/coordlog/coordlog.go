// Package coordlog is the seam between exactq's coordinators (groups, transactions, share
// state) and the partition logs of their internal topics (__consumer_offsets,
// __transaction_state, __share_group_state).
//
// A coordinator owns some partitions of an internal topic. It writes its state changes as
// record batches and rebuilds its state at start-up by replaying every stored batch,
// including transaction markers (control batches) written by the transaction coordinator.
// The broker implements Partition over a real partition log; Memory is an in-memory
// implementation for the coordinators' unit and model tests.
package coordlog

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batch is what a coordinator appends: records, optionally as part of a producer's
// transaction (TxnOffsetCommit writes offsets transactionally; the transaction's marker
// later decides them).
type Batch struct {
	Records []kmsg.Record
	// ProducerID < 0 means a plain, non-transactional batch.
	ProducerID    int64
	ProducerEpoch int16
}

// Marker is a transaction marker found in the log.
type Marker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// Stored is one batch read back from the log.
type Stored struct {
	BaseOffset    int64
	ProducerID    int64 // -1 when not transactional
	ProducerEpoch int16
	Transactional bool
	// Marker is set for control batches; Records is then empty.
	Marker  *Marker
	Records []kmsg.Record // OffsetDelta-relative offsets: BaseOffset + OffsetDelta
}

// Partition is one internal-topic partition a coordinator writes and replays.
type Partition interface {
	// Index is the partition number.
	Index() int32
	// Append writes b as one batch and returns its base offset once it is durable (fsynced
	// when the broker fsyncs), so the caller may acknowledge what the batch records.
	Append(ctx context.Context, b Batch) (baseOffset int64, err error)
	// Replay calls fn for every batch in the log, in offset order. Coordinators call it
	// once at load time, before serving.
	Replay(fn func(Stored) error) error
}

// ErrClosed is returned by Append after the partition was closed.
var ErrClosed = errors.New("coordlog: partition closed")

// Memory is an in-memory Partition for tests. Markers can be appended with AppendMarker,
// as the transaction coordinator would.
type Memory struct {
	mu      sync.Mutex
	index   int32
	batches []Stored
	next    int64
	closed  bool
	// FailAppend, when set, is returned by the next Append (then cleared): a disk error.
	FailAppend error
	// FailAfterAppend, when set, is returned by the next Append (then cleared) after the
	// batch was stored: a write that reached the log but whose acknowledgement was lost.
	FailAfterAppend error
}

// NewMemory returns an empty in-memory partition.
func NewMemory(index int32) *Memory { return &Memory{index: index} }

// Index implements Partition.
func (m *Memory) Index() int32 { return m.index }

// Append implements Partition.
func (m *Memory) Append(_ context.Context, b Batch) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return -1, ErrClosed
	}
	if err := m.FailAppend; err != nil {
		m.FailAppend = nil
		return -1, err
	}
	base := m.next
	recs := make([]kmsg.Record, len(b.Records))
	copy(recs, b.Records)
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	pid := b.ProducerID
	if pid < 0 {
		pid = -1
	}
	m.batches = append(m.batches, Stored{BaseOffset: base, ProducerID: pid, ProducerEpoch: b.ProducerEpoch, Transactional: b.ProducerID >= 0, Records: recs})
	m.next += int64(max(len(recs), 1))
	if err := m.FailAfterAppend; err != nil {
		m.FailAfterAppend = nil
		return -1, err
	}
	return base, nil
}

// AppendMarker writes a transaction marker, as the transaction coordinator does through
// the broker.
func (m *Memory) AppendMarker(pid int64, epoch int16, commit bool, coordinatorEpoch int32) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	base := m.next
	m.batches = append(m.batches, Stored{BaseOffset: base, ProducerID: pid, ProducerEpoch: epoch, Transactional: true,
		Marker: &Marker{Commit: commit, CoordinatorEpoch: coordinatorEpoch}})
	m.next++
	return base
}

// Replay implements Partition.
func (m *Memory) Replay(fn func(Stored) error) error {
	m.mu.Lock()
	batches := append([]Stored(nil), m.batches...)
	m.mu.Unlock()
	for _, b := range batches {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// Close makes later Appends fail with ErrClosed.
func (m *Memory) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}
