package eos

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Defaults of the Runner's and the Checkpointer's configurations.
const (
	defaultCommitRecords  = 500
	defaultCommitInterval = 100 * time.Millisecond
	defaultMaxPoll        = 500
	defaultTxnTimeout     = time.Minute
	defaultShutdown       = 30 * time.Second
	defaultBackoff        = 250 * time.Millisecond
	maxWorkers            = 1024
)

// checkSource validates what both the Runner and the Checkpointer read from: the brokers,
// the share group and its topics.
func checkSource(brokers []string, group string, topics []string) error {
	switch {
	case len(brokers) == 0:
		return fmt.Errorf("%w: Brokers is empty", ErrInvalidConfig)
	case group == "":
		return fmt.Errorf("%w: Group is empty", ErrInvalidConfig)
	case len(topics) == 0:
		return fmt.Errorf("%w: Topics is empty", ErrInvalidConfig)
	}
	for i, t := range topics {
		if t == "" {
			return fmt.Errorf("%w: Topics[%d] is empty", ErrInvalidConfig, i)
		}
	}
	return nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// checkClientOpts refuses client options that would undo what the toolkit sets on its
// clients, instead of applying them half or ignoring them: the transactional id and
// timeout (one per worker, from the config), the request versions (the producers need
// TxnShareAcknowledge, the Checkpointer's InitProducerId v6 too), and kgo's own consumers
// (the toolkit consumes with kgoext's share consumer, which must not share its client with
// them). It also surfaces kgo's own validation of the options. No connection is made.
func checkClientOpts(brokers []string, opts []kgo.Opt) error {
	for i, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: ClientOpts[%d] is nil", ErrInvalidConfig, i)
		}
		switch o.(type) {
		case kgo.ConsumerOpt, kgo.GroupOpt:
			return fmt.Errorf("%w: ClientOpts[%d] is a kgo consumer or group option; the toolkit's share consumers are kgoext's", ErrInvalidConfig, i)
		}
	}
	// Each option the toolkit owns is set to a probe value first: one that reads back
	// different afterwards was set by opts.
	const probeID, probeTimeout = "eos-probe", 1234567 * time.Millisecond
	probeVersions := kversion.Stable()
	probe := append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.TransactionalID(probeID),
		kgo.TransactionTimeout(probeTimeout), kgo.MaxVersions(probeVersions)}, opts...)
	cl, err := kgo.NewClient(probe...)
	if err != nil {
		return fmt.Errorf("%w: ClientOpts: %w", ErrInvalidConfig, err)
	}
	defer cl.Close()
	switch {
	case cl.OptValue(kgo.TransactionalID) != probeID:
		return fmt.Errorf("%w: ClientOpts set kgo.TransactionalID; the toolkit names its producers", ErrInvalidConfig)
	case cl.OptValue(kgo.TransactionTimeout) != probeTimeout:
		return fmt.Errorf("%w: ClientOpts set kgo.TransactionTimeout; use the config's TransactionTimeout", ErrInvalidConfig)
	case cl.OptValue(kgo.MaxVersions) != any(probeVersions):
		return fmt.Errorf("%w: ClientOpts set kgo.MaxVersions; the toolkit sets the versions its requests need", ErrInvalidConfig)
	}
	return nil
}
