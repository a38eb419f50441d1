package eos

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProcessFunc handles one input record and says what becomes of it. It is called for one
// input at a time per worker, and by several workers at once. ctx stays valid during a
// graceful shutdown until RunnerConfig.ShutdownTimeout has passed.
//
// An error aborts the worker's open transaction: no output of it becomes visible, and
// every input of it is delivered again (to any worker), until the group's
// share.delivery.count.limit archives an input that keeps failing.
type ProcessFunc func(ctx context.Context, in *kgo.Record) (Result, error)

// Result is what a ProcessFunc decided for one input.
type Result struct {
	// Outputs are written in the transaction that acknowledges the input; each needs its
	// Topic (the partition is the producer's kgo.RecordPartitioner's choice, which
	// ClientOpts can set). They become visible to read_committed readers when it commits,
	// never before.
	Outputs []*kgo.Record
	// Reject marks the input as poison: when the transaction commits it is archived and
	// never delivered again. Outputs are still written (a dead-letter record, say).
	Reject bool
}

// Commit describes one committed transaction of a runner worker.
type Commit struct {
	Worker          int
	TransactionalID string
	Inputs          int // accepted and rejected inputs
	Rejected        int
	Outputs         int
	// Took is the time from the first input of the transaction to the end of its commit.
	Took time.Duration
}

// RunnerConfig configures a Runner. Brokers, Group, Topics, TransactionalIDPrefix and
// Process are required; every other field has a default when zero.
type RunnerConfig struct {
	// Brokers are the seed brokers of every client the runner makes.
	Brokers []string
	// ClientOpts are applied to every kgo client the runner makes (each worker's share
	// consumer client and transactional producer), after the runner's own: TLS
	// (kgo.DialTLSConfig), SASL, kgo.Dialer, kgo.ClientID, kgo.ConnIdleTimeout (raise it
	// with share.record.lock.duration.ms above 30s, see kgoext.NewShareConsumer), a
	// kgo.RecordPartitioner for the outputs. What the runner sets itself is refused with
	// ErrInvalidConfig: kgo.TransactionalID, kgo.TransactionTimeout, kgo.MaxVersions, and
	// kgo's consumer and group options.
	ClientOpts []kgo.Opt
	// Group is the share group; Topics the input topics every worker subscribes to.
	Group  string
	Topics []string
	// TransactionalIDPrefix names the workers' producers: worker i uses "<prefix>-<i>".
	// Keep it stable across restarts, so that a restarted process fences its crashed
	// predecessor and aborts what it left open, and unique among live processes: two
	// processes with one prefix would keep fencing each other.
	TransactionalIDPrefix string
	Process               ProcessFunc

	// Workers is the number of share consumers, each with its own producer and
	// goroutine. Default 1.
	Workers int
	// A worker commits once its open transaction holds CommitRecords inputs or is
	// CommitInterval old, whichever comes first. Defaults 500 and 100ms. The interval must
	// stay well below the group's share.record.lock.duration.ms (30s by default): inputs
	// whose lock expires before staging cannot be committed.
	CommitRecords  int
	CommitInterval time.Duration
	// MaxPollRecords caps one poll. Default min(CommitRecords, 500).
	MaxPollRecords int32
	// TransactionTimeout is the producers' transaction.timeout.ms. Default 60s; it must
	// exceed CommitInterval.
	TransactionTimeout time.Duration
	// ShutdownTimeout bounds the graceful shutdown after ctx ends: finishing the inputs
	// already polled, the last commit and closing. Default 30s.
	ShutdownTimeout time.Duration
	// RetryBackoff is the pause before retrying after a failure. Default 250ms.
	RetryBackoff time.Duration

	// OnCommit and OnAbort, when set, are told about every committed transaction and
	// every aborted one. They are called on the worker's goroutine (so concurrently from
	// different workers) and should return quickly.
	OnCommit func(Commit)
	OnAbort  func(*AbortError)
}

// withDefaults validates cfg and fills in the defaults.
func (cfg RunnerConfig) withDefaults() (RunnerConfig, error) {
	bad := func(format string, args ...any) (RunnerConfig, error) {
		return cfg, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if err := checkSource(cfg.Brokers, cfg.Group, cfg.Topics); err != nil {
		return cfg, err
	}
	if err := checkClientOpts(cfg.Brokers, cfg.ClientOpts); err != nil {
		return cfg, err
	}
	switch {
	case cfg.TransactionalIDPrefix == "":
		return bad("TransactionalIDPrefix is empty")
	case cfg.Process == nil:
		return bad("Process is nil")
	case cfg.Workers < 0 || cfg.Workers > maxWorkers:
		return bad("Workers %d is not in 0..%d", cfg.Workers, maxWorkers)
	case cfg.CommitRecords < 0:
		return bad("CommitRecords %d is negative", cfg.CommitRecords)
	case cfg.MaxPollRecords < 0:
		return bad("MaxPollRecords %d is negative", cfg.MaxPollRecords)
	case cfg.CommitInterval < 0, cfg.TransactionTimeout < 0, cfg.ShutdownTimeout < 0, cfg.RetryBackoff < 0:
		return bad("a duration is negative")
	}
	cfg.Workers = orDefault(cfg.Workers, 1)
	cfg.CommitRecords = orDefault(cfg.CommitRecords, defaultCommitRecords)
	cfg.CommitInterval = orDefault(cfg.CommitInterval, defaultCommitInterval)
	cfg.MaxPollRecords = orDefault(cfg.MaxPollRecords, int32(min(cfg.CommitRecords, defaultMaxPoll)))
	cfg.TransactionTimeout = orDefault(cfg.TransactionTimeout, defaultTxnTimeout)
	cfg.ShutdownTimeout = orDefault(cfg.ShutdownTimeout, defaultShutdown)
	cfg.RetryBackoff = orDefault(cfg.RetryBackoff, defaultBackoff)
	if cfg.CommitInterval >= cfg.TransactionTimeout {
		return bad("CommitInterval %v must be shorter than TransactionTimeout %v", cfg.CommitInterval, cfg.TransactionTimeout)
	}
	cfg.Brokers = append([]string(nil), cfg.Brokers...)
	cfg.Topics = append([]string(nil), cfg.Topics...)
	cfg.ClientOpts = append([]kgo.Opt(nil), cfg.ClientOpts...)
	return cfg, nil
}

// transactionalID is worker i's transactional id.
func (cfg *RunnerConfig) transactionalID(i int) string {
	return fmt.Sprintf("%s-%d", cfg.TransactionalIDPrefix, i)
}
