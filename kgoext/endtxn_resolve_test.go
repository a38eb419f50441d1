package kgoext_test

import (
	"context"
	"errors"
	"testing"

	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// endTxnV1 is EndTxn pinned to version 4 (transactions v1: the epoch is not bumped).
type endTxnV1 struct{ *kmsg.EndTxnRequest }

func (endTxnV1) MaxVersion() int16 { return 4 }

// TestResolveCommitAnswers: the resend of a commit whose answer was lost tells committed
// from aborted from fenced, against a real coordinator, whichever EndTxn version ended the
// transaction (v5, transactions v2, bumps the epoch; v4 does not), and commits a
// transaction whose EndTxn never arrived.
func TestResolveCommitAnswers(t *testing.T) {
	b := testbroker.Start(t)
	admCl := newClient(t, b.Addr)
	if _, err := kadm.NewClient(admCl).CreateTopic(testCtx(t), 1, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("the EndTxn answer was lost")
	for _, c := range []struct {
		name string
		// end does to the open transaction what happened before the answer was lost.
		end     func(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16)
		want    error // nil: committed
		fenced  bool
		visible bool // the record is in the read_committed output afterwards
	}{
		{name: "committed, transactions v2", visible: true,
			end: func(t *testing.T, cl *kgo.Client, _ string, _ int64, _ int16) {
				if err := kgoext.EndTransaction(testCtx(t), cl, kgo.TryCommit); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "committed, transactions v1", visible: true,
			end: func(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16) {
				req := kmsg.NewPtrEndTxnRequest()
				req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, true
				r, err := cl.DiscoveredBrokers()[0].Request(testCtx(t), endTxnV1{req})
				if err == nil {
					err = kerr.ErrorForCode(r.(*kmsg.EndTxnResponse).ErrorCode)
				}
				if err != nil {
					t.Fatal(err)
				}
			}},
		{name: "never arrived", visible: true,
			end: func(*testing.T, *kgo.Client, string, int64, int16) {}},
		{name: "aborted", want: kgoext.ErrTransactionAborted,
			end: func(t *testing.T, cl *kgo.Client, _ string, _ int64, _ int16) {
				if err := kgoext.EndTransaction(testCtx(t), cl, kgo.TryAbort); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "fenced after the commit", want: kgoext.ErrCommitOutcomeUnknown, fenced: true, visible: true,
			end: func(t *testing.T, cl *kgo.Client, id string, _ int64, _ int16) {
				if err := kgoext.EndTransaction(testCtx(t), cl, kgo.TryCommit); err != nil {
					t.Fatal(err)
				}
				if _, _, err := newTxnClient(t, b.Addr, id).ProducerID(testCtx(t)); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := "resolve-" + t.Name()
			cl := newTxnClient(t, b.Addr, id)
			ctx := testCtx(t)
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte(id)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			pid, epoch, err := cl.ProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c.end(t, cl, id, pid, epoch)
			err = kgoext.ResolveCommit(context.Background(), cl, pid, epoch, cause)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("ResolveCommit: %v, want committed", err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("ResolveCommit: %v, want %v", err, c.want)
			case c.fenced && !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerIDMapping):
				t.Fatalf("ResolveCommit: %v, want the fencing error reachable", err)
			}
			if got := committedOutputs(t, b.Addr, newTxnClient(t, b.Addr, id+"-reader"))[id]; got != btoi(c.visible) {
				t.Fatalf("the transaction's record is %d times in the read_committed output, want %d", got, btoi(c.visible))
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
