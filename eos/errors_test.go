package eos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/exactq/exactq/kgoext"
	"github.com/exactq/exactq/kgoext/twopc"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The errors kgo, kgoext and twopc return are sorted into fatal (replace or recover the
// producer), abortable (abort, go on), permanent (stop) and resumable (repeat), wrapped
// the way they come: kgo wraps kerr values with fmt.Errorf, kgoext wraps them in
// ErrCommitFailed, twopc in its two sentinels.
func TestErrorClasses(t *testing.T) {
	wrap := func(outer, inner error) error { return fmt.Errorf("%w: %w", outer, inner) }
	for _, c := range []struct {
		name                                   string
		err                                    error
		fatal, abortable, permanent, resumable bool
	}{
		{name: "PRODUCER_FENCED from kgo's BeginTransaction", fatal: true,
			err: fmt.Errorf("producer ID has a fatal, unrecoverable error, err: %w", kerr.ProducerFenced)},
		{name: "INVALID_PRODUCER_EPOCH", err: kerr.InvalidProducerEpoch, fatal: true},
		{name: "INVALID_PRODUCER_ID_MAPPING", err: kerr.InvalidProducerIDMapping, fatal: true},
		{name: "twopc fenced", err: wrap(twopc.ErrProducerFatal, kerr.ProducerFenced), fatal: true},
		{name: "twopc without two-phase commit on the broker", fatal: true, permanent: true,
			err: wrap(twopc.ErrProducerFatal, kerr.TransactionalIDAuthorizationFailed)},
		{name: "TRANSACTION_ABORTABLE", err: wrap(errors.New("kgo"), kerr.TransactionAbortable), abortable: true},
		{name: "acks not staged, member fenced", err: wrap(kgoext.ErrCommitFailed, kerr.FencedMemberEpoch), abortable: true},
		{name: "commit turned into an abort", err: wrap(kgoext.ErrTransactionAborted, errors.New("1 of the transaction's records failed")), abortable: true},
		{name: "twopc abortable", err: wrap(twopc.ErrTransactionAbortable, kerr.MessageTooLarge), abortable: true},
		{name: "twopc abortable over an epoch error", err: wrap(twopc.ErrTransactionAbortable, kerr.InvalidProducerEpoch), abortable: true},
		{name: "UNSUPPORTED_VERSION", err: kerr.UnsupportedVersion, permanent: true},
		{name: "kgo: broker lacks the API", err: errors.New("broker is too old; the broker has already indicated it will not know how to handle the request"), permanent: true},
		{name: "GROUP_AUTHORIZATION_FAILED", err: kerr.GroupAuthorizationFailed, permanent: true},
		{name: "TOPIC_AUTHORIZATION_FAILED", err: kerr.TopicAuthorizationFailed, permanent: true},
		{name: "client without kgoext's hooks", err: kgoext.ErrNoTransactionalHooks, permanent: true},
		{name: "COORDINATOR_NOT_AVAILABLE past kgo's retries", err: kerr.CoordinatorNotAvailable, resumable: true},
		{name: "CONCURRENT_TRANSACTIONS", err: kerr.ConcurrentTransactions, resumable: true},
		{name: "UNKNOWN_SERVER_ERROR", err: kerr.UnknownServerError, resumable: true},
		{name: "transport", err: fmt.Errorf("unable to dial: %w", io.ErrUnexpectedEOF), resumable: true},
		{name: "deadline", err: context.DeadlineExceeded, resumable: true},
		{name: "INVALID_TXN_STATE: a definite answer", err: kerr.InvalidTxnState},
		{name: "commit outcome unknown, fenced meanwhile", fatal: true,
			err: wrap(ErrCommitUnknown, wrap(kgoext.ErrCommitOutcomeUnknown, kerr.ProducerFenced))},
		{name: "commit outcome unknown, no answer in time", resumable: true,
			err: wrap(ErrCommitUnknown, wrap(kgoext.ErrCommitOutcomeUnknown, context.DeadlineExceeded))},
	} {
		if got := isFatal(c.err); got != c.fatal {
			t.Errorf("%s: fatal %v, want %v", c.name, got, c.fatal)
		}
		if got := isAbortable(c.err); got != c.abortable {
			t.Errorf("%s: abortable %v, want %v", c.name, got, c.abortable)
		}
		if got := isPermanent(c.err); got != c.permanent {
			t.Errorf("%s: permanent %v, want %v", c.name, got, c.permanent)
		}
		if got := isResumable(c.err); got != c.resumable {
			t.Errorf("%s: resumable %v, want %v", c.name, got, c.resumable)
		}
		// What callers see: the step's sentinel, ErrFenced exactly for the fatal ones, and
		// the cause still reachable.
		err := stepErr(ErrCommit, c.err)
		if !errors.Is(err, ErrCommit) || !errors.Is(err, c.err) || errors.Is(err, ErrFenced) != c.fatal {
			t.Errorf("%s: stepErr gave %v (ErrFenced %v)", c.name, err, errors.Is(err, ErrFenced))
		}
	}
}

// An error that already says ErrFenced is not wrapped in it twice.
func TestStepErrFencedOnce(t *testing.T) {
	err := stepErr(ErrStage, stepErr(ErrCommit, kerr.ProducerFenced))
	if n := strings.Count(err.Error(), ErrFenced.Error()); n != 1 {
		t.Fatalf("%v names ErrFenced %d times", err, n)
	}
}

// Client options that would undo what the toolkit sets are refused, naming what is wrong;
// the others (TLS, SASL, client id, partitioner, ...) are taken.
func TestClientOptsChecked(t *testing.T) {
	brokers := []string{"127.0.0.1:1"}
	for name, opt := range map[string]kgo.Opt{
		"TransactionalID":    kgo.TransactionalID("mine"),
		"TransactionTimeout": kgo.TransactionTimeout(5 * 60e9),
		"MaxVersions":        kgo.MaxVersions(kgoext.Versions()),
		"consumer":           kgo.ConsumeTopics("in"),
		"group":              kgo.ConsumerGroup("g"),
		"nil":                nil,
	} {
		if err := checkClientOpts(brokers, []kgo.Opt{opt}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming it", name, err)
		}
	}
	if err := checkClientOpts(brokers, []kgo.Opt{kgo.ClientID("me"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ConnIdleTimeout(2 * 60e9)}); err != nil {
		t.Fatalf("plain client options refused: %v", err)
	}
	// kgo's own validation comes through.
	if err := checkClientOpts(brokers, []kgo.Opt{kgo.ConnIdleTimeout(-1)}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("an option kgo refuses: %v, want ErrInvalidConfig", err)
	}
}
