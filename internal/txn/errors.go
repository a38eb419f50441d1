package txn

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka error codes the coordinator answers with.
var (
	codeNone                     int16 = 0
	codeUnknownServerError             = kerr.UnknownServerError.Code
	codeInvalidRequest                 = kerr.InvalidRequest.Code
	codeInvalidTxnTimeout              = kerr.InvalidTransactionTimeout.Code
	codeConcurrentTxns                 = kerr.ConcurrentTransactions.Code
	codeProducerFenced                 = kerr.ProducerFenced.Code
	codeInvalidProducerEpoch           = kerr.InvalidProducerEpoch.Code
	codeInvalidPIDMapping              = kerr.InvalidProducerIDMapping.Code
	codeInvalidTxnState                = kerr.InvalidTxnState.Code
	codeNotCoordinator                 = kerr.NotCoordinator.Code
	codeCoordinatorNotAvailable        = kerr.CoordinatorNotAvailable.Code
	codeTransactionAbortable           = kerr.TransactionAbortable.Code
	codeTransactionalIDNotFound        = kerr.TransactionalIDNotFound.Code
	codeUnknownTopicOrPartition        = kerr.UnknownTopicOrPartition.Code
	codeOperationNotAttempted          = kerr.OperationNotAttempted.Code
	codeNotEnoughReplicas              = kerr.NotEnoughReplicas.Code
	codeInvalidRegularExpression       = kerr.InvalidRegularExpression.Code
	codeTxnIDAuthorizationFailed       = kerr.TransactionalIDAuthorizationFailed.Code
)

// internalError is a broken invariant of the state machine: Kafka throws
// IllegalStateException for these. Handlers answer UNKNOWN_SERVER_ERROR and log it.
type internalError struct{ msg string }

func (e *internalError) Error() string { return "txn: internal: " + e.msg }

func errInternal(format string, args ...any) error {
	return &internalError{msg: fmt.Sprintf(format, args...)}
}

// fencedForVersion turns PRODUCER_FENCED into INVALID_PRODUCER_EPOCH for request versions
// that predate the PRODUCER_FENCED code (KafkaApis does the same per API).
func fencedForVersion(code int16, version, firstFencedVersion int16) int16 {
	if code == codeProducerFenced && version < firstFencedVersion {
		return codeInvalidProducerEpoch
	}
	return code
}

// LegacyProduceError maps a VerifyOrAdd result for produce requests older than v11, which
// do not know TRANSACTION_ABORTABLE: Kafka answers them INVALID_TXN_STATE instead
// (AddPartitionsToTxnManager, DEFAULT_ERROR). TxnOffsetCommit requests older than v4 need
// the same mapping.
func LegacyProduceError(code int16, produceVersion int16) int16 {
	if code == codeTransactionAbortable && produceVersion <= 10 {
		return codeInvalidTxnState
	}
	return code
}

var (
	kerrCoordinatorLoadInProgress = kerr.CoordinatorLoadInProgress.Code
	kerrNetworkException          = kerr.NetworkException.Code
)
