package client

import (
	"context"
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
)

// errHeldBack completes a produce request that was not written because an earlier batch
// of one of its partitions failed and must be resent first (see Producer.heldBack).
var errHeldBack = errors.New("client: not sent: an earlier batch of the partition is being resent")

// verdict is what the producer does with one batch after a produce attempt.
type verdict struct {
	outcome     outcome
	refreshMeta bool // leadership may have moved: refresh metadata before resending
	bumpEpoch   bool // sequences are out of step with the broker: bump the epoch first
}

type outcome uint8

const (
	batchDone  outcome = iota // written: complete the records
	batchRetry                // resend the same batch, same sequence unless the epoch bumps
	batchFail                 // complete the records with the error
)

// attempt describes the batch whose attempt is being judged.
type attempt struct {
	idempotent bool
	// sentWith is the producer id and epoch the batch carried; current is the id now.
	sentWith, current producerID
	// earlierFailed is true when an earlier batch of the same partition failed in this
	// round and will be resent: later batches then fail with OUT_OF_ORDER_SEQUENCE_NUMBER
	// by construction, which is not a real gap.
	earlierFailed bool
}

// judge decides what to do after a batch's produce attempt ended with err (nil: success,
// a kerr error from the partition response, or a transport error). It is pure so the
// table of cases is unit-tested directly.
//
// Why these choices, per error:
//   - DUPLICATE_SEQUENCE_NUMBER: the broker already has this batch (an earlier attempt
//     was written but its response lost). That is success; the offset is unknown.
//   - OUT_OF_ORDER_SEQUENCE_NUMBER after an earlier batch of the partition failed: expected,
//     resend in order. Otherwise it is a real gap (the broker lost a batch, or one of ours
//     failed for good): as the Java idempotent producer does, bump the epoch so sequences
//     restart at 0, and resend.
//   - UNKNOWN_PRODUCER_ID: the broker lost our producer state (retention removed it); bump
//     and resend.
//   - INVALID_PRODUCER_EPOCH / PRODUCER_FENCED for a batch sent with an older epoch than
//     ours: it raced with our own bump; resend with the current epoch. With the current
//     epoch it is a real fence: fail (transactions make this fatal).
//   - Leadership and topic errors: refresh metadata and resend.
//   - Transport errors and request timeouts: the batch may or may not be written. Resend
//     the same sequence; the broker's duplicate detection makes that safe when idempotent.
//   - Other retriable kerr errors: resend. Anything else fails the batch.
func judge(err error, a attempt) verdict {
	switch {
	case err == nil, errors.Is(err, kerr.DuplicateSequenceNumber):
		return verdict{outcome: batchDone}
	case errors.Is(err, errHeldBack):
		return verdict{outcome: batchRetry} // never written: resend in order
	case errors.Is(err, kerr.OutOfOrderSequenceNumber):
		if !a.idempotent {
			return verdict{outcome: batchFail}
		}
		if a.earlierFailed || a.sentWith != a.current {
			return verdict{outcome: batchRetry}
		}
		return verdict{outcome: batchRetry, bumpEpoch: true}
	case errors.Is(err, kerr.UnknownProducerID):
		if !a.idempotent {
			return verdict{outcome: batchFail}
		}
		if a.sentWith != a.current {
			return verdict{outcome: batchRetry}
		}
		return verdict{outcome: batchRetry, bumpEpoch: true}
	case errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.ProducerFenced):
		if a.idempotent && a.sentWith != a.current {
			return verdict{outcome: batchRetry}
		}
		return verdict{outcome: batchFail}
	case errors.Is(err, kerr.NotLeaderForPartition),
		errors.Is(err, kerr.UnknownTopicOrPartition),
		errors.Is(err, kerr.LeaderNotAvailable),
		errors.Is(err, kerr.FencedLeaderEpoch),
		errors.Is(err, kerr.UnknownLeaderEpoch),
		errors.Is(err, kerr.KafkaStorageError),
		errors.Is(err, kerr.NotEnoughReplicas),
		errors.Is(err, kerr.NotEnoughReplicasAfterAppend):
		return verdict{outcome: batchRetry, refreshMeta: true}
	case isTransportError(err):
		return verdict{outcome: batchRetry, refreshMeta: true}
	case kerr.IsRetriable(err):
		return verdict{outcome: batchRetry}
	}
	return verdict{outcome: batchFail}
}

// isTransportError reports errors where the request may or may not have reached the
// broker: a dropped connection, a dial failure, a request timeout.
func isTransportError(err error) bool {
	var ne net.Error
	return errors.Is(err, ErrConnClosed) || errors.Is(err, errUnknownBroker) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne)
}
