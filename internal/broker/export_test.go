package broker

import (
	"context"

	"github.com/exactq/exactq/wire"
)

// acceptAllTxns stands in for the transaction coordinator in partition-side tests: every
// transactional produce is in an ongoing transaction.
type acceptAllTxns struct{}

func (acceptAllTxns) VerifyOrAdd(context.Context, string, int64, int16, string, int32, bool) int16 {
	return 0
}

// AcceptAllTransactionsForTest lets transactional batches through without a coordinator.
func AcceptAllTransactionsForTest(b *Broker) { b.txn.Store(&txnVerifierBox{acceptAllTxns{}}) }

// FailMetadataProposalsForTest makes every metadata proposal for which fail returns an
// error fail with it, before it reaches the log (nil: none fail).
func FailMetadataProposalsForTest(b *Broker, fail func([]wire.MetadataRecord) error) {
	if fail == nil {
		b.proposeFault.Store(nil)
		return
	}
	b.proposeFault.Store(&fail)
}
