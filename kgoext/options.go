package kgoext

import (
	"errors"
	"sort"
	"time"
)

// ShareOpt configures a ShareConsumer (NewShareConsumer).
type ShareOpt interface{ apply(*shareCfg) }

type shareOpt func(*shareCfg)

func (o shareOpt) apply(c *shareCfg) { o(c) }

type shareCfg struct {
	topics         []string
	rack           string
	explicit       bool
	maxRecords     int32
	maxWait        time.Duration
	minBytes       int32
	maxBytes       int32
	retryBackoff   time.Duration
	requestTimeout time.Duration
	onAcknowledged func([]AckResult)
}

func defaultShareCfg() shareCfg {
	return shareCfg{
		maxRecords:     500,
		maxWait:        500 * time.Millisecond,
		minBytes:       1,
		maxBytes:       50 << 20,
		retryBackoff:   100 * time.Millisecond,
		requestTimeout: 30 * time.Second,
	}
}

func (c *shareCfg) validate() error {
	if len(c.topics) == 0 {
		return errors.New("kgoext: NewShareConsumer needs ShareTopics")
	}
	switch {
	case c.maxRecords <= 0:
		return errors.New("kgoext: ShareMaxRecords must be positive")
	case c.maxWait <= 0 || c.maxWait > time.Duration(1<<31-1)*time.Millisecond:
		return errors.New("kgoext: ShareMaxWait must be positive and fit in an int32 of milliseconds")
	case c.minBytes <= 0 || c.maxBytes < c.minBytes:
		return errors.New("kgoext: ShareFetchBytes needs 0 < min <= max")
	case c.retryBackoff <= 0:
		return errors.New("kgoext: ShareRetryBackoff must be positive")
	}
	c.topics = append([]string(nil), c.topics...)
	sort.Strings(c.topics)
	return nil
}

// ShareTopics sets the topics the member subscribes to (required).
func ShareTopics(topics ...string) ShareOpt {
	return shareOpt(func(c *shareCfg) { c.topics = append(c.topics, topics...) })
}

// ShareRack sets the rack id sent in the member's first heartbeat.
func ShareRack(rack string) ShareOpt { return shareOpt(func(c *shareCfg) { c.rack = rack }) }

// ExplicitAcks makes every record need an Acknowledge before the next Poll (Close releases
// the records left unacknowledged). Without it (implicit mode) every record Poll returned
// is accepted on the next Poll, CommitSync, CommitAsync, AcknowledgementsForTransaction or
// Close.
func ExplicitAcks() ShareOpt { return shareOpt(func(c *shareCfg) { c.explicit = true }) }

// ShareMaxRecords is the number of records one ShareFetch asks for, across its partitions
// (a soft cap: the broker aligns to record batches). Default 500, as Kafka's
// max.poll.records.
func ShareMaxRecords(n int32) ShareOpt { return shareOpt(func(c *shareCfg) { c.maxRecords = n }) }

// ShareMaxWait is how long the broker may hold a ShareFetch waiting for data. Default 500ms.
func ShareMaxWait(d time.Duration) ShareOpt { return shareOpt(func(c *shareCfg) { c.maxWait = d }) }

// ShareFetchBytes bounds a ShareFetch response: the broker waits for min bytes (up to
// ShareMaxWait) and returns at most max. Defaults 1 and 50 MiB.
func ShareFetchBytes(min, max int32) ShareOpt {
	return shareOpt(func(c *shareCfg) { c.minBytes, c.maxBytes = min, max })
}

// ShareRetryBackoff is the pause before a request to a broker that just failed is tried
// again (and between heartbeats that failed). Default 100ms.
func ShareRetryBackoff(d time.Duration) ShareOpt {
	return shareOpt(func(c *shareCfg) { c.retryBackoff = d })
}

// OnAcknowledged is called with the outcome of every acknowledgement sent to a broker
// (piggybacked on a fetch, by CommitSync or CommitAsync, or on Close): one AckResult per
// partition and request. Calls never overlap and hold no consumer lock; they run on the
// consumer's goroutines or the caller's.
func OnAcknowledged(fn func([]AckResult)) ShareOpt {
	return shareOpt(func(c *shareCfg) { c.onAcknowledged = fn })
}
