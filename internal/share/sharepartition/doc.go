// Package sharepartition is the share state of one (share group,
// topic-partition): KIP-932's SharePartition plus KIP-1289's TX_PENDING, as a
// pure, deterministic state machine.
//
// # Model
//
// A SharePartition holds the in-flight window [StartOffset (SPSO), EndOffset
// (SPEO)] as in-flight batches (the ranges handed to consumers), each with one
// record state until an operation touches part of it, then runs of offsets
// sharing one state. Kafka keeps one entry per offset there; exactq never does,
// because a batch's offset span is not bounded by its bytes (compaction gaps, a
// 72-byte batch claiming 10^9 offsets): memory and every step's work grow with
// the number of distinct states, never with a span. A batch with nearly a state
// per offset is packed instead, at two bytes an offset (packed.go), so P7's worst
// case (every record in a state of its own) costs about 2 bytes a record.
// Records are AVAILABLE, ACQUIRED (locked to a member until a deadline),
// ACKNOWLEDGED, ARCHIVED or TX_PENDING (acknowledgement staged in a producer
// transaction); ARCHIVING is reserved for the KIP-1191 DLQ. Everything below
// the SPSO is terminal; the SPSO never passes a non-terminal record. Every state
// change goes through setState, which checks the transition table
// (CanTransition, CanRevert) and refuses, leaving the record as it was, what the
// table does not allow; TakeRefusals reports such refusals to the broker.
//
// It does no I/O, starts no goroutines and reads no clock: inputs carry nowMs
// (Unix milliseconds) and every mutating step returns an Update, the ranges
// that changed plus the SPSO, in the shape of WriteShareGroupState / a
// ShareUpdate record. Snapshot returns the full state (a ShareSnapshot);
// Restore rebuilds a partition from it. It is not safe for concurrent use.
//
// # Driving it (the broker)
//
// One goroutine (or lock) owns each SharePartition. The broker:
//
//  1. Creates it on first use: reads the persisted state; if none or
//     StartOffset is -1, resolves share.auto.offset.reset with
//     AutoOffsetReset.Resolve and calls New, else calls Restore.
//  2. On ShareFetch: if CanAcquire, reads the log from NextFetchOffset (under
//     read_committed, up to the LSO with the aborted-transaction list), calls
//     Acquire with the batches' offsets and attributes and the request's
//     remaining MaxRecords, BatchSize and mode, and returns AcquiredRecords.
//     Acquisitions are not persisted (Update is empty unless records at the
//     delivery limit were archived).
//  3. On acknowledgements (ShareFetch piggyback, ShareAcknowledge): calls
//     ValidateAckBatches with the request version's rules, then Acknowledge,
//     writes the Update to the share-state store, and answers only when it is
//     durable. If the write fails, it answers with the mapped error and drops
//     the partition so the next use restores it from the store (the in-memory
//     step is not rolled back; the store is the truth).
//  4. On share-session close (epoch -1) and on connection close: ReleaseMember
//     for each partition of the session, then persists the Update.
//  5. Timers: after every step it reads NextDeadline and (re)schedules the
//     partition in its timer wheel; when the timer fires it calls Tick(now)
//     and persists the Update. NextDeadline may be early, never late; a
//     spurious Tick is harmless. There is no timer per record.
//  6. TxnShareAcknowledge: after registering the __share_group_state
//     partitions in the transaction, calls StageTxnAcks, persists the Update,
//     answers when durable; on a failed write calls UnstageTxnAcks with the
//     same batches (or drops the partition if the outcome is unknown).
//  7. Transaction markers on the __share_group_state partition: CompleteTxn
//     for each share partition the store resolved. Nothing is written for it:
//     the marker in the log is the durable resolution (sharestate.ApplyMarker
//     appends it and replay applies it), and later Updates start from the
//     resolved state.
//  8. Log start offset moves (retention, DeleteRecords): AdvanceLogStart.
//  9. Metrics and `exactq share describe`: Counters, TxPendingRecords,
//     Describe.
//
// Writes to the store must be applied in the order the Updates were produced
// for a partition; each carries the SPSO current after its step.
package sharepartition
