package twopc

// ForceTransactionsV1 makes p use transactions v1 (AddPartitionsToTxn, EndTxn v4)
// whatever the broker finalized; call it before InitTransactions.
func ForceTransactionsV1(p *Producer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.txn.forceV1 = true
}

// UsesTransactionsV2 reports what InitProducerId decided.
func UsesTransactionsV2(p *Producer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.txn.v2
}
