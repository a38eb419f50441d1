package eos

import (
	"fmt"
	"time"
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
