package sharepartition

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is the delivery state of one record of a share partition. The ids are
// the bytes Kafka persists (RecordState, KIP-932) plus TX_PENDING (5, KIP-1289).
type State int8

const (
	Available    State = 0
	Acquired     State = 1 // never persisted
	Acknowledged State = 2 // terminal
	Archiving    State = 3 // reserved for the KIP-1191 DLQ; exactq never enters it
	Archived     State = 4 // terminal
	TxPending    State = 5 // acknowledgement staged in an open producer transaction
)

// StateForID returns the state with the given persisted id; ids 0..5 are valid.
func StateForID(id int8) (State, error) {
	if id < 0 || id > 5 {
		return 0, fmt.Errorf("unknown record state id %d", id)
	}
	return State(id), nil
}

func (s State) String() string {
	switch s {
	case Available:
		return "AVAILABLE"
	case Acquired:
		return "ACQUIRED"
	case Acknowledged:
		return "ACKNOWLEDGED"
	case Archiving:
		return "ARCHIVING"
	case Archived:
		return "ARCHIVED"
	case TxPending:
		return "TX_PENDING"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// Terminal reports whether s is ACKNOWLEDGED or ARCHIVED: the start offset may
// move past such records and they are never delivered again.
func (s State) Terminal() bool { return s == Acknowledged || s == Archived }

// CanTransition is the record-state transition table: Kafka 4.4's
// RecordState.validateTransition, plus what Kafka does around it, plus KIP-1289's
// TX_PENDING (kip-1289.md section 2.2). Every state change of a SharePartition goes
// through setState, which checks it. A state never transitions to itself;
// ACKNOWLEDGED and ARCHIVED are final; ACQUIRED goes to AVAILABLE, ACKNOWLEDGED,
// ARCHIVING, ARCHIVED or TX_PENDING; AVAILABLE goes to ACQUIRED, and also straight to
// ARCHIVED, which validateTransition alone refuses but Kafka does through
// InFlightState.archive(): when the log start offset passes AVAILABLE records
// (archiveAvailableRecordsOnLsoMovement) and when a read skips them because compaction
// removed them (maybeArchiveStaleBatches); exactq also archives an AVAILABLE record
// whose delivery count already reached a limit lowered since, instead of delivering it.
// ARCHIVING (KIP-1191, never entered by exactq) only goes on to ARCHIVED. TX_PENDING is
// entered only from ACQUIRED and goes to AVAILABLE, ACKNOWLEDGED, ARCHIVING or ARCHIVED,
// never back to ACQUIRED: the one way back, the undo of a staging whose durable write
// was refused, is a revert (CanRevert), not a transition.
func CanTransition(from, to State) bool {
	if from == to {
		return false
	}
	switch from {
	case Available:
		return to == Acquired || to == Archived
	case Acquired:
		return to == Available || to == Acknowledged || to == Archiving || to == Archived || to == TxPending
	case Archiving:
		return to == Archived
	case TxPending:
		return to == Available || to == Acknowledged || to == Archiving || to == Archived
	}
	return false
}

// CanRevert reports whether a step may put a record back from state from to state to
// because what it did never became durable: only TX_PENDING back to ACQUIRED, the undo
// of a staging whose write the store refused (UnstageTxnAcks, decision D8). Kafka rolls
// a failed transition back the same way (InFlightState.completeStateTransition(false)).
func CanRevert(from, to State) bool { return from == TxPending && to == Acquired }

// AckType is an acknowledgement type as ShareFetch, ShareAcknowledge and
// TxnShareAcknowledge carry it.
type AckType int8

const (
	AckGap     AckType = 0 // an acquired offset holding no data record: archived
	AckAccept  AckType = 1
	AckRelease AckType = 2
	AckReject  AckType = 3
	AckRenew   AckType = 4 // KIP-1222: re-arm the lock, no state change
	ackNone    AckType = -1
)

func (t AckType) String() string {
	switch t {
	case AckGap:
		return "GAP"
	case AckAccept:
		return "ACCEPT"
	case AckRelease:
		return "RELEASE"
	case AckReject:
		return "REJECT"
	case AckRenew:
		return "RENEW"
	case ackNone:
		return "NONE"
	}
	return fmt.Sprintf("AckType(%d)", int8(t))
}

// commitTarget is the state a staged acknowledgement reaches on COMMIT
// (kip-1289.md 2.4; no DLQ, so REJECT goes straight to ARCHIVED).
func commitTarget(t AckType) State {
	if t == AckAccept {
		return Acknowledged
	}
	return Archived
}

// abortTarget is the state a staged acknowledgement reaches on ABORT, as
// decided at staging (decision D5).
func abortTarget(archive bool) State {
	if archive {
		return Archived
	}
	return Available
}

// StateBatch is one persisted range of records: the shape of the StateBatches
// entries of Kafka's ShareSnapshot/ShareUpdate values and WriteShareGroupState
// (kip-932.md 4.2), extended with the KIP-1289 staging fields (kip-1289.md 4.5),
// which are -1 unless DeliveryState is TX_PENDING.
type StateBatch struct {
	FirstOffset         int64
	LastOffset          int64
	DeliveryState       State
	DeliveryCount       int16
	StagedProducerID    int64
	StagedProducerEpoch int16
	StagedAckType       AckType
	StagedDeliveryState State // the state a COMMIT marker moves the range to; -1 when not staged
	// StagedAbortState is the state an ABORT marker moves the range to: AVAILABLE, or
	// ARCHIVED when the delivery count had reached the delivery limit at staging
	// (decision D5); -1 when not staged. It is decided once, at staging, so memory, the
	// store and a restored partition resolve an abort the same way even if the limit
	// changes meanwhile. Restore treats any other value on a TX_PENDING batch as "not
	// recorded" and decides with the limit current then.
	StagedAbortState State
}

// Error is a typed share-partition error. Code is the Kafka error it maps to
// one-to-one; errors.Is(err, kerr.InvalidRecordState) works.
type Error struct {
	Code *kerr.Error
	Msg  string
}

func (e *Error) Error() string { return e.Code.Message + ": " + e.Msg }
func (e *Error) Unwrap() error { return e.Code }

func errInvalidRecordState(format string, args ...any) error {
	return &Error{Code: kerr.InvalidRecordState, Msg: fmt.Sprintf(format, args...)}
}

func errInvalidRequest(format string, args ...any) error {
	return &Error{Code: kerr.InvalidRequest, Msg: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the Kafka error code for err (0 for nil, -1 for errors
// that are not Kafka errors).
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return -1
}
