// Package group is exactq's consumer-group coordinator and offset store, the equivalent
// of Apache Kafka 4.4's group-coordinator module for classic groups (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, TxnOffsetCommit,
// DescribeGroups, ListGroups, DeleteGroups, OffsetDelete) and KIP-848 consumer groups
// (ConsumerGroupHeartbeat, ConsumerGroupDescribe; consumer.go, whose pure reconciliation
// and assignors are package consumer), with the online migration between the two
// protocols (migration.go: a classic group upgraded when a consumer-protocol member joins,
// its classic members served from the server-side assignment, and downgraded back).
//
// # Shape
//
// The package has a pure core and an edge (DESIGN.md principle 1):
//
//   - shard (shard.go, join.go, offsets.go, admin.go) owns the groups and offsets of one
//     __consumer_offsets partition. Every input (a request, a timer expiry, a replayed
//     record, a transaction marker, the outcome of a write) is a method call with the
//     current time in milliseconds; every method fills an *output with the responses it
//     completes (keyed by the waiter token the edge passed in) and the writes it wants
//     made durable, each with a callback that the edge runs, under the shard lock, once
//     the write is durable or has failed. Timers are deadlines inside the shard; expire
//     fires the due ones. The shard never blocks, sleeps, spawns goroutines or does I/O.
//   - Coordinator (coordinator.go) is the edge: one mutex per shard, one writer goroutine
//     per partition that appends queued writes in order (merging consecutive plain writes
//     into one batch so many commits share one fsync), one ticker goroutine that drives
//     every shard's deadlines and the offsets-retention cleanup, and the map from waiter
//     tokens to the channels that blocked JoinGroup/SyncGroup wait funcs read.
//
// # Durability and ordering
//
// Group metadata changes are applied in memory first and written after, as Kafka does;
// a response that depends on a write (a SyncGroup assignment, a committed offset) is sent
// only after the write is durable. Committed offsets are applied to the offset store only
// once their write is durable, so an OffsetFetch never returns an offset a crash could
// take back. Writes of one partition reach the log in the order the shard produced them.
//
// # Persistence format
//
// Records use Kafka's __consumer_offsets format: keys are OffsetCommitKey (key version 1)
// and GroupMetadataKey (key version 2); values are OffsetCommitValue v4 (v1 when the
// client set a retention time, v2-v4 requests) and GroupMetadataValue v3; a nil value is a
// tombstone. Consumer groups use Kafka's ConsumerGroup* records (types 3, 5-8; their
// encodings are generated in package wire); the heartbeat path applies every record it
// emits through the same replay function the load path runs, so memory is what a
// restart rebuilds. TxnOffsetCommit writes its records in a transactional batch; a COMMIT marker
// makes them visible, an ABORT marker drops them, both live and on replay.
package group
