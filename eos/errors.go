package eos

import (
	"errors"
	"fmt"

	"github.com/exactq/exactq/client"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Errors of the eos package. Each is a sentinel for errors.Is; the client and Kafka errors
// behind it stay reachable the same way (errors.Is(err, kerr.FencedMemberEpoch)).
var (
	// ErrInvalidConfig is returned by NewRunner and NewCheckpointer for a configuration
	// they cannot run with; the message names the field.
	ErrInvalidConfig = errors.New("eos: invalid configuration")

	// ErrProcess: the user's ProcessFunc returned an error. The transaction was aborted
	// and its inputs will be delivered again.
	ErrProcess = errors.New("eos: process function failed")
	// ErrProduce: an output record could not be written. The transaction was aborted.
	ErrProduce = errors.New("eos: output not written")
	// ErrStage: the share acknowledgements could not be staged in the transaction
	// (member fenced, lock expired, ...). The transaction was aborted.
	ErrStage = errors.New("eos: acknowledgements not staged")
	// ErrCommit: the transaction could not be committed, or its outcome could not be
	// learnt. Outputs and acknowledgements still share one fate: either both are visible
	// or neither is.
	ErrCommit = errors.New("eos: transaction not committed")
	// ErrFenced: the transactional producer was fenced (a newer instance with the same
	// transactional id, or the coordinator aborted the transaction on timeout). The
	// runner replaces the producer and goes on; a Checkpointer must be recovered.
	ErrFenced = errors.New("eos: transactional producer fenced")

	// ErrPermanent: an error no retry can fix (the broker does not serve transactional
	// share acknowledgements, authorization). Runner.Run stops with it.
	ErrPermanent = errors.New("eos: permanent failure")

	// ErrPhase: a Checkpointer method was called out of order (Poll while a checkpoint is
	// prepared, SnapshotState before PrepareCommit, ...). Nothing was changed.
	ErrPhase = errors.New("eos: checkpoint lifecycle step out of order")
	// ErrSnapshot: snapshot bytes that cannot be decoded, or that belong to another
	// transactional id.
	ErrSnapshot = errors.New("eos: bad snapshot")
	// ErrClosed: the Runner or Checkpointer was closed.
	ErrClosed = errors.New("eos: closed")
)

// AbortError reports one transaction the runner aborted, or whose commit outcome it could
// not learn, and why. Its inputs are delivered again (except those at the group's delivery
// limit, which the broker archives). Err wraps one of ErrProcess, ErrProduce, ErrStage or
// ErrCommit and the cause.
type AbortError struct {
	Worker          int
	TransactionalID string
	// Inputs is the number of input records the transaction held.
	Inputs int
	Err    error
}

func (e *AbortError) Error() string {
	return fmt.Sprintf("eos: worker %d (%s) aborted a transaction of %d inputs: %v", e.Worker, e.TransactionalID, e.Inputs, e.Err)
}

func (e *AbortError) Unwrap() error { return e.Err }

// stepErr wraps cause in the sentinel of the step that failed, adding ErrFenced when the
// producer was fenced so callers need not know the client's errors.
func stepErr(step, cause error) error {
	if errors.Is(cause, client.ErrProducerFatal) && !errors.Is(cause, ErrFenced) {
		return fmt.Errorf("%w: %w: %w", step, ErrFenced, cause)
	}
	return fmt.Errorf("%w: %w", step, cause)
}

// isPermanent reports errors that the same call would meet again however often it is
// retried: the broker lacks the API, or the principal lacks a permission.
func isPermanent(err error) bool {
	return errors.Is(err, kerr.UnsupportedVersion) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, client.ErrNotTransactional)
}
