package broker

import "context"

// acceptAllTxns stands in for the transaction coordinator in partition-side tests: every
// transactional produce is in an ongoing transaction.
type acceptAllTxns struct{}

func (acceptAllTxns) VerifyOrAdd(context.Context, string, int64, int16, string, int32, bool) int16 {
	return 0
}

// AcceptAllTransactionsForTest lets transactional batches through without a coordinator.
func AcceptAllTransactionsForTest(b *Broker) { b.txn.Store(&txnVerifierBox{acceptAllTxns{}}) }
