// Package share is exactq's share-fetch path (KIP-932 as in Apache Kafka 4.4): ShareFetch
// and ShareAcknowledge, share sessions, and the live share partitions that tie the
// SharePartition state machine (share/sharepartition) to the share-state store
// (share/sharestate, over __share_group_state) and to share-group membership
// (share/sharegroup). Kafka's counterparts are SharePartitionManager, ShareSessionCache,
// ShareFetchContext, DelayedShareFetch and KafkaApis.handleShareFetchRequest /
// handleShareAcknowledgeRequest.
//
// # Shape
//
// Manager owns, under one mutex, the share sessions and the map of live share
// partitions. A share partition is loaded lazily, on the first fetch or acknowledgement
// that names it, by reading its persisted state (store.Read): ACQUIRED is never persisted,
// so records in flight at a crash come back AVAILABLE; offsets acquired but never
// persisted become acquirable gaps; a start offset of -1 is resolved with the group's
// share.auto.offset.reset. Each live partition has its own mutex around its
// SharePartition, which is a pure state machine: every step returns an Update.
//
// Persistence. Every non-empty Update is written with store.Write, in the order the
// partition produced them (each write waits for its predecessor; a short-lived goroutine
// per write, never one per partition or record), outside the partition's lock, so
// fetches keep acquiring while an acknowledgement's write is being fsynced. Answers that
// depend on a write wait for it: acknowledgements (ShareAcknowledge, piggybacked on
// ShareFetch) and session closes. Acquisitions are not persisted, as in Kafka; records
// archived at the delivery limit while acquiring are written but nothing waits for that.
// A failed write answers its acknowledgement with the mapped error
// (SharePartition.fetchPersisterError's mapping) and drops the partition instance; the
// next use reloads it from the store, which is the truth. Writes after a failed one on
// the same instance are not attempted.
//
// Lock expiry. One goroutine sleeps until the earliest SharePartition.NextDeadline of all
// live partitions (a heap with one entry per partition) and calls Tick, which expires the
// due locks and persists the changes. Config.ManualTick leaves Tick to the caller (tests,
// with Config.Now as a fake clock).
//
// Long polls. A ShareFetch that acquires nothing and has MaxWaitMs > 0 returns a wait
// func. It watches the session's partitions in the log (Logs.Watch: high watermark or
// LSO advanced) and in the share partitions (an acknowledgement, release, lock expiry or
// log-start move may have made records acquirable) and tries again on each signal, until
// something is acquired, MaxWaitMs passes or ctx ends. With MinBytes > 1 nothing is
// acquired until that many bytes are readable, as DelayedShareFetch does.
//
// Releases. A share session closed with epoch -1 (after its acknowledgements apply) and
// the close of the connection that created a session (ConnClosed) release the member's
// ACQUIRED records on every live share partition of its group: AVAILABLE again, or
// ARCHIVED at the delivery limit, delivery counts kept; TX_PENDING records stay staged. A
// member leaving or being fenced (MemberRemoved) keeps its session, as in Kafka 4.4, so
// its client can still close it with its last acknowledgements; only a member without a
// session here has its records released at the leave.
//
// Transactional acknowledgements (KIP-1289, txnack.go). TxnShareAcknowledge stages
// ACQUIRED records as TX_PENDING (lock cancelled, never delivered, holding the SPSO) and
// answers once the staging is durable. The abort target (AVAILABLE, or ARCHIVED at the
// delivery limit) is decided at staging and persisted, so memory, the store and a restore
// agree. ApplyMarker makes the marker durable in __share_group_state, where it is the
// record of the outcome (replay resolves it), then resolves the live partitions in
// memory; it writes no share state, so no later Update can race the resolution. A
// staging write refused by the store (for example because the transaction's marker
// already fenced its epoch) is unstaged: the records are ACQUIRED again. After every
// step the share partition's refused record-state changes (TakeRefusals) are logged as
// errors: the transition table is enforced there.
//
// # What the broker does (the adapter)
//
//   - Implements Logs over its partitions (Read like a consumer fetch with replica id -1,
//     leader only; Watch on the high watermark/LSO; ListOffset; TopicName).
//   - Creates the share-state store, then NewManager(Config{Groups: effective group
//     configs, MaxShareSessions: group.share.max.share.sessions, MaxFetchBytes:
//     fetch.max.bytes, Now, Logger}, logs, store); passes Manager.InitializeShareState as
//     sharegroup.Config.InitializeShareState and Manager.MemberRemoved to
//     Coordinator.OnMemberRemoved.
//   - Dispatches ShareFetch (78) and ShareAcknowledge (79), v1-v2, to ShareFetch and
//     ShareAcknowledge with the connection id; the returned response goes in
//     server.Reply.Resp, the func in server.Reply.Wait (never both). Version 0 and the
//     share.version feature gate are the broker's (UNSUPPORTED_VERSION).
//   - Calls ConnClosed(connID) when a connection closes.
//   - KIP-1289: sets Config.TxnMemberCheck to the share-group coordinator's member check
//     (or checks before calling); dispatches TxnShareAcknowledge (key 95, v0) to
//     TxnShareAcknowledge after the feature gate and the ACLs (WRITE on the
//     transactional id, READ on the group), with register = an AddPartitionsToTxn of
//     the given __share_group_state partitions for the request's transactional id,
//     producer id and epoch (server-side, v4+ verification style), returning its error
//     code. For WriteTxnMarkers on a __share_group_state partition it calls
//     ApplyMarker with appendMarker = the control-batch append to that partition, and
//     answers the marker with the returned error's code; markers on other partitions
//     never reach the share path. Exports TxnStats as metrics (its TX_PENDING gauge
//     comes from the durable state, right from start-up).
//   - At start-up, once the store and the transaction coordinator are loaded and before
//     serving: ResolveOrphanedStagings with the coordinator as TxnOutcomes and the marker
//     path as MarkerWriter, so stagings whose marker the log lost are resolved
//     (recover.go). The Manager keeps both and repeats the check while it runs (every
//     Config.OrphanCheckInterval, and when a share partition loads with TX_PENDING
//     records). The MarkerWriter must hand its context on to ApplyMarker: it carries the
//     staged epoch that makes the store check the marker where it applies.
//   - Serves DescribeShareGroupOffsets from Offsets, and `exactq share describe` from
//     Describe.
//   - Calls Close on shutdown, before closing the store and the logs.
//
// # Where exactq differs from Kafka
//
//   - InitializeShareState resolves share.auto.offset.reset when the group coordinator
//     initializes a partition, not when the partition leader first loads it, so `latest`
//     does not skip records produced between the assignment and the first fetch.
//   - MemberRemoved releases the records of a member that has no share session here;
//     Kafka leaves them to the lock expiry. A member with a session keeps it and its
//     records, as in Kafka, until the session or its connection closes.
//   - A release (session close, connection close) covers every live partition of the
//     group, not only the partitions of the session.
//   - Live share partitions are kept when a group has no sessions left (Kafka drops and
//     reloads them); memory is bounded by the number of share partitions.
package share
