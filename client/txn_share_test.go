package client

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/exactq/exactq/txnshare"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnShareAcknowledge against a scripted transaction peer: request contents, routing,
// error mapping, and the consume-only EndTxn.

var shareTopicID = [16]byte{9, 9, 9}

// shareAckScript answers TxnShareAcknowledge: top-level codes first (one per request),
// then per partition the code in parts (0 when absent), once each.
type shareAckScript struct {
	top   []int16
	parts []map[int32]int16
}

func (s *shareAckScript) answer(r *txnshare.Request) *txnshare.Response {
	resp := &txnshare.Response{}
	if len(s.top) > 0 {
		resp.ErrorCode = s.top[0]
		s.top = s.top[1:]
		if resp.ErrorCode != 0 {
			return resp
		}
	}
	var codes map[int32]int16
	if len(s.parts) > 0 {
		codes = s.parts[0]
		s.parts = s.parts[1:]
	}
	for _, t := range r.Topics {
		rt := txnshare.TopicResponse{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, txnshare.PartitionResponse{PartitionIndex: p.PartitionIndex, ErrorCode: codes[p.PartitionIndex]})
		}
		resp.Responses = append(resp.Responses, rt)
	}
	return resp
}

func newShareTxnPeer(t *testing.T, v2 bool, key int16, script *shareAckScript) (*txnPeer, *Producer) {
	t.Helper()
	tp := newTxnPeer(t, 2, v2, func(tp *txnPeer) {
		tp.topicID = shareTopicID
		tp.shareAckKey = key
		tp.shareAck = script.answer
	})
	cfg := ProducerConfig{Brokers: []string{tp.addr}, TransactionalID: "tx", Net: NetConfig{RetryBackoff: 5e6}}
	if key != txnshare.DefaultAPIKey {
		cfg.TxnShareAckAPIKey = key
	}
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.InitTransactions(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return tp, p
}

var testShareMeta = ShareGroupMetadata{GroupID: "sg", MemberID: "m-1", MemberEpoch: 4}

func testTxnAcks() TxnAcks {
	return TxnAcks{
		{"t", 0}: {{FirstOffset: 0, LastOffset: 2, Types: []AckType{AckAccept, AckReject, AckGap}}},
		{"t", 1}: {{FirstOffset: 5, LastOffset: 9, Types: []AckType{AckAccept}}},
	}
}

func TestSendShareAcksConsumeOnlyCommit(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "v1", true: "v2"}[v2], func(t *testing.T) {
			tp, p := newShareTxnPeer(t, v2, txnshare.DefaultAPIKey, &shareAckScript{})
			ctx := testCtx(t)
			if err := p.SendShareAcksToTransaction(ctx, testTxnAcks(), testShareMeta); err != nil {
				t.Fatal(err)
			}
			tp.tmu.Lock()
			if len(tp.shareAcks) != 1 {
				t.Fatalf("%d requests for one leader", len(tp.shareAcks))
			}
			r := tp.shareAcks[0]
			tp.tmu.Unlock()
			want := &txnshare.Request{
				APIKey: txnshare.DefaultAPIKey, TransactionalID: kmsg.StringPtr("tx"), GroupID: "sg",
				ProducerID: 7, ProducerEpoch: 0, MemberID: "m-1", MemberEpoch: 4,
				Topics: []txnshare.Topic{{TopicID: shareTopicID, Partitions: []txnshare.Partition{
					{PartitionIndex: 0, AcknowledgementBatches: []txnshare.Batch{{FirstOffset: 0, LastOffset: 2, AcknowledgeTypes: []int8{1, 3, 0}}}},
					{PartitionIndex: 1, AcknowledgementBatches: []txnshare.Batch{{FirstOffset: 5, LastOffset: 9, AcknowledgeTypes: []int8{1}}}},
				}}},
			}
			if !reflect.DeepEqual(r, want) {
				t.Fatalf("request\n got %+v\nwant %+v", r, want)
			}
			// No record was produced, yet the commit goes to the coordinator (D11).
			if err := p.CommitTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if got := tp.entries("EndTxn"); len(got) != 1 || !strings.Contains(got[0], "commit=true") {
				t.Fatalf("EndTxn %q", got)
			}
			// Empty acknowledgements do nothing, and the next empty transaction ends locally.
			if err := p.BeginTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.SendShareAcksToTransaction(ctx, TxnAcks{}, testShareMeta); err != nil {
				t.Fatal(err)
			}
			if err := p.AbortTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if got := tp.entries("EndTxn"); len(got) != 1 {
				t.Fatalf("EndTxn after an empty transaction: %q", got)
			}
		})
	}
}

func TestSendShareAcksErrors(t *testing.T) {
	cases := []struct {
		name   string
		script shareAckScript
		is     []error
		not    []error
		// started: the abort must send EndTxn (the broker got as far as the partitions).
		started bool
	}{
		{"partition INVALID_RECORD_STATE", shareAckScript{parts: []map[int32]int16{{1: kerr.InvalidRecordState.Code}}},
			[]error{ErrCommitFailed, ErrTransactionAbortable, kerr.InvalidRecordState}, []error{ErrProducerFatal}, true},
		{"partition INVALID_REQUEST", shareAckScript{parts: []map[int32]int16{{0: kerr.InvalidRequest.Code}}},
			[]error{ErrCommitFailed, kerr.InvalidRequest}, nil, true},
		{"top FENCED_MEMBER_EPOCH", shareAckScript{top: []int16{kerr.FencedMemberEpoch.Code}},
			[]error{ErrCommitFailed, ErrTransactionAbortable, kerr.FencedMemberEpoch}, []error{ErrProducerFatal}, false},
		{"top UNKNOWN_MEMBER_ID", shareAckScript{top: []int16{kerr.UnknownMemberID.Code}},
			[]error{ErrCommitFailed, kerr.UnknownMemberID}, nil, false},
		{"top STALE_MEMBER_EPOCH", shareAckScript{top: []int16{kerr.StaleMemberEpoch.Code}},
			[]error{ErrCommitFailed, kerr.StaleMemberEpoch}, nil, false},
		{"top PRODUCER_FENCED", shareAckScript{top: []int16{kerr.ProducerFenced.Code}},
			[]error{ErrProducerFatal, kerr.ProducerFenced}, []error{ErrCommitFailed}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := tc.script
			tp, p := newShareTxnPeer(t, true, txnshare.DefaultAPIKey, &script)
			ctx := testCtx(t)
			err := p.SendShareAcksToTransaction(ctx, testTxnAcks(), testShareMeta)
			for _, e := range tc.is {
				if !errors.Is(err, e) {
					t.Fatalf("%v: not %v", err, e)
				}
			}
			for _, e := range tc.not {
				if errors.Is(err, e) {
					t.Fatalf("%v: is %v", err, e)
				}
			}
			if errors.Is(err, ErrProducerFatal) {
				if err := p.AbortTransaction(ctx); !errors.Is(err, ErrProducerFatal) {
					t.Fatalf("abort after fencing: %v", err)
				}
				return
			}
			if err := p.CommitTransaction(ctx); !errors.Is(err, ErrCommitFailed) {
				t.Fatalf("commit after a failed staging: %v", err)
			}
			if err := p.AbortTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if got := tp.entries("EndTxn"); (len(got) == 1) != tc.started {
				t.Fatalf("EndTxn %q, started %v", got, tc.started)
			}
			// The producer is usable again.
			if err := p.BeginTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.SendShareAcksToTransaction(ctx, testTxnAcks(), testShareMeta); err != nil {
				t.Fatalf("next transaction: %v", err)
			}
		})
	}
}

func TestSendShareAcksRetries(t *testing.T) {
	// Busy coordinator, an unreachable one (registration's NOT_ENOUGH_REPLICAS), then a
	// moved leader for partition 1: resent until staged, the last time only the partition
	// that was not staged.
	script := &shareAckScript{
		top:   []int16{kerr.ConcurrentTransactions.Code, kerr.NotEnoughReplicas.Code, 0, 0},
		parts: []map[int32]int16{{1: kerr.NotLeaderForPartition.Code}},
	}
	tp, p := newShareTxnPeer(t, true, txnshare.DefaultAPIKey, script)
	if err := p.SendShareAcksToTransaction(testCtx(t), testTxnAcks(), testShareMeta); err != nil {
		t.Fatal(err)
	}
	tp.tmu.Lock()
	defer tp.tmu.Unlock()
	if len(tp.shareAcks) != 4 {
		t.Fatalf("%d requests, want 4", len(tp.shareAcks))
	}
	last := tp.shareAcks[3].Topics
	if len(last) != 1 || len(last[0].Partitions) != 1 || last[0].Partitions[0].PartitionIndex != 1 {
		t.Fatalf("resend %+v", last)
	}
}

func TestSendShareAcksRefusals(t *testing.T) {
	tp, p := newShareTxnPeer(t, true, 96, &shareAckScript{})
	ctx := testCtx(t)
	bad := TxnAcks{{"t", 0}: {{FirstOffset: 0, LastOffset: 0, Types: []AckType{AckRelease}}}}
	if err := p.SendShareAcksToTransaction(ctx, bad, testShareMeta); !errors.Is(err, ErrAckNotTransactional) {
		t.Fatalf("RELEASE: %v", err)
	}
	if err := p.SendShareAcksToTransaction(ctx, testTxnAcks(), ShareGroupMetadata{GroupID: "sg"}); err == nil {
		t.Fatal("no member id accepted")
	}
	// The configured key is used.
	if err := p.SendShareAcksToTransaction(ctx, testTxnAcks(), testShareMeta); err != nil {
		t.Fatal(err)
	}
	if got := tp.entries("TxnShareAcknowledge"); len(got) != 1 || got[0] != "TxnShareAcknowledge key=96 member=m-1 epoch=4" {
		t.Fatalf("requests %q", got)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.SendShareAcksToTransaction(ctx, testTxnAcks(), testShareMeta); !errors.Is(err, ErrNoTransaction) {
		t.Fatalf("outside a transaction: %v", err)
	}

	// A broker that does not serve the key: an error that does not doom the transaction.
	_, p2 := newShareTxnPeer(t, true, 97, &shareAckScript{})
	p2.cfg.TxnShareAckAPIKey = 98
	err := p2.SendShareAcksToTransaction(ctx, testTxnAcks(), testShareMeta)
	if !errors.Is(err, kerr.UnsupportedVersion) || errors.Is(err, ErrTransactionAbortable) {
		t.Fatalf("unsupported: %v", err)
	}
	if err := p2.CommitTransaction(ctx); err != nil {
		t.Fatalf("commit after the refusal: %v", err)
	}

	np, err := NewProducer(ProducerConfig{Brokers: []string{tp.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer np.Close()
	if err := np.SendShareAcksToTransaction(ctx, testTxnAcks(), testShareMeta); !errors.Is(err, ErrNotTransactional) {
		t.Fatalf("idempotent producer: %v", err)
	}
}
