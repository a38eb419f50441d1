package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/wire"
)

// InitProducerID serves InitProducerId v0-5 for a transactional id (req.TransactionalID
// must be set; the broker answers the idempotent-only form itself). It blocks until the
// new epoch is durable.
func (c *Coordinator) InitProducerID(ctx context.Context, version int16, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	w := wire.NewPtrInitProducerIDRequest()
	w.Version = version
	w.TransactionalID, w.TransactionTimeoutMillis = req.TransactionalID, req.TransactionTimeoutMillis
	w.ProducerID, w.ProducerEpoch = req.ProducerID, req.ProducerEpoch
	r := c.InitProducerIDV6(ctx, w)
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.Version, resp.ThrottleMillis, resp.ErrorCode = r.Version, r.ThrottleMillis, r.ErrorCode
	resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch
	return resp
}

// InitProducerIDV6 serves InitProducerId up to v6, whose KIP-939 fields ask for two-phase
// commit (Enable2Pc) and for keeping an ongoing transaction (KeepPreparedTxn); see
// core.initProducerID. The response's OngoingTxnProducerId/Epoch name the kept
// transaction, -1 when none was kept.
func (c *Coordinator) InitProducerIDV6(ctx context.Context, req *wire.InitProducerIDRequest) *wire.InitProducerIDResponse {
	version := req.Version
	resp := wire.NewPtrInitProducerIDResponse()
	resp.Version = version
	resp.ProducerID, resp.ProducerEpoch = noProducerID, noProducerEpoch
	answer := func(code int16) *wire.InitProducerIDResponse {
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
	opts := initOpts{enable2PC: req.Enable2Pc, keep: req.KeepPreparedTxn}
	c.mu.Lock()
	r := c.core.initProducerID(id, req.TransactionTimeoutMillis, expected, opts, c.nowMs(), c.alloc)
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
	if r.kept {
		resp.OngoingTxnProducerID, resp.OngoingTxnProducerEpoch = r.ongoing.pid, r.ongoing.epoch
		c.log.Info("kept ongoing transaction for a new producer", "transactional_id", id,
			"ongoing_producer_id", r.ongoing.pid, "ongoing_epoch", r.ongoing.epoch,
			"producer_id", r.t.meta.ProducerID, "epoch", r.t.meta.ProducerEpoch)
	}
	resp.ProducerID, resp.ProducerEpoch = r.t.meta.ProducerID, r.t.meta.ProducerEpoch
	return answer(0)
}
