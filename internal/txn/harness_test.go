package txn

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/exactq/exactq/internal/testclock"
	"github.com/exactq/exactq/wire"
)

// markerCall is one WriteMarkers call as the fake broker saw it, per partition.
type markerWrite struct {
	PID    int64
	Epoch  int16
	Commit bool
	TP     TopicPartition
	OK     bool
}

// fakeBroker is the test double of the broker seam: it records markers, can fail them,
// and hands out producer ids from a counter.
type fakeBroker struct {
	mu      sync.Mutex
	nextPID int64
	writes  []markerWrite
	// fail, when it returns non-nil for a partition, fails that partition's marker.
	fail    func(tp TopicPartition) error
	missing map[TopicPartition]bool
	// onWrite, if set, runs for each WriteMarkers call before it is recorded.
	onWrite func(pid int64, epoch int16, commit bool, parts []TopicPartition)
}

func newFakeBroker() *fakeBroker { return &fakeBroker{nextPID: 1000} }

func (b *fakeBroker) WriteMarkers(_ context.Context, pid int64, epoch int16, commit bool, _ int32, parts []TopicPartition) map[TopicPartition]error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.onWrite != nil {
		b.onWrite(pid, epoch, commit, parts)
	}
	errs := make(map[TopicPartition]error)
	for _, tp := range parts {
		var err error
		if b.fail != nil {
			err = b.fail(tp)
		}
		if err != nil {
			errs[tp] = err
		}
		b.writes = append(b.writes, markerWrite{pid, epoch, commit, tp, err == nil})
	}
	return errs
}

func (b *fakeBroker) PartitionExists(topic string, partition int32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.missing[TopicPartition{topic, partition}]
}

func (b *fakeBroker) AllocateProducerID() (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextPID++
	return b.nextPID, nil
}

func (b *fakeBroker) setFail(f func(TopicPartition) error) {
	b.mu.Lock()
	b.fail = f
	b.mu.Unlock()
}

func (b *fakeBroker) markers() []markerWrite {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.writes)
}

var errDisk = errors.New("disk on fire")

// env is one coordinator over in-memory partitions that survive restarts.
type env struct {
	t     tester
	clock *testclock.Clock
	b     *fakeBroker
	parts []*coordlog.Memory
	cfg   Config
	c     *Coordinator
	wrap  func(*coordlog.Memory) coordlog.Partition
}

// tester is what env needs from *testing.T and *rapid.T.
type tester interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func newEnv(t testing.TB, numParts int32) *env {
	e := newEnvFor(t, numParts, nil)
	t.Cleanup(func() { e.c.Close() })
	return e
}

// newEnv2PC is newEnv with transaction.two.phase.commit.enable=true.
func newEnv2PC(t testing.TB, numParts int32) *env {
	e := newEnv(t, numParts)
	e.cfg.TwoPhaseCommitEnable = true
	e.restart()
	return e
}

// newEnvFor builds an env; wrap, if set, stands between the coordinator and each
// partition (the model test checks appends there).
func newEnvFor(t tester, numParts int32, wrap func(*coordlog.Memory) coordlog.Partition) *env {
	e := &env{wrap: wrap, t: t, clock: testclock.New(), b: newFakeBroker()}
	for i := int32(0); i < numParts; i++ {
		e.parts = append(e.parts, coordlog.NewMemory(i))
	}
	e.cfg = Config{
		NumPartitions: numParts, MaxTimeoutMs: 900000, AbortTimedOutIntervalMs: 10000,
		Now: e.clock.Now, ManualTicks: true,
		After: func(time.Duration) <-chan time.Time { return nil },
	}
	e.start()
	return e
}

func (e *env) start() {
	e.t.Helper()
	parts := make([]coordlog.Partition, len(e.parts))
	for i, p := range e.parts {
		parts[i] = p
		if e.wrap != nil {
			parts[i] = e.wrap(p)
		}
	}
	c, err := New(e.cfg, parts, e.b)
	if err != nil {
		e.t.Fatal(err)
	}
	e.c = c
	e.idle()
}

// restart closes the coordinator and loads a new one from the same partitions.
func (e *env) restart() {
	e.c.Close()
	e.start()
}

// idle waits until no background work (marker attempts, aborts) is running.
func (e *env) idle() { e.c.Quiesce() }

// tick advances the clock and runs the ticker once, then waits for what it started.
func (e *env) tick(d time.Duration) {
	e.clock.Advance(d)
	e.c.Tick()
	e.idle()
}

var ctx = context.Background()

func (e *env) init(id string, timeoutMs int32) (int64, int16, int16) {
	return e.initV(5, id, timeoutMs, -1, -1)
}

func (e *env) initV(version int16, id string, timeoutMs int32, pid int64, epoch int16) (int64, int16, int16) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = timeoutMs
	req.ProducerID, req.ProducerEpoch = pid, epoch
	r := e.c.InitProducerID(ctx, version, req)
	e.idle()
	return r.ProducerID, r.ProducerEpoch, r.ErrorCode
}

// init6 is InitProducerId v6 (KIP-939). It returns the new pair, the ongoing pair and the
// code.
func (e *env) init6(id string, timeoutMs int32, enable2PC, keep bool, pid int64, epoch int16) (handle, handle, int16) {
	req := wire.NewPtrInitProducerIDRequest()
	req.Version = 6
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = timeoutMs
	req.ProducerID, req.ProducerEpoch = pid, epoch
	req.Enable2Pc, req.KeepPreparedTxn = enable2PC, keep
	r := e.c.InitProducerIDV6(ctx, req)
	e.idle()
	return handle{r.ProducerID, r.ProducerEpoch}, handle{r.OngoingTxnProducerID, r.OngoingTxnProducerEpoch}, r.ErrorCode
}

func (e *env) add(version int16, id string, pid int64, epoch int16, tps ...TopicPartition) []int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	var topics []kmsg.AddPartitionsToTxnRequestTopic
	for _, tp := range tps {
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
		topics = append(topics, t)
	}
	if version < 4 {
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Topics = id, pid, epoch, topics
	} else {
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = id, pid, epoch
		for _, t := range topics {
			tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			tt.Topic, tt.Partitions = t.Topic, t.Partitions
			tx.Topics = append(tx.Topics, tt)
		}
		req.Transactions = append(req.Transactions, tx)
	}
	r := e.c.AddPartitionsToTxn(ctx, version, req)
	var codes []int16
	if version < 4 {
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	} else {
		for _, tx := range r.Transactions {
			for _, t := range tx.Topics {
				for _, p := range t.Partitions {
					codes = append(codes, p.ErrorCode)
				}
			}
		}
	}
	e.idle()
	return codes
}

// add1 adds partitions with the v3 client form and returns the one code all share.
func (e *env) add1(id string, pid int64, epoch int16, tps ...TopicPartition) int16 {
	e.t.Helper()
	codes := e.add(3, id, pid, epoch, tps...)
	for _, c := range codes[1:] {
		if c != codes[0] {
			e.t.Fatalf("mixed codes %v", codes)
		}
	}
	return codes[0]
}

func (e *env) end(version int16, id string, pid int64, epoch int16, commit bool) (int16, int64, int16) {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	r := e.c.EndTxn(ctx, version, req)
	e.idle()
	return r.ErrorCode, r.ProducerID, r.ProducerEpoch
}

// meta returns id's current metadata and pending state.
func (e *env) meta(id string) (Metadata, State, bool) {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	en := e.c.core.entries[id]
	if en == nil {
		return Metadata{}, noState, false
	}
	return en.meta.clone(), en.pending, true
}

func (e *env) state(id string) State {
	m, _, ok := e.meta(id)
	if !ok {
		return Dead
	}
	return m.State
}

// logged decodes every record of id in the partitions, in order.
func (e *env) logged(id string) []*Metadata {
	var out []*Metadata
	for _, p := range e.parts {
		p.Replay(func(s coordlog.Stored) error {
			for _, r := range s.Records {
				rid, m, ok, err := decodeRecord(r.Key, r.Value)
				if err != nil || !ok {
					e.t.Fatalf("bad record: %v", err)
				}
				if rid == id {
					out = append(out, m)
				}
			}
			return nil
		})
	}
	return out
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }

func (e *env) verifyReq(id string, pid int64, epoch int16, tps ...TopicPartition) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, true
	for _, tp := range tps {
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
		tx.Topics = append(tx.Topics, tt)
	}
	req.Transactions = append(req.Transactions, tx)
	return req
}

func newAddOffsets(id string, pid int64, epoch int16, group string) *kmsg.AddOffsetsToTxnRequest {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = id, pid, epoch, group
	return req
}
