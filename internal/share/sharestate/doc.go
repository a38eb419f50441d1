// Package sharestate is exactq's share coordinator: the persisted state of every
// share-partition (start offset, state and leader epochs, delivery-complete count, and the
// delivery state of in-flight offset ranges, TX_PENDING included) over the internal topic
// __share_group_state.
//
// # API
//
// The methods keep the semantics of Kafka's share-state RPCs, one key at a time, so an
// RPC layer can be put in front later: Initialize (InitializeShareGroupState), Read
// (ReadShareGroupState), Write (WriteShareGroupState), Delete (DeleteShareGroupState) and
// ReadSummary (ReadShareGroupStateSummary). Errors wrap the *kerr.Error of the Kafka code
// (errors.Is(err, kerr.FencedLeaderEpoch)). Every method that changes state returns after
// the record is durable (coordlog.Partition.Append returns after the fsync), and the
// in-memory state changes only then.
//
// Each __share_group_state partition is a Core (core.go: no I/O, no clock, no goroutines;
// every rule of the coordinator, the KIP-1289 commit and abort rule included) run by a
// driver goroutine (driver.go). The driver steps a round of queued requests (at most 256,
// or 1 MiB of records), appends all their records as one write (group commit: one fsync
// for the round), and answers them in order only then, so no answer shows state the log
// does not hold. A failed append fails the requests it could touch: those whose records
// it held answer COORDINATOR_NOT_AVAILABLE wrapping ErrOutcomeUnknown, those stepped after
// it COORDINATOR_NOT_AVAILABLE; the Core is then rebuilt by replaying the log. Every
// other error means nothing was written.
//
// # On-disk format
//
// Records are Kafka's (share-coordinator ShareSnapshot{Key,Value}.json,
// ShareUpdate{Key,Value}.json; CoordinatorRecordSerde):
//
//	key   = int16 record type (0 ShareSnapshot, 1 ShareUpdate)
//	        + v0 key, not flexible: GroupId string, TopicId uuid, Partition int32
//	value = int16 version (0) + v0 value, flexible:
//	  ShareSnapshot: SnapshotEpoch int32, StateEpoch int32, LeaderEpoch int32,
//	                 StartOffset int64, CreateTimestamp int64, WriteTimestamp int64,
//	                 StateBatches [], tag 0 DeliveryCompleteCount int32 (default -1)
//	  ShareUpdate:   SnapshotEpoch int32, LeaderEpoch int32 (-1 unchanged),
//	                 StartOffset int64 (-1 unchanged), StateBatches [] (the changed
//	                 ranges), tag 0 DeliveryCompleteCount int32 (-1 unchanged)
//	  StateBatch:    FirstOffset int64, LastOffset int64, DeliveryState int8,
//	                 DeliveryCount int16
//	tombstone = the ShareSnapshot key with a null value (Delete)
//
// exactq extends StateBatch with tagged fields, written only on TX_PENDING (5) batches:
// tag 0 staged producer id int64, 1 staged producer epoch int16, 2 staged ack type int8,
// 3 commit state int8, 4 abort state int8. Kafka's draft (kip-1289.md §4.5) carries the
// same information but its schema could not be read; tags keep the records readable by a
// Kafka 4.4 share coordinator, which skips unknown tags.
//
// Snapshots and updates: Initialize always writes a ShareSnapshot (snapshot epoch + 1,
// state replaced). Write writes a ShareUpdate holding only the request's ranges, unless the
// key already has Config.UpdatesPerSnapshot updates since its last snapshot; then it writes
// a ShareSnapshot of the merged state pruned below the start offset. Replay: a snapshot
// replaces the key's state, an update is merged into it with the combiner (higher delivery
// count wins, then higher state id, then the staging fields; pruned below the start
// offset; equal neighbours coalesced), a tombstone removes the key. Leader and state epochs
// only grow while the key lives.
//
// # Keying, compaction and pruning
//
// Snapshot and update records of one share-partition have different keys: the same
// (GroupId, TopicId, Partition) behind a different record type. Under log compaction the
// latest snapshot of every key would survive, but so would only the latest update, and an
// update is a delta: with snapshot S, updates U1 then U2, compaction keeps S and U2 and
// loses U1 for ever. Compaction is therefore NOT safe for this format, and Kafka does not
// compact __share_group_state: it creates it with cleanup.policy=delete and retention.ms=-1
// and deletes whole prefixes of the log instead (ShareCoordinatorOffsetsManager,
// share.coordinator.state.topic.prune.interval.ms). exactq does the same: the broker must
// create __share_group_state with cleanup.policy=delete, retention.ms=-1, and
// Config.NumPartitions partitions, and periodically call DeleteRecords up to
// LastRedundantOffset(p), the oldest latest-snapshot offset of the live keys of p (every
// record below it is superseded by a later snapshot or by a tombstone). SnapshotCold,
// called every Config.ColdSnapshotInterval, re-snapshots idle keys so they do not pin the
// log. A tombstone only has to outlive the records of its key, which it does, because
// pruning never passes the snapshot of a live key and a deleted key's records precede its
// tombstone.
//
// # KIP-1289: staged acknowledgements and transaction markers
//
// A TxnShareAcknowledge stages offsets as TX_PENDING through Write (batches with
// DeliveryState StateTxPending and the Txn* fields). These writes are PLAIN batches, not
// transactional ones, following kip-1289.md: the staged state is ordinary share state
// written by WriteShareGroupState (§5.1 step 6, §4.5), the transaction's outcome is decided
// by matching the marker against the staged producer id and epoch (D6), and the record must
// outlive an abort, because an abort does not undo the staging: it makes the offsets
// AVAILABLE with the delivery count the staging recorded, or ARCHIVED at the delivery limit
// (D5). Transactional data would be discarded on abort and so lose that count. A
// ShareSnapshot also mixes keys and producers and could not belong to one transaction. The
// __share_group_state partition joins the transaction (the broker registers it before
// staging, §4.4) only so that the transaction coordinator writes its marker there.
//
// A marker for producer P on partition p resolves every TX_PENDING batch of p staged by P
// with an epoch <= the marker's epoch (under transaction version 2 the marker carries the
// bumped epoch): on commit the batch takes its commit state (ACKNOWLEDGED for an accept;
// ARCHIVED, or ARCHIVING with a DLQ, for a reject or a gap), on abort its abort state; the
// delivery count is unchanged, and offsets that became terminal are added to the
// delivery-complete count. Nothing else is written: the marker itself, durable in the same
// log, is the record of the outcome, and replay applies it at its position. A staging whose
// producer epoch is below a marker already seen for that producer on the partition is
// refused with INVALID_PRODUCER_EPOCH: it belongs to a transaction that has already ended
// (for example aborted on timeout while the TxnShareAcknowledge was in flight), and
// accepting it would leave the offsets TX_PENDING for ever. Under transaction version 0/1
// the commit marker carries the staging epoch itself, so a late staging at that epoch
// cannot be told from the next transaction's; exactq's producers use version 2.
//
// # What the broker must do
//
//   - At start-up: New(cfg, partitions of __share_group_state) before serving any share
//     RPC; Load(p) again when an operation answered COORDINATOR_NOT_AVAILABLE.
//   - Once the transaction coordinator is loaded too: ask it about every Stagings entry
//     and write the marker again for transactions already decided, whose marker the log
//     lost (share.Manager.ResolveOrphanedStagings).
//   - Share-partition leaders call Read on load (and after losing leadership), Write after
//     acknowledgements, releases, lock expiry and stagings, Initialize and Delete from the
//     group coordinator, ReadSummary for lag and DescribeShareGroupOffsets.
//   - TxnShareAcknowledge: validate, register the state partitions PartitionFor(key) in
//     the transaction, move the offsets to TX_PENDING, Write them (the answer waits for
//     it), then answer. Set TxnAbortState to StateArchived for offsets whose delivery count
//     has reached the group's delivery limit, and TxnCommitState to StateArchiving for a
//     reject when the group has a DLQ.
//   - WriteTxnMarkers for a __share_group_state partition p: call
//     ApplyMarker(ctx, p, pid, epoch, commit, appendMarker), where appendMarker appends the
//     control batch to p and returns once it is durable; answer the marker after
//     ApplyMarker returns (ApplyMarkerResult also counts what was resolved, for metrics;
//     share.Manager.ApplyMarker does all of this), and hand the returned keys to the live share-partitions, which
//     resolve their in-memory TX_PENDING records the same way (re-Read them, or apply the
//     same rule). ApplyMarker runs in the partition's order of requests, the control batch
//     appended after the records of the requests before it, so the store's
//     records and the marker are in the same order in memory as in the log; CompleteTxn
//     alone is for callers that already guarantee that order.
//   - Every share.coordinator.state.topic.prune.interval.ms: DeleteRecords(p,
//     LastRedundantOffset(p)); every Config.ColdSnapshotInterval: SnapshotCold.
package sharestate
