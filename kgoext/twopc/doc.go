// Package twopc is a KIP-939 two-phase-commit transactional producer for franz-go: a
// Producer that takes part in an external two-phase commit (a database, a stream
// processor's checkpoints) through a *kgo.Client.
//
// # Why it exists
//
// kgo's transactional producer cannot be a two-phase-commit participant: its
// InitProducerId never sets Enable2Pc or KeepPreparedTxn (InitProducerId v6, which kmsg
// v1.15.1 cannot encode), so a kgo client starting with the transactional id of a prepared
// transaction aborts it, whatever the external coordinator decided. This package sends
// its own InitProducerId v6 and runs the transaction itself: producer id and epoch,
// sequence numbers, AddPartitionsToTxn (transactions v1) or the implicit partition adds
// and epoch bumps of transactions v2 (KIP-890), EndTxn, and prepare, recover and complete.
//
// # What is kgo's
//
// The *kgo.Client given to NewProducer is the transport: its metadata cache (partition
// counts, leaders, topic auto-creation as kgo.AllowAutoTopicCreation says), its
// connections with their retries (kgo.RequestRetries, kgo.RetryBackoffFn,
// kgo.UnknownTopicRetries, kgo.MetadataMinAge), its FindCoordinator routing, and its
// producer settings kgo.RecordPartitioner, kgo.ProducerBatchMaxBytes,
// kgo.ProducerBatchCompression and kgo.ProduceRequestTimeout.
// Records go in and come out as *kgo.Record; share acknowledgements are kgoext's
// (kgoext.SendShareAcks). What is ours is the transaction: kgo routes transaction
// requests by their concrete kmsg type, so InitProducerId v6 and version-capped requests
// go to the coordinator through (*kgo.Broker).RetriableRequest, with the coordinator
// errors retried here; InitProducerId v6 is encoded by package wire. The client
// must allow InitProducerId v6 and TxnShareAcknowledge: kgo.MaxVersions(twopc.Versions()).
//
// # Flow
//
//	p, _ := twopc.NewProducer(cl, "job-1")
//	p.InitTransactions(ctx)            // first start only: aborts what is left open
//	p.BeginTransaction()
//	p.Produce(ctx, rec, promise)       // and share acknowledgements (KIP-1289) or group offsets
//	st, err := p.PrepareTransaction(ctx) // phase one: everything is written, the vote is yes
//	// store st.String() with the external decision
//	p.CommitTransaction(ctx)           // phase two (or AbortTransaction)
//
// After a crash between the two phases, a new Producer with the same transactional id
// calls RecoverPreparedTransaction (never InitTransactions, which aborts) and then
// CompleteTransaction with the state stored with the decision: it commits if the stored
// state is the recovered one and aborts otherwise. The broker keeps a two-phase
// transaction open past any transaction timeout: only its producer, a recovering producer,
// or an InitTransactions (or a plain kgo transactional client) with the same id ends it.
//
// # Simplifications
//
// The producer is synchronous: records are buffered per partition and sent by Flush,
// PrepareTransaction, CommitTransaction or a Produce that would overfill a batch, one
// batch per partition per Produce request, one request per leader at a time. Batches are
// compressed with the client's first kgo.ProducerBatchCompression codec at its default
// level. It suits the transaction sizes of a checkpoint, not a firehose: use
// a kgo transactional client where two-phase commit is not needed. The records are the
// Producer's own: (*kgo.Client).Flush, BufferedProduceRecords and kgo's produce hooks do
// not see them.
package twopc
