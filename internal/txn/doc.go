// Package txn is exactq's transaction coordinator (KIP-98, KIP-447, KIP-890): it owns
// the transactional ids whose __transaction_state partitions it is given, serves
// InitProducerId (transactional), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// DescribeTransactions and ListTransactions, verifies or adds partitions for the produce
// path, writes transaction markers through the broker, aborts timed-out transactions and
// expires idle ids. Behaviour follows Apache Kafka 4.4 (TransactionCoordinator.scala,
// TransactionStateManager.scala, TransactionMetadata.java, TransactionState.java).
//
// # Structure
//
// The core (state.go, core.go) is pure: per transactional id an entry with the durable
// Metadata and at most one pending transition. Each request is a step
// (state, input, now) → (transit to persist | immediate answer); a decided transaction
// yields a markerJob. It does no I/O, spawns nothing and reads no clock. The Coordinator
// (coordinator.go) is the edge: it holds the core under one mutex, appends each transit to
// the id's coordlog partition and applies it only once durable, writes markers with
// Broker.WriteMarkers and runs one ticker goroutine for marker retries, timeouts and
// expiration.
//
// # Ordering guarantees
//
//   - Every state change an answer depends on is durable before the answer.
//   - PrepareCommit/PrepareAbort is durable before any marker is written; markers carry
//     that record's producer id and epoch; Complete* is appended only after every
//     partition's marker is durable. Failed markers and failed Complete* appends are
//     retried every MarkerRetryBackoffMs until they succeed (or Close).
//   - While an id has a transition in flight (including the whole marker phase), other
//     requests for it get CONCURRENT_TRANSACTIONS, as in Kafka.
//   - New replays every partition; an id found in Prepare* has its markers re-sent to
//     every partition of the Prepare* record, then Complete* is written.
//
// # Transaction versions
//
// The coordinator implements transaction.version levels 0, 1 and 2, chosen per request as
// Kafka does: EndTxn v5+ and AddPartitionsToTxn v4+ (the produce path's implicit add) are
// version 2, older requests and AddOffsetsToTxn are version 0. It writes
// TransactionLogValue v1 (flexible, with PreviousProducerId, NextProducerId and
// ClientTransactionVersion), which is what Kafka writes at finalized level ≥ 1, and its own
// aborts (timeouts, fencing by InitProducerId) bump the epoch as Kafka does at finalized
// level 2. The broker should therefore advertise transaction.version with supported range
// 0-2 and finalized level 2; KIP-890 clients (franz-go, Java 4.x) then use EndTxn v5 and
// produce v12 without AddPartitionsToTxn, which needs the produce path to call
// VerifyOrAdd with add=true.
//
// # Deviations from Kafka
//
//   - A marker write that fails with INVALID_PRODUCER_EPOCH or
//     TRANSACTION_COORDINATOR_FENCED counts as done for that partition; Kafka stops
//     sending the transaction's markers and leaves it in Prepare* until a reload.
//   - A transactional id longer than 32767 bytes (the int16 string length of the
//     TransactionLogKey) is INVALID_REQUEST; Kafka fails to serialise it.
//   - Two-phase commit (KIP-939, InitProducerId v6, served with package wire since
//     kmsg v1.15.1 stops at v5): Enable2Pc is Kafka's (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//     without transaction.two.phase.commit.enable; timeout MaxInt32, never timed out).
//     KeepPreparedTxn, which Kafka 4.4 answers UNSUPPORTED_VERSION, follows the KIP: an
//     Ongoing transaction is kept with a bumped epoch (or a fresh producer id when the
//     epoch is exhausted), its partitions untouched, and only ended by the new producer
//     (Metadata.Kept; see core.keep and docs/transactional-acks.md §7).
package txn
