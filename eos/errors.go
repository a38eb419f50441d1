package eos

import (
	"errors"
	"fmt"

	"strings"

	"github.com/exactq/exactq/kgoext"
	"github.com/exactq/exactq/kgoext/twopc"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Errors of the eos package. Each is a sentinel for errors.Is; the kgo, kgoext and Kafka
// errors behind it stay reachable the same way (errors.Is(err, kerr.FencedMemberEpoch),
// errors.Is(err, kgoext.ErrCommitFailed)).
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
	// ErrCommitUnknown (with ErrCommit): the commit's answer was lost and resending it
	// with the same producer id and epoch brought no definite answer within the
	// transaction timeout, or another instance fenced this one first. The transaction may
	// have committed (its outputs visible, its inputs acknowledged and never delivered
	// again) or aborted (neither; its inputs come back): never one without the other.
	// An answer that is merely late is resent until it is definite: a commit is reported
	// committed or aborted only when the coordinator said so.
	ErrCommitUnknown = errors.New("eos: the commit's outcome is unknown")
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
// limit, which the broker archives), unless Err matches ErrCommitUnknown: then they may
// have committed. Err wraps one of ErrProcess, ErrProduce, ErrStage or ErrCommit and the
// cause.
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

// errDoomed is what staging returns in a transaction that a failed output already
// doomed: nothing is sent, the transaction can only abort.
var errDoomed = errors.New("eos: an output of the transaction failed")

// stepErr wraps cause in the sentinel of the step that failed, adding ErrFenced when the
// producer was fenced so callers need not know kgo's errors.
func stepErr(step, cause error) error {
	if isFatal(cause) && !errors.Is(cause, ErrFenced) {
		return fmt.Errorf("%w: %w: %w", step, ErrFenced, cause)
	}
	return fmt.Errorf("%w: %w", step, cause)
}

// The producers' errors, sorted by what the member does next. kgo and kgoext report
// Kafka's errors as kerr values (wrapped); twopc wraps them in its own two sentinels.
//
//   - fatal: the producer can never write transactionally again and must be replaced
//     (Runner) or recovered (Checkpointer): a newer instance fenced it (PRODUCER_FENCED,
//     or INVALID_PRODUCER_EPOCH, which produce requests answer for the same thing), its
//     producer id is no longer its own (INVALID_PRODUCER_ID_MAPPING under transactions
//     v2, where kgo cannot recover it), or twopc.ErrProducerFatal.
//   - abortable: the transaction cannot commit but the producer goes on once it is
//     aborted: TRANSACTION_ABORTABLE (KIP-890), kgoext.ErrCommitFailed (acknowledgements
//     not staged), kgoext.ErrTransactionAborted (a commit kgoext turned into an abort),
//     twopc.ErrTransactionAbortable.
//   - permanent: isPermanent.
//   - resumable: a transport error, a context ending, or a Kafka error that
//     kerr.IsRetriable (a coordinator that stayed busy or moved past kgo's retries): the
//     same call may succeed when repeated. Any other Kafka error is a definite answer that
//     a repeat would meet again (INVALID_TXN_STATE, say): the producer is replaced.
func isFatal(err error) bool {
	if errors.Is(err, twopc.ErrTransactionAbortable) && !errors.Is(err, twopc.ErrProducerFatal) {
		return false // twopc judged the Kafka error inside: its producer goes on after an abort
	}
	return errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) ||
		errors.Is(err, twopc.ErrProducerFatal)
}

func isAbortable(err error) bool {
	return errors.Is(err, kerr.TransactionAbortable) ||
		errors.Is(err, kgoext.ErrCommitFailed) ||
		errors.Is(err, kgoext.ErrTransactionAborted) ||
		errors.Is(err, twopc.ErrTransactionAbortable)
}

// isResumable reports an error of a transaction step that was not a definite answer: the
// step may be repeated.
func isResumable(err error) bool {
	if isAbortable(err) || isFatal(err) || isPermanent(err) {
		return false
	}
	if _, ok := errors.AsType[*kerr.Error](err); ok {
		// kgo itself resends on CONCURRENT_TRANSACTIONS (Kafka does not flag it
		// retriable), and takes UNKNOWN_SERVER_ERROR as an outcome it could not learn.
		return kerr.IsRetriable(err) || errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.UnknownServerError)
	}
	return true
}

// isPermanent reports errors that the same call would meet again however often it is
// retried: the broker lacks the API, the principal lacks a permission, or the kgo client
// cannot do what the toolkit asks of it.
func isPermanent(err error) bool {
	return errors.Is(err, kerr.UnsupportedVersion) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kgoext.ErrNoTransactionalHooks) ||
		isBrokerTooOld(err)
}

// kgoBrokerTooOld is the text of the error kgo returns, without a request, when the
// broker's ApiVersions left the request's key out (a broker without KIP-1289 or KIP-932).
// kgo does not export the value, so it is matched by its text.
const kgoBrokerTooOld = "broker is too old"

func isBrokerTooOld(err error) bool {
	return err != nil && strings.Contains(err.Error(), kgoBrokerTooOld)
}
