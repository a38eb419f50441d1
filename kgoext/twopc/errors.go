package twopc

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The producer's errors. Kafka's own errors (kerr.ProducerFenced, kerr.TransactionAbortable,
// ...) are wrapped inside them, so errors.Is(err, ErrTransactionAbortable) and
// errors.Is(err, kerr.ProducerFenced) both work. Errors that wrap neither
// ErrTransactionAbortable nor ErrProducerFatal (a context ending, a connection failing)
// leave the transaction as it was: the call may be repeated.
var (
	// ErrProducerFatal means the producer can no longer write transactionally: a newer
	// instance with the same transactional id fenced it (kerr.ProducerFenced, also
	// reported for INVALID_PRODUCER_EPOCH), it is not authorized, or the coordinator
	// reported a state it cannot recover from. Make a new Producer.
	ErrProducerFatal = errors.New("twopc: transactional producer is unusable")
	// ErrTransactionAbortable means the current transaction failed (a record was not
	// written, a partition could not be added, share acknowledgements could not be
	// staged, the coordinator answered TRANSACTION_ABORTABLE): it cannot commit. Call
	// AbortTransaction; the producer stays usable.
	ErrTransactionAbortable = errors.New("twopc: transaction must be aborted")
	// ErrNoTransaction is returned by Produce, Flush, SendShareAcksToTransaction,
	// PrepareTransaction, CommitTransaction and AbortTransaction outside a transaction.
	ErrNoTransaction = errors.New("twopc: no transaction in progress")
	// ErrTransactionInProgress is returned by BeginTransaction while a transaction is
	// open.
	ErrTransactionInProgress = errors.New("twopc: transaction already in progress")
	// ErrTransactionPrepared is returned by BeginTransaction, Produce,
	// SendShareAcksToTransaction and PrepareTransaction while a transaction is prepared:
	// only CommitTransaction, AbortTransaction or CompleteTransaction may follow (Java:
	// IllegalStateException).
	ErrTransactionPrepared = errors.New("twopc: transaction is prepared: only commit, abort or complete it")
	// ErrNotPrepared is returned by CompleteTransaction when no transaction is prepared
	// (Java: InvalidTxnStateException).
	ErrNotPrepared = errors.New("twopc: no prepared transaction")
	// ErrTransactionAborted is what the promises of records still buffered (never sent)
	// get when AbortTransaction drops them.
	ErrTransactionAborted = errors.New("twopc: record dropped by AbortTransaction")
)

// isFatal reports errors after which no transaction can succeed with this producer id
// (Java's fatalError cases).
func isFatal(err error) bool {
	return errors.Is(err, ErrProducerFatal) ||
		errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) ||
		errors.Is(err, kerr.InvalidTxnState) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// fatalErr wraps err in ErrProducerFatal. INVALID_PRODUCER_EPOCH is reported as
// PRODUCER_FENCED as well, as the Java client does: partition leaders and older
// coordinators use it for a fenced producer.
func fatalErr(err error) error {
	if errors.Is(err, ErrProducerFatal) {
		return err
	}
	if errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.ProducerFenced) {
		return fmt.Errorf("%w: %w: %w", ErrProducerFatal, kerr.ProducerFenced, err)
	}
	return fmt.Errorf("%w: %w", ErrProducerFatal, err)
}

// isKafkaErr reports whether err carries a broker's answer (a kerr error) or one of our
// classified errors, as opposed to a transport or context error.
func isKafkaErr(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) || errors.Is(err, ErrProducerFatal) || errors.Is(err, ErrTransactionAbortable)
}
