package sharestate

import (
	"encoding/base64"
	"strconv"

	"github.com/exactq/exactq/internal/coordlog"
)

// Delivery states as persisted (RecordState ids; kip-932.md §2.2, kip-1289.md §2.1).
// ACQUIRED (1) is never persisted.
const (
	StateAvailable    int8 = 0
	StateAcknowledged int8 = 2
	StateArchiving    int8 = 3 // KIP-1191 (DLQ), Kafka 4.4
	StateArchived     int8 = 4
	StateTxPending    int8 = 5 // KIP-1289: acknowledgement staged in an open transaction
)

// Acknowledgement types that may be staged in a transaction (exactq decision D3).
const (
	AckGap    int8 = 0
	AckAccept int8 = 1
	AckReject int8 = 3
)

// Defaults and sentinels of Kafka's PartitionFactory.
const (
	UninitializedStartOffset           int64 = -1
	UninitializedDeliveryCompleteCount int64 = -1
)

// Key names one share-partition's state: a share group and one partition of a topic.
type Key struct {
	GroupID   string
	TopicID   [16]byte
	Partition int32
}

// String is Kafka's SharePartitionKey.asCoordinatorKey: "group:topicId:partition", the
// topic id in Kafka's Uuid.toString form (URL-safe base64 of the 16 bytes, no padding).
func (k Key) String() string {
	return k.GroupID + ":" + base64.RawURLEncoding.EncodeToString(k.TopicID[:]) + ":" + strconv.FormatInt(int64(k.Partition), 10)
}

// PartitionFor returns the __share_group_state partition that owns k out of n:
// Utils.abs(asCoordinatorKey().hashCode()) % n, as ShareCoordinatorService.partitionFor.
// TxnShareAcknowledge uses the same mapping to register state partitions in a transaction
// (kip-1289.md §4.4).
func PartitionFor(k Key, n int32) int32 {
	return coordlog.PartitionFor(k.String(), n)
}

// StateBatch is a range of offsets in one delivery state.
//
// The Txn* fields are the KIP-1289 staging of a TX_PENDING batch; they are meaningful only
// when DeliveryState is StateTxPending, and the store zeroes them on every other batch.
type StateBatch struct {
	FirstOffset, LastOffset int64 // inclusive
	DeliveryState           int8
	DeliveryCount           int16

	// TxnProducerID and TxnProducerEpoch identify the transaction that staged the batch;
	// a marker of that producer id with an epoch >= TxnProducerEpoch resolves it (D6).
	TxnProducerID    int64
	TxnProducerEpoch int16
	// TxnAckType is the staged acknowledgement: AckAccept, AckReject or AckGap.
	TxnAckType int8
	// TxnCommitState is the state a commit marker gives the batch: StateAcknowledged for
	// an accept, StateArchived (or StateArchiving when the group has a DLQ) for a reject or
	// a gap. Zero in a Write means "derive from TxnAckType without a DLQ"; the stored batch
	// always carries the explicit state.
	TxnCommitState int8
	// TxnAbortState is the state an abort marker gives the batch: StateAvailable, or
	// StateArchived when the delivery count had reached the group's delivery limit when the
	// acknowledgement was staged (exactq decision D5: an abort counts like a RELEASE, so a
	// poison record cannot loop through aborted transactions). The share-partition leader
	// decides it at staging, when it knows the limit; deciding it here would make replay
	// depend on a config that may have changed since.
	TxnAbortState int8
}

func (b *StateBatch) clearStaged() {
	b.TxnProducerID, b.TxnProducerEpoch, b.TxnAckType, b.TxnCommitState, b.TxnAbortState = 0, 0, 0, 0, 0
}

// resolvedState is the state a marker gives a TX_PENDING batch: the state recorded at
// staging when the transition table lets a TX_PENDING record reach it on that outcome
// (commit: ACKNOWLEDGED for an accept, ARCHIVED or ARCHIVING for a reject or a gap;
// abort: AVAILABLE or ARCHIVED), else the outcome's default: the commit state of the ack
// type, or AVAILABLE on abort. The recorded state can be missing (-1) in a batch written
// before exactq recorded it, or by another writer; taking it as is would leave the
// batch in no state at all. An abort defaulting to AVAILABLE loses nothing: the leader
// archives an AVAILABLE record already at the delivery limit when it next acquires it.
func (b *StateBatch) resolvedState(commit bool) int8 {
	accept := b.TxnAckType == AckAccept
	if commit {
		switch s := b.TxnCommitState; {
		case accept && s == StateAcknowledged, !accept && (s == StateArchived || s == StateArchiving):
			return s
		case accept:
			return StateAcknowledged
		}
		return StateArchived
	}
	if b.TxnAbortState == StateArchived {
		return StateArchived
	}
	return StateAvailable
}

// resolvedBy reports whether the batch is staged by pid with an epoch a marker of epoch
// markerEpoch resolves.
func (b *StateBatch) resolvedBy(pid int64, markerEpoch int16) bool {
	return b.DeliveryState == StateTxPending && b.TxnProducerID == pid && b.TxnProducerEpoch <= markerEpoch
}

// State is the persisted state of one share-partition.
type State struct {
	StateEpoch  int32
	LeaderEpoch int32
	// StartOffset is the share-partition start offset, -1 until the leader applied
	// share.auto.offset.reset.
	StartOffset int64
	// DeliveryCompleteCount is the number of terminal offsets >= StartOffset (KIP-1226),
	// -1 when unknown.
	DeliveryCompleteCount int64
	// Batches are sorted, non-overlapping, at or above StartOffset, and adjacent batches
	// with the same state, count and staging are coalesced.
	Batches []StateBatch
}

// Summary is what ReadShareGroupStateSummary answers.
type Summary struct {
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int64
}
