// Package sharegroup is exactq's share-group coordinator for membership and assignment
// (KIP-932 as in Apache Kafka 4.4: GroupMetadataManager.shareGroupHeartbeat,
// ShareGroup, ShareGroupMember, ShareGroupAssignmentBuilder and the SimpleAssignor).
//
// # Shape
//
// The pure core (shard in core.go, replay.go, assignor.go) owns the share groups of one
// __consumer_offsets partition. An input (a heartbeat, a session expiry, a finished
// share-state initialization, a group deletion) is a method call with the current time
// in milliseconds that returns the records to persist and the soft effects to apply
// after; it never mutates group state itself. The only writer of group state is replay,
// which the edge runs on the records once they are durable and which the load path runs
// on the log at start-up, so the live state is the state a restart rebuilds.
//
// Coordinator (coordinator.go) is the edge: a mutex per partition held while a change
// is appended to the log, one ticker goroutine for session expiry (members' deadlines
// live in the core, no goroutine or timer per member), the share-state initialization
// calls and the member-removed callbacks.
//
// # Groups and epochs
//
// A group is Empty (no members) or Stable; Dead is never observed. A join (member epoch
// 0) with a subscription creates the group; the group epoch is bumped when a member's
// subscription changes, when the subscribed topics' metadata changes (created, deleted,
// more partitions), when share partitions finish initializing, and when a member leaves
// or is fenced. The target assignment is recomputed by the simple assignor when the group
// epoch is ahead of the assignment epoch, at most once per
// group.share.assignment.interval.ms. A member reconciles directly to its target (share
// groups have no revocation phase), filtered to its subscribed topics, and takes the
// assignment epoch as its member epoch; a heartbeat may carry the current epoch or the
// previous one (the response with the new one may have been lost), anything else is
// FENCED_MEMBER_EPOCH. Epoch 0 always rejoins, reusing the member.
//
// Partitions are assigned only after their share state is initialized
// (Config.InitializeShareState, kip-932 §3.3): a join records the partitions as
// initializing, initializes them, records them initialized, and the member's next
// heartbeat brings the new assignment, as in Kafka.
//
// # Offsets administration
//
// AlterShareGroupOffsets and DeleteShareGroupOffsets (offsets.go) work on empty share
// groups only. Alter re-initializes the given share partitions at new start offsets
// (Config.ResetShareState) and records them as initialized, creating the group if needed;
// delete moves the topics to the deleting set, deletes their share state
// (Config.DeleteShareState) and then forgets them, so the next assignment initializes them
// again. Both hold the group's partition lock from the emptiness check to the last record.
// DeleteGroup also deletes what an unfinished offsets deletion left in the deleting set.
//
// # Persistence format
//
// Records use Kafka's __consumer_offsets formats for share groups: keys are the
// coordinator record type (10 to 15) followed by the version-0 key struct, values are
// version 0 flexible structs (ShareGroupMemberMetadata, ShareGroupMetadata,
// ShareGroupTargetAssignmentMetadata with the KIP-1263 timestamp tag,
// ShareGroupTargetAssignmentMember, ShareGroupCurrentMemberAssignment,
// ShareGroupStatePartitionMetadata); a nil value is a tombstone. Records of other types
// in the shared partitions are skipped on load, and the classic coordinator skips ours.
package sharegroup
