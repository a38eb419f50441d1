// Package kgoext adds to franz-go's kgo client what it lacks for KIP-1289, transactional
// share acknowledgements: a share consumer whose acknowledgements can go into a producer
// transaction, the call that stages them there, and the end of a transaction that holds
// only acknowledgements. Everything else is kgo's: connections, metadata, producing,
// transactions (BeginTransaction, the producer id and its KIP-890 epoch bumps, EndTxn of
// transactions with records), consumer groups, admin (kadm). kgoext uses *kgo.Client as its
// transport and returns *kgo.Record, so a kgo program adds it without a second client.
//
// # What is ours, and why
//
//   - ShareConsumer (NewShareConsumer). kgo's share consumer (kgo.ShareGroup) accepts every
//     record still unacknowledged when the application polls again, so it cannot hold
//     acknowledgements back for a transaction. Ours never acknowledges what the caller did
//     not: in explicit mode (ExplicitAcks) a poll with unacknowledged records fails, and
//     AcknowledgementsForTransaction takes the acknowledgements out of the normal path (a
//     ShareFetch carries only acknowledgements recorded before the Poll that started it,
//     so one still in flight when Poll returns never takes those meant for a
//     transaction). It
//     runs the KIP-932 protocol itself (ShareGroupHeartbeat membership, a share session per
//     partition leader, acknowledgements piggybacked on ShareFetch or sent in
//     ShareAcknowledge, gaps, ACCEPT/RELEASE/REJECT/RENEW) over the kgo client's
//     connections: ShareGroupHeartbeat to the group coordinator it finds with
//     FindCoordinator, ShareFetch and ShareAcknowledge with (*kgo.Client).Broker(leader),
//     leaders and topic ids from Metadata requests through the client. A
//     NOT_LEADER_OR_FOLLOWER, or any retriable error, refreshes the metadata and the
//     partition is fetched from its new leader. kgo sends ShareFetch and ShareAcknowledge on
//     each broker's fetch connection (Produce has its own), so the consumer's long polls
//     delay no produce request of the same client; it should not share a client with kgo's
//     own consumers, whose fetches would queue behind them.
//   - SendShareAcksToTransaction and SendShareAcks. TxnShareAcknowledge (KIP-1289) is not a
//     kmsg message; package wire defines it. SendShareAcksToTransaction reads the
//     transactional id, producer id and epoch from a transactional *kgo.Client (fresh each
//     call: kgo stores the epoch a KIP-890 EndTxn bumped) and calls SendShareAcks, the
//     lower-level form that takes a ProducerIdentity, for producers that are not a
//     transactional *kgo.Client (a KIP-939 two-phase-commit producer).
//   - EndTransaction and TransactionalHooks. kgo's EndTransaction sends no EndTxn when no
//     record and no consumer offset joined the transaction, so a transaction holding only
//     share acknowledgements (consume-only) would stay open until it timed out and
//     aborted. EndTransaction wraps it and sends EndTxn itself when kgo did not.
//
// # Ending a consume-only transaction, and the epoch
//
// EndTransaction knows whether kgo sent EndTxn from the hooks TransactionalHooks installs
// on the transactional client (kgo.HookBrokerWrite for API key 26, and the produce hooks
// for the records of the transaction). When kgo sent none and acknowledgements were
// staged, EndTransaction sends EndTxn to the transaction coordinator pinned to version 4.
// The reason: under transaction.version 2 (KIP-890, which exactq runs and kgo uses), EndTxn
// v5 bumps the producer epoch and returns the new one, and only kgo's own EndTxn stores
// it. After a v5 of ours kgo would keep the old epoch and its next produce would be fenced.
// The coordinator picks the transaction version from the EndTxn version (Kafka 4.4's
// TransactionCoordinator: TransactionVersion.transactionVersionForEndTxn, then
// endTransactionWithTV1 for v4 and below; exactq's internal/txn does the same): v4 ends
// the transaction at the current epoch, without a bump, and the markers carry that epoch,
// which resolves the staged acknowledgements (KIP-1289 D6: a marker resolves stagings at an
// epoch up to its own). kgo's epoch stays right, and its next transaction, with or without
// records, goes on with it. The price is transaction version 1's weaker fencing for that one
// transaction: a TxnShareAcknowledge of it still in flight when it ended (a call that
// failed on a transport error or ctx) could be staged at the same epoch in the next
// transaction. Abort after such an error, and do not reuse the acknowledgements.
//
// EndTransaction never commits acknowledgements without the records produced with them:
// asked to commit, it aborts instead (and returns ErrTransactionAborted) when a record of
// the transaction failed, when records were produced but none succeeded (kgo then aborts
// under KIP-890 or sends nothing before it), or when SendShareAcksToTransaction returned
// ErrCommitFailed.
//
// # Exactly-once consume-transform-produce on a share group
//
//	txn, _ := kgo.NewClient(append([]kgo.Opt{
//		kgo.SeedBrokers(brokers...),
//		kgo.TransactionalID("orders-1"),
//	}, kgoext.TransactionalOpts()...)...)
//	transport, _ := kgo.NewClient(kgo.SeedBrokers(brokers...))
//	c, _ := kgoext.NewShareConsumer(transport, "orders", kgoext.ShareTopics("in"), kgoext.ExplicitAcks())
//	for {
//		recs, err := c.Poll(ctx)
//		if err != nil { /* ... */ }
//		if err := txn.BeginTransaction(); err != nil { /* ... */ }
//		for _, r := range recs {
//			if out, ok := transform(r); ok {
//				txn.Produce(ctx, &kgo.Record{Topic: "out", Value: out}, nil)
//				c.Acknowledge(r, kgoext.AckAccept)
//			} else {
//				c.Acknowledge(r, kgoext.AckReject) // archived on commit, no output
//			}
//		}
//		md := c.GroupMetadata()
//		acks, err := c.AcknowledgementsForTransaction()
//		if err == nil {
//			err = kgoext.SendShareAcksToTransaction(ctx, txn, acks, md)
//		}
//		end := kgo.TryCommit
//		if err != nil {
//			end = kgo.TryAbort // the inputs come back
//		}
//		if err := kgoext.EndTransaction(ctx, txn, end); err != nil { /* retry with kgo.TryAbort */ }
//	}
//
// A transaction that produces nothing (consume-only) is the same loop without Produce.
package kgoext
