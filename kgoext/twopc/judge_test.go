package twopc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// judge's table: what a partition's answer to Produce does to its batch. Resending is
// only safe where the broker de-duplicates or never wrote the batch; giving up on
// fencing is what makes a zombie stop.
func TestJudge(t *testing.T) {
	for _, c := range []struct {
		err  error
		want verdict
	}{
		{nil, written},
		{kerr.DuplicateSequenceNumber, written},
		{kerr.NotLeaderForPartition, retry},
		{kerr.UnknownTopicOrPartition, retry},
		{kerr.NotEnoughReplicas, retry},
		{kerr.RequestTimedOut, retry},
		{kerr.ConcurrentTransactions, retry},
		{&net.OpError{Op: "read", Err: errors.New("reset")}, retry},
		{context.DeadlineExceeded, retry},
		{kerr.ProducerFenced, failed},
		{kerr.InvalidProducerEpoch, failed},
		{kerr.InvalidProducerIDMapping, failed},
		{kerr.TransactionalIDAuthorizationFailed, failed},
		{kerr.OutOfOrderSequenceNumber, failed},
		{kerr.UnknownProducerID, failed},
		{kerr.TransactionAbortable, failed},
		{kerr.MessageTooLarge, failed},
		{kgo.ErrClientClosed, failed},
		{errEncode, failed},
	} {
		if got := judge(fmt.Errorf("wrapped: %w", c.err)); got != c.want && c.err != nil {
			t.Errorf("judge(%v) = %d, want %d", c.err, got, c.want)
		}
		if c.err == nil && judge(nil) != written {
			t.Error("judge(nil) is not written")
		}
	}
}
