package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn serves EndTxn. It answers once the decision (PrepareCommit/PrepareAbort) is
// durable; markers and the Complete* record follow in the background, and meanwhile the
// id answers CONCURRENT_TRANSACTIONS. v5+ is transaction version 2: every commit or abort
// bumps the epoch and the response carries the producer id and epoch to continue with.
func (c *Coordinator) EndTxn(ctx context.Context, version int16, req *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	resp := kmsg.NewPtrEndTxnResponse()
	resp.Version = version
	resp.ProducerID, resp.ProducerEpoch = noProducerID, noProducerEpoch
	answer := func(code int16) *kmsg.EndTxnResponse {
		resp.ErrorCode = fencedForVersion(code, version, 2)
		return resp
	}
	tv := int16(0)
	if version > 4 {
		tv = 2
	}
	if req.TransactionalID != "" {
		if code := c.usable(req.TransactionalID); code != 0 {
			return answer(code)
		}
	}
	c.mu.Lock()
	r := c.core.endTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, tv, c.nowMs(), c.alloc)
	c.mu.Unlock()
	if r.t == nil {
		if r.code == 0 {
			resp.ProducerID, resp.ProducerEpoch = r.pid, r.epoch
		}
		return answer(r.code)
	}
	code, job := c.decide(ctx, r.t)
	if code != 0 {
		return answer(code)
	}
	if tv >= 2 {
		resp.ProducerID, resp.ProducerEpoch = job.complete.meta.ProducerID, job.complete.meta.ProducerEpoch
	}
	return answer(0)
}
