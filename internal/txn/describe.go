package txn

import (
	"cmp"
	"context"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions reports each id's state, producer, timeout, start time and the
// partitions still in the transaction (while markers are written, the ones still
// waiting for theirs).
func (c *Coordinator) DescribeTransactions(_ context.Context, version int16, req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	resp.Version = version
	for _, id := range req.TransactionalIDs {
		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID = id
		resp.TransactionStates = append(resp.TransactionStates, c.describe(id, s))
	}
	return resp
}

func (c *Coordinator) describe(id string, s kmsg.DescribeTransactionsResponseTransactionState) kmsg.DescribeTransactionsResponseTransactionState {
	if id == "" {
		s.ErrorCode = codeInvalidRequest
		return s
	}
	if code := c.usable(id); code != 0 {
		s.ErrorCode = code
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.core.entries[id]
	if e == nil || e.meta.State == Dead {
		s.ErrorCode = codeTransactionalIDNotFound
		return s
	}
	m := e.meta
	s.State = m.State.String()
	s.ProducerID, s.ProducerEpoch = m.ProducerID, m.ProducerEpoch
	s.TimeoutMillis = m.TimeoutMs
	s.StartTimestamp = m.StartMs
	s.Topics = []kmsg.DescribeTransactionsResponseTransactionStateTopic{}
	for _, tp := range m.Partitions {
		j := slices.IndexFunc(s.Topics, func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) bool { return t.Topic == tp.Topic })
		if j < 0 {
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic = tp.Topic
			s.Topics = append(s.Topics, t)
			j = len(s.Topics) - 1
		}
		s.Topics[j].Partitions = append(s.Topics[j].Partitions, tp.Partition)
	}
	return s
}

// ListTransactions lists the ids matching every filter given: states (unknown names are
// echoed in UnknownStateFilters), producer ids, v1's duration filter (open longer than
// DurationFilterMillis; Kafka compares with the start time even for idle ids, whose start
// is -1, so they always pass it) and v2's transactional id pattern (a full-match regular
// expression).
func (c *Coordinator) ListTransactions(_ context.Context, version int16, req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := kmsg.NewPtrListTransactionsResponse()
	resp.Version = version
	resp.UnknownStateFilters = []string{}
	resp.TransactionStates = []kmsg.ListTransactionsResponseTransactionState{}
	var states []State
	for _, name := range req.StateFilters {
		if s, ok := stateFromName(name); ok {
			states = append(states, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	duration := int64(-1)
	if version >= 1 {
		duration = req.DurationFilterMillis
	}
	var pattern *regexp.Regexp
	if version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile(`^(?:` + *req.TransactionalIDPattern + `)$`)
		if err != nil {
			resp.ErrorCode = codeInvalidRegularExpression
			return resp
		}
		pattern = re
	}
	now := c.nowMs()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		resp.ErrorCode = codeNotCoordinator
		return resp
	}
	for id, e := range c.core.entries {
		m := e.meta
		switch {
		case m.State == Dead:
		case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, m.ProducerID):
		case len(req.StateFilters) > 0 && !slices.Contains(states, m.State):
		case duration >= 0 && now-m.StartMs <= duration:
		case pattern != nil && !pattern.MatchString(id):
		default:
			s := kmsg.NewListTransactionsResponseTransactionState()
			s.TransactionalID, s.ProducerID, s.TransactionState = id, m.ProducerID, m.State.String()
			resp.TransactionStates = append(resp.TransactionStates, s)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(resp.TransactionStates, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
		return cmp.Compare(a.TransactionalID, b.TransactionalID)
	})
	return resp
}
