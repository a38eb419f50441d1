package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerID serves InitProducerId for a transactional id (req.TransactionalID must
// be set; the broker answers the idempotent-only form itself). It blocks until the new
// epoch is durable.
func (c *Coordinator) InitProducerID(ctx context.Context, version int16, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.Version = version
	resp.ProducerID, resp.ProducerEpoch = noProducerID, noProducerEpoch
	answer := func(code int16) *kmsg.InitProducerIDResponse {
		// Clients before v4 do not know PRODUCER_FENCED (KafkaApis).
		resp.ErrorCode = fencedForVersion(code, version, 4)
		return resp
	}
	if req.TransactionalID == nil {
		return answer(codeInvalidRequest)
	}
	id := *req.TransactionalID
	var expected *pidEpoch
	if version >= 3 {
		switch {
		case req.ProducerID == noProducerID && req.ProducerEpoch == noProducerEpoch:
		case req.ProducerID == noProducerID || req.ProducerEpoch == noProducerEpoch:
			return answer(codeInvalidRequest)
		default:
			expected = &pidEpoch{req.ProducerID, req.ProducerEpoch}
		}
	}
	if id != "" {
		if code := c.usable(id); code != 0 {
			return answer(code)
		}
	}
	c.mu.Lock()
	r := c.core.initProducerID(id, req.TransactionTimeoutMillis, expected, c.nowMs(), c.alloc)
	c.mu.Unlock()
	switch {
	case r.code != 0:
		return answer(r.code)
	case r.fence:
		// The open transaction is being aborted with a bumped epoch; the client backs
		// off and retries, then gets an epoch above the fencing one.
		code, _ := c.decide(ctx, r.t)
		if code == 0 {
			code = codeConcurrentTxns
		}
		return answer(code)
	}
	if code := c.persist(ctx, r.t, false); code != 0 {
		return answer(code)
	}
	resp.ProducerID, resp.ProducerEpoch = r.t.meta.ProducerID, r.t.meta.ProducerEpoch
	return answer(0)
}
