// Package client is exactq's own Go client for the Kafka protocol: a Producer (idempotent,
// optionally transactional), a Consumer (assigned partitions, or a classic consumer group
// member) and an Admin client.
//
// Every wire message is a kmsg request or response; record batches are encoded with
// kmsg.RecordBatch and kmsg.Record and compressed with package compress. Errors a broker
// returns are kerr values, so callers test them with errors.Is(err, kerr.UnknownTopicOrPartition).
//
// Layering, bottom up:
//
//	conn.go       one TCP connection: ApiVersions negotiation, request headers, pipelining
//	cluster.go    seed brokers, Metadata cache, broker id → connection
//	producer*.go  batching, partitioning, idempotence (producerid.go), retries
//	consumer.go   assigned-partition fetching with KIP-227 fetch sessions (fetchsession.go)
//	coordinator.go FindCoordinator and the retry loop of coordinator exchanges
//	group.go      consumer group membership (classic protocol): Subscribe, join/sync/heartbeat,
//	              eager and cooperative (KIP-429) rebalances, offset commit and fetch
//	balancer*.go  the range and cooperative-sticky assignors (Kafka's RangeAssignor and
//	              AbstractStickyAssignor, same algorithm, members visited in id order)
//	txn.go        transactions: InitTransactions, BeginTransaction, SendOffsetsToTransaction,
//	              CommitTransaction, AbortTransaction
//	admin.go      topic, config and offset administration
//	admin_coordinator.go  routing admin requests to group and transaction coordinators
//	admin_groups.go       ListGroups, DescribeGroups (consumer-protocol decoding),
//	              DeleteGroups, FetchOffsets
//	admin_txn.go  ListTransactions, DescribeTransactions, DescribeProducers
//	admin_share.go DescribeShareGroups (ShareGroupDescribe), DescribeShareGroupOffsets
//	share.go      ShareConsumer (KIP-932 share groups): ShareGroupHeartbeat membership,
//	              share sessions per leader, piggybacked acks, implicit/explicit modes
//	share_acks.go AckType, ShareGroupMetadata, TxnAcks and the ack batch rules
//	txn_share.go  Producer.SendShareAcksToTransaction (KIP-1289 TxnShareAcknowledge)
//
// A broker's error message replaces kerr's generic description in the error text
// (BrokerError: "TOPIC_ALREADY_EXISTS: Topic 'demo' already exists."); errors.Is with the
// kerr value still holds. Consumer.Poll returns after every fetch that moved a position,
// with no records when the fetch only skipped control batches or aborted records.
//
// Exactly-once consume-transform-produce:
//
//	c.Subscribe("in") // ConsumerConfig{Group: "g", IsolationLevel: ReadCommitted, DisableAutoCommit: true}
//	for {
//		recs, _ := c.Poll(ctx)
//		p.BeginTransaction(ctx) // ProducerConfig{TransactionalID: "t-1"}
//		... p.Produce(ctx, out, nil) per record ...
//		p.SendOffsetsToTransaction(ctx, c.UncommittedOffsets(), c.GroupMetadata())
//		if err := p.CommitTransaction(ctx); errors.Is(err, ErrTransactionAbortable) {
//			p.AbortTransaction(ctx) // and Seek back to the last committed positions
//		}
//	}
//
// Exactly-once on a share group (KIP-1289): the acknowledgements go into the transaction.
//
//	recs, _ := sc.Poll(ctx) // ShareConsumerConfig{Group: "sg", Topics: ..., AckMode: AckExplicit}
//	md := sc.GroupMetadata()
//	... sc.Acknowledge(r, AckAccept or AckReject) per record ...
//	acks, _ := sc.AcknowledgementsForTransaction()
//	p.BeginTransaction(ctx)
//	... p.Produce(ctx, out, nil) ...
//	if err := p.SendShareAcksToTransaction(ctx, acks, md); errors.Is(err, ErrCommitFailed) {
//		p.AbortTransaction(ctx) // the inputs are delivered again
//	} else { p.CommitTransaction(ctx) }
//
// A transaction may hold only acknowledgements (consume-only); it still ends with EndTxn.
//
// Transactional errors come in three classes: ErrProducerFatal (fenced by a newer producer
// with the same id, kerr.ProducerFenced; not authorized; close the producer),
// ErrTransactionAbortable (this transaction cannot commit; abort and retry), and everything
// else (ctx or transport errors: call the same method again). The transaction protocol
// version follows the coordinator's finalized transaction.version feature: with 2
// (KIP-890) partitions join the transaction implicitly and every EndTxn bumps the epoch;
// otherwise AddPartitionsToTxn (v3, batched per send round) precedes the first produce to
// a partition. A transaction with neither records nor offsets ends without EndTxn.
//
// Each Producer, Consumer and Admin owns its own connections: a fetch long poll never
// delays a produce response queued behind it on the same pipelined connection.
package client
