package client

import (
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// producerID is the identity stamped on idempotent and transactional batches.
type producerID struct {
	id    int64
	epoch int16
}

var noProducerID = producerID{id: -1, epoch: -1}

// idState is the single place where the producer id and epoch live and change. It is
// owned by Producer.mu. Partitions do not cache the id; they remember the generation
// their sequence numbers belong to and restart at sequence 0 when it changes.
//
// A transactional producer (txn.go) never bumps locally: InitProducerId goes to the
// transaction coordinator, an epoch bump after an abort is a coordinator round trip
// (KIP-360), and under transactions v2 every EndTxn returns the next epoch.
type idState struct {
	cur producerID
	// gen increases on every change of cur. Zero means "no id yet".
	gen uint64
	// bumpNeeded is set when a sequence gap or lost producer state was seen. The bump
	// happens once no produce request is in flight, so no batch with the old epoch can
	// still be written after it (see Producer.maybeBump).
	bumpNeeded bool
	// initErr is the last InitProducerId failure, for records that time out waiting.
	initErr error
}

// set installs a new id or epoch and starts a new sequence generation.
func (s *idState) set(id producerID) {
	s.cur = id
	s.gen++
	s.bumpNeeded = false
	s.initErr = nil
}

// localBump is the idempotent (non-transactional) epoch bump of KIP-360, as the Java
// client does it: the epoch goes up by one without asking a broker, and sequences restart
// at 0; a broker accepts a higher epoch with sequence 0 for a non-transactional producer.
// At the maximum epoch it reports false and the caller asks for a new producer id.
func (s *idState) localBump() bool {
	if s.cur.id < 0 || s.cur.epoch == math.MaxInt16 {
		return false
	}
	s.set(producerID{id: s.cur.id, epoch: s.cur.epoch + 1})
	return true
}

// initProducerID asks a broker for a new producer id (idempotent producer: any broker).
func initProducerID(ctx context.Context, cl *cluster) (producerID, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = nil
	req.TransactionTimeoutMillis = -1
	req.ProducerID = -1
	req.ProducerEpoch = -1
	resp, err := cl.do(ctx, anyBroker(), req)
	if err != nil {
		return noProducerID, err
	}
	r := resp.(*kmsg.InitProducerIDResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return noProducerID, fmt.Errorf("client: InitProducerId: %w", err)
	}
	return producerID{id: r.ProducerID, epoch: r.ProducerEpoch}, nil
}

// nextSequence adds n to a sequence number the way Kafka does: sequences wrap from
// MaxInt32 to 0 (Java's DefaultRecordBatch.incrementSequence).
func nextSequence(seq int32, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}
