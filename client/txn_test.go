package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/txnshare"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnPeer scripts a single-node cluster with a transaction and group coordinator for
// transactional producer tests: the partition side is seqPeer (sequence checks), the
// coordinator side answers FindCoordinator, InitProducerId, AddPartitionsToTxn,
// AddOffsetsToTxn, TxnOffsetCommit and EndTxn, logging each exchange and checking that
// v1 clients add a partition before producing to it. Faults are queued per API key: the
// next request of that key is answered with the queued error code.
type txnPeer struct {
	*seqPeer

	tmu        sync.Mutex
	v2         bool
	epoch      int16
	log        []string
	faults     map[kmsg.Key][]int16
	inTxn      map[int32]bool // partitions added in the current transaction (v1)
	violations []string
	offsets    []*kmsg.TxnOffsetCommitRequest
	// hook, when set, sees every log line (under tmu) as it is logged.
	hook func(line string)
	// shareAckKey, when set, serves TxnShareAcknowledge under that key: shareAck
	// (under tmu) answers each request, shareAcks keeps them.
	shareAckKey int16
	shareAck    func(r *txnshare.Request) *txnshare.Response
	shareAcks   []*txnshare.Request
}

func newTxnPeer(t *testing.T, nparts int32, v2 bool, opts ...func(*txnPeer)) *txnPeer {
	sp := &seqPeer{topic: "t", nparts: nparts, parts: map[int32]*seqPart{}, epochSeen: map[int16]bool{}}
	for i := int32(0); i < nparts; i++ {
		sp.parts[i] = &seqPart{epoch: -1}
	}
	tp := &txnPeer{seqPeer: sp, v2: v2, epoch: -1, faults: map[kmsg.Key][]int16{}, inTxn: map[int32]bool{}}
	for _, o := range opts {
		o(tp)
	}
	sp.peer = newPeer(t, func(p *peer) {
		p.handle = tp.handle
		if v2 {
			p.features = map[string]int16{"transaction.version": 2}
		}
		if tp.shareAckKey != 0 {
			key := tp.shareAckKey
			p.others = map[int16]func() kmsg.Request{key: func() kmsg.Request { return &txnshare.Request{APIKey: key} }}
		}
	})
	return tp
}

// fault queues error codes for the next requests of key.
func (tp *txnPeer) fault(key kmsg.Key, codes ...int16) {
	tp.tmu.Lock()
	defer tp.tmu.Unlock()
	tp.faults[key] = append(tp.faults[key], codes...)
}

func (tp *txnPeer) nextFault(key kmsg.Key) int16 {
	q := tp.faults[key]
	if len(q) == 0 {
		return 0
	}
	tp.faults[key] = q[1:]
	return q[0]
}

func (tp *txnPeer) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	tp.log = append(tp.log, line)
	if tp.hook != nil {
		tp.hook(line)
	}
}

// entries returns the log lines that start with prefix.
func (tp *txnPeer) entries(prefix string) []string {
	tp.tmu.Lock()
	defer tp.tmu.Unlock()
	var out []string
	for _, l := range tp.log {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func (tp *txnPeer) handle(pc *peerConn, req *peerReq) kmsg.Response {
	switch r := req.body.(type) {
	case *kmsg.MetadataRequest:
		return tp.metadata(r)
	case *kmsg.ProduceRequest:
		tp.checkProduce(r)
		return tp.produce(pc, r)
	}
	tp.tmu.Lock()
	defer tp.tmu.Unlock()
	code := tp.nextFault(kmsg.Key(req.key))
	switch r := req.body.(type) {
	case *txnshare.Request:
		tp.logf("TxnShareAcknowledge key=%d member=%s epoch=%d", r.Key(), r.MemberID, r.MemberEpoch)
		tp.shareAcks = append(tp.shareAcks, r)
		resp := tp.shareAck(r)
		resp.APIKey, resp.Version = r.Key(), r.Version
		return resp
	case *kmsg.FindCoordinatorRequest:
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		host, port, _ := net.SplitHostPort(tp.addr)
		pn, _ := strconv.Atoi(port)
		tp.logf("FindCoordinator type=%d", r.CoordinatorType)
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port, c.ErrorCode = r.CoordinatorKey, 1, host, int32(pn), code
		if r.Version >= 4 {
			c.Key = r.CoordinatorKeys[0]
		}
		resp.Coordinators = append(resp.Coordinators, c)
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = 1, host, int32(pn), code
		return resp
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		tp.logf("InitProducerId id=%v pid=%d epoch=%d", r.TransactionalID != nil, r.ProducerID, r.ProducerEpoch)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		if code == 0 {
			tp.epoch++
			tp.inTxn = map[int32]bool{}
			resp.ProducerID, resp.ProducerEpoch = 7, tp.epoch
		}
		return resp
	case *kmsg.AddPartitionsToTxnRequest:
		resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		var parts []string
		for _, t := range r.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				parts = append(parts, strconv.Itoa(int(p)))
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				if code == 0 {
					tp.inTxn[p] = true
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		tp.logf("AddPartitionsToTxn v%d epoch=%d [%s]", r.Version, r.ProducerEpoch, strings.Join(parts, ","))
		return resp
	case *kmsg.AddOffsetsToTxnRequest:
		resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		tp.logf("AddOffsetsToTxn group=%s", r.Group)
		resp.ErrorCode = code
		return resp
	case *kmsg.TxnOffsetCommitRequest:
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		tp.logf("TxnOffsetCommit v%d group=%s gen=%d member=%s", r.Version, r.Group, r.Generation, r.MemberID)
		if code == 0 {
			tp.offsets = append(tp.offsets, r)
		}
		for _, t := range r.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.EndTxnRequest:
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		tp.logf("EndTxn v%d commit=%v epoch=%d", r.Version, r.Commit, r.ProducerEpoch)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		if code == 0 {
			tp.inTxn = map[int32]bool{}
			if tp.v2 && r.Version >= 5 {
				tp.epoch++
				resp.ProducerID, resp.ProducerEpoch = 7, tp.epoch
			}
		}
		return resp
	}
	tp.t.Errorf("unexpected request %s", kmsg.NameForKey(req.key))
	return nil
}

// checkProduce records protocol violations of a transactional produce request.
func (tp *txnPeer) checkProduce(r *kmsg.ProduceRequest) {
	tp.tmu.Lock()
	defer tp.tmu.Unlock()
	tp.logf("Produce v%d", r.Version)
	if tp.v2 != (r.Version >= 12) {
		tp.violations = append(tp.violations, fmt.Sprintf("produce v%d with transactions v2=%v", r.Version, tp.v2))
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			h, err := batch.Parse(p.Records)
			if err != nil {
				tp.violations = append(tp.violations, err.Error())
				continue
			}
			if h.Attributes&batch.AttrTransactional == 0 {
				tp.violations = append(tp.violations, "batch without the transactional bit")
			}
			if r.TransactionID == nil || *r.TransactionID != "tx" {
				tp.violations = append(tp.violations, "produce request without the transactional id")
			}
			if !tp.v2 && !tp.inTxn[p.Partition] {
				tp.violations = append(tp.violations, fmt.Sprintf("produce to partition %d before AddPartitionsToTxn", p.Partition))
			}
		}
	}
}

func (tp *txnPeer) checkNoViolations(t *testing.T) {
	t.Helper()
	tp.tmu.Lock()
	defer tp.tmu.Unlock()
	if len(tp.violations) > 0 {
		t.Fatalf("protocol violations: %q", tp.violations)
	}
}

func newTxnProducer(t *testing.T, addr string) *Producer {
	return newTestProducer(t, addr, func(c *ProducerConfig) {
		c.TransactionalID = "tx"
		c.BatchMaxBytes = 0
	})
}

// produceTxn produces n records round-robin over nparts partitions and waits for them.
func produceTxn(t *testing.T, p *Producer, nparts int32, n int) error {
	t.Helper()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		r := &Record{Topic: "t", Partition: int32(i) % nparts, Value: []byte(fmt.Sprintf("v%d", i))}
		p.Produce(context.Background(), r, func(_ *Record, err error) { errs <- err })
	}
	var first error
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func TestTxnCommitV1AddsPartitionsBeforeProducing(t *testing.T) {
	tp := newTxnPeer(t, 3, false)
	p := newTxnProducer(t, tp.addr)
	ctx := context.Background()
	if err := produceOne(ctx, p); !errors.Is(err, ErrNoTransaction) {
		t.Fatalf("produce outside a transaction: %v", err)
	}
	for round := 0; round < 2; round++ {
		if err := p.BeginTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.BeginTransaction(ctx); !errors.Is(err, ErrTransactionInProgress) {
			t.Fatalf("second Begin: %v", err)
		}
		if err := produceTxn(t, p, 3, 30); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tp.checkNoViolations(t)
	if got := tp.entries("InitProducerId"); len(got) != 1 || got[0] != "InitProducerId id=true pid=-1 epoch=-1" {
		t.Fatalf("InitProducerId: %q", got)
	}
	if got := tp.entries("FindCoordinator"); len(got) != 1 || got[0] != "FindCoordinator type=1" {
		t.Fatalf("FindCoordinator: %q", got)
	}
	if got := tp.entries("EndTxn"); len(got) != 2 || got[0] != "EndTxn v4 commit=true epoch=0" {
		t.Fatalf("EndTxn: %q", got)
	}
	for _, l := range tp.entries("AddPartitionsToTxn") {
		if !strings.HasPrefix(l, "AddPartitionsToTxn v3 ") {
			t.Fatalf("AddPartitionsToTxn not in the v3 client form: %q", l)
		}
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for i := int32(0); i < 3; i++ {
		if n := len(tp.parts[i].values); n != 20 {
			t.Fatalf("partition %d has %d records, want 20", i, n)
		}
	}
}

// produceOne produces one record to t[0] and waits for it.
func produceOne(ctx context.Context, p *Producer) error {
	return p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("x")})
}

func TestTxnEmptyAndOffsetsOnly(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v2=%v", v2), func(t *testing.T) {
			tp := newTxnPeer(t, 1, v2)
			p := newTxnProducer(t, tp.addr)
			ctx := context.Background()
			// A transaction with nothing in it commits (and aborts) without EndTxn: the
			// coordinator would refuse to commit an empty transaction.
			for _, commit := range []bool{true, false} {
				if err := p.BeginTransaction(ctx); err != nil {
					t.Fatal(err)
				}
				end := p.AbortTransaction
				if commit {
					end = p.CommitTransaction
				}
				if err := end(ctx); err != nil {
					t.Fatalf("empty transaction (commit=%v): %v", commit, err)
				}
			}
			if got := tp.entries("EndTxn"); len(got) != 0 {
				t.Fatalf("EndTxn for empty transactions: %q", got)
			}
			// Offsets only: the transaction is started by the offsets and commits.
			if err := p.BeginTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			g := GroupMetadata{GroupID: "g", GenerationID: 4, MemberID: "m-1"}
			if err := p.SendOffsetsToTransaction(ctx, map[TopicPartition]int64{{"in", 0}: 42, {"in", 1}: 7}, g); err != nil {
				t.Fatal(err)
			}
			if err := p.CommitTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			wantAddOffsets := 1
			wantTOC, wantEnd := "TxnOffsetCommit v4 group=g gen=4 member=m-1", "EndTxn v4 commit=true epoch=0"
			if v2 {
				wantAddOffsets = 0 // KIP-890: TxnOffsetCommit v5 adds the offsets itself
				wantTOC, wantEnd = "TxnOffsetCommit v5 group=g gen=4 member=m-1", "EndTxn v5 commit=true epoch=0"
			}
			if got := tp.entries("AddOffsetsToTxn"); len(got) != wantAddOffsets {
				t.Fatalf("AddOffsetsToTxn: %q", got)
			}
			if got := tp.entries("TxnOffsetCommit"); len(got) != 1 || got[0] != wantTOC {
				t.Fatalf("TxnOffsetCommit: %q, want %q", got, wantTOC)
			}
			if got := tp.entries("EndTxn"); len(got) != 1 || got[0] != wantEnd {
				t.Fatalf("EndTxn: %q, want %q", got, wantEnd)
			}
			tp.tmu.Lock()
			r := tp.offsets[0]
			tp.tmu.Unlock()
			if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 2 || r.Topics[0].Partitions[0].Offset != 42 {
				t.Fatalf("offsets sent: %+v", r.Topics)
			}
		})
	}
}

func TestTxnV2ImplicitPartitionsAndEpochBump(t *testing.T) {
	tp := newTxnPeer(t, 2, true)
	p := newTxnProducer(t, tp.addr)
	ctx := context.Background()
	for round := 0; round < 3; round++ {
		if err := p.BeginTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		if err := produceTxn(t, p, 2, 10); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tp.checkNoViolations(t)
	if got := tp.entries("AddPartitionsToTxn"); len(got) != 0 {
		t.Fatalf("v2 client sent %q", got)
	}
	// Each EndTxn carries the epoch the previous one returned; the partitions saw
	// every epoch start at sequence 0 (seqPeer rejects anything else).
	want := []string{"EndTxn v5 commit=true epoch=0", "EndTxn v5 commit=true epoch=1", "EndTxn v5 commit=true epoch=2"}
	if got := tp.entries("EndTxn"); strings.Join(got, ";") != strings.Join(want, ";") {
		t.Fatalf("EndTxn: %q, want %q", got, want)
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if !tp.epochSeen[0] || !tp.epochSeen[1] || !tp.epochSeen[2] || len(tp.parts[0].values) != 15 {
		t.Fatalf("epochs %v, %d records", tp.epochSeen, len(tp.parts[0].values))
	}
}

func TestTxnFencedIsFatal(t *testing.T) {
	commit := func(p *Producer) error { return p.CommitTransaction(context.Background()) }
	produce := func(p *Producer) error { return produceOne(context.Background(), p) }
	for _, tc := range []struct {
		name string
		// produceFirst writes a record before the fault; recordFails means op is the
		// record's own error and the commit after it reports the fatal state.
		produceFirst, recordFails bool
		script                    func(tp *txnPeer)
		op                        func(p *Producer) error
	}{
		{"EndTxn PRODUCER_FENCED", true, false, func(tp *txnPeer) { tp.fault(kmsg.EndTxn, kerr.ProducerFenced.Code) }, commit},
		{"EndTxn INVALID_PRODUCER_EPOCH", true, false, func(tp *txnPeer) { tp.fault(kmsg.EndTxn, kerr.InvalidProducerEpoch.Code) }, commit},
		{"produce INVALID_PRODUCER_EPOCH", false, true, func(tp *txnPeer) {
			tp.seqPeer.fault = func(int) (int16, bool) { return kerr.InvalidProducerEpoch.Code, false }
		}, produce},
		{"AddPartitionsToTxn PRODUCER_FENCED", false, true, func(tp *txnPeer) { tp.fault(kmsg.AddPartitionsToTxn, kerr.ProducerFenced.Code) }, produce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTxnPeer(t, 1, false)
			p := newTxnProducer(t, tp.addr)
			ctx := context.Background()
			if err := p.BeginTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.produceFirst {
				if err := produceOne(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			tc.script(tp)
			err := tc.op(p)
			if tc.recordFails {
				// The record fails; the transaction is fatal from then on.
				if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
					t.Fatalf("record error %v", err)
				}
				err = p.CommitTransaction(ctx)
			}
			if !errors.Is(err, kerr.ProducerFenced) || !errors.Is(err, ErrProducerFatal) {
				t.Fatalf("err %v, want PRODUCER_FENCED and ErrProducerFatal", err)
			}
			for name, op := range map[string]func() error{
				"Abort":   func() error { return p.AbortTransaction(ctx) },
				"Begin":   func() error { return p.BeginTransaction(ctx) },
				"Produce": func() error { return produceOne(ctx, p) },
				"Commit":  func() error { return p.CommitTransaction(ctx) },
			} {
				if err := op(); !errors.Is(err, ErrProducerFatal) {
					t.Fatalf("%s after fencing: %v", name, err)
				}
			}
		})
	}
}

func TestTxnAbortableProduceErrorThenAbort(t *testing.T) {
	tp := newTxnPeer(t, 2, false)
	tp.seqPeer.fault = func(n int) (int16, bool) {
		if n == 1 {
			return kerr.InvalidRecord.Code, false
		}
		return 0, false
	}
	p := newTestProducer(t, tp.addr, func(c *ProducerConfig) {
		c.TransactionalID = "tx"
		c.Linger = 1 << 40 // batches leave only when flushed: the first request carries everything
	})
	ctx := context.Background()
	if err := p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var recErrs []error
	for i := 0; i < 10; i++ {
		p.Produce(ctx, &Record{Topic: "t", Partition: int32(i % 2), Value: []byte("x")}, func(_ *Record, err error) {
			mu.Lock()
			recErrs = append(recErrs, err)
			mu.Unlock()
		})
	}
	err := p.CommitTransaction(ctx)
	if !errors.Is(err, ErrTransactionAbortable) || !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("commit: %v, want abortable INVALID_RECORD", err)
	}
	if err := p.CommitTransaction(ctx); !errors.Is(err, ErrTransactionAbortable) {
		t.Fatalf("commit again: %v", err)
	}
	if err := produceOne(ctx, p); !errors.Is(err, ErrTransactionAbortable) {
		t.Fatalf("produce into a doomed transaction: %v", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(recErrs) != 10 {
		t.Fatalf("%d callbacks, want 10", len(recErrs))
	}
	mu.Unlock()
	if got := tp.entries("EndTxn"); len(got) != 1 || got[0] != "EndTxn v4 commit=false epoch=0" {
		t.Fatalf("EndTxn: %q", got)
	}
	// The producer is usable again (the record lingers until the commit flushes it).
	if err := p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("after")}, func(_ *Record, err error) { lastErr = err })
	if err := p.CommitTransaction(ctx); err != nil || lastErr != nil {
		t.Fatalf("commit %v, record %v", err, lastErr)
	}
	tp.checkNoViolations(t)
}

func TestTxnAbortableCoordinatorErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  kmsg.Key
		code int16
		op   func(p *Producer) error
	}{
		{"AddPartitionsToTxn TRANSACTION_ABORTABLE", kmsg.AddPartitionsToTxn, kerr.TransactionAbortable.Code,
			func(p *Producer) error { return produceOne(context.Background(), p) }},
		{"TxnOffsetCommit ILLEGAL_GENERATION", kmsg.TxnOffsetCommit, kerr.IllegalGeneration.Code,
			func(p *Producer) error {
				return p.SendOffsetsToTransaction(context.Background(), map[TopicPartition]int64{{"in", 0}: 1}, GroupMetadata{GroupID: "g"})
			}},
		{"EndTxn TRANSACTION_ABORTABLE", kmsg.EndTxn, kerr.TransactionAbortable.Code,
			func(p *Producer) error {
				if err := produceOne(context.Background(), p); err != nil {
					return err
				}
				return p.CommitTransaction(context.Background())
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTxnPeer(t, 1, false)
			p := newTxnProducer(t, tp.addr)
			ctx := context.Background()
			if err := p.BeginTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			tp.fault(tc.key, tc.code)
			err := tc.op(p)
			if want := kerr.ErrorForCode(tc.code); !errors.Is(err, want) {
				t.Fatalf("err %v, want %v", err, want)
			}
			if err := p.CommitTransaction(ctx); !errors.Is(err, ErrTransactionAbortable) {
				t.Fatalf("commit: %v, want ErrTransactionAbortable", err)
			}
			if err := p.AbortTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.BeginTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if err := produceOne(ctx, p); err != nil {
				t.Fatal(err)
			}
			if err := p.CommitTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			tp.checkNoViolations(t)
		})
	}
}

func TestTxnRetriableErrors(t *testing.T) {
	tp := newTxnPeer(t, 1, false)
	tp.fault(kmsg.FindCoordinator, kerr.CoordinatorNotAvailable.Code)
	tp.fault(kmsg.InitProducerID, kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code)
	tp.fault(kmsg.AddPartitionsToTxn, kerr.ConcurrentTransactions.Code)
	tp.fault(kmsg.EndTxn, kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code)
	p := newTxnProducer(t, tp.addr)
	ctx := context.Background()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := produceOne(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	tp.checkNoViolations(t)
	// FindCoordinator: the failed one, the first good one, and one after NOT_COORDINATOR.
	if got := tp.entries("FindCoordinator"); len(got) != 3 {
		t.Fatalf("FindCoordinator: %q", got)
	}
	if got := tp.entries("EndTxn"); len(got) != 4 {
		t.Fatalf("EndTxn attempts: %q", got)
	}
	if got := tp.entries("InitProducerId"); len(got) != 3 {
		t.Fatalf("InitProducerId attempts: %q", got)
	}
}

func TestTxnCommitResumesAfterContextEnds(t *testing.T) {
	tp := newTxnPeer(t, 1, false)
	p := newTxnProducer(t, tp.addr)
	ctx := context.Background()
	if err := p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := produceOne(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The coordinator keeps answering CONCURRENT_TRANSACTIONS until the context ends.
	codes := make([]int16, 1000)
	for i := range codes {
		codes[i] = kerr.ConcurrentTransactions.Code
	}
	tp.fault(kmsg.EndTxn, codes...)
	short, cancel := context.WithCancel(ctx)
	attempts := 0
	tp.tmu.Lock()
	tp.hook = func(line string) {
		if strings.HasPrefix(line, "EndTxn") {
			if attempts++; attempts == 3 {
				cancel()
			}
		}
	}
	tp.tmu.Unlock()
	if err := p.CommitTransaction(short); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit: %v, want context.Canceled", err)
	}
	if err := p.AbortTransaction(ctx); err == nil {
		t.Fatal("abort after EndTxn(commit) was sent succeeded")
	}
	tp.tmu.Lock()
	tp.faults[kmsg.EndTxn] = nil
	tp.tmu.Unlock()
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range tp.entries("EndTxn") {
		if l != "EndTxn v4 commit=true epoch=0" {
			t.Fatalf("EndTxn %q", l)
		}
	}
}

func TestTxnConfigErrors(t *testing.T) {
	if _, err := NewProducer(ProducerConfig{Brokers: []string{"x:1"}, TransactionalID: "tx", DisableIdempotence: true}); err == nil {
		t.Fatal("transactional without idempotence accepted")
	}
	p, err := NewProducer(ProducerConfig{Brokers: []string{"x:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.BeginTransaction(context.Background()); !errors.Is(err, ErrNotTransactional) {
		t.Fatalf("Begin on a plain producer: %v", err)
	}
}
