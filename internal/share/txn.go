package share

import (
	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/share/sharestate"
)

// step runs one mutating SharePartition operation on the live share partition of key
// (loading it first) and starts persisting its Update after the partition's earlier
// writes; long polls are woken, the lock timer rescheduled. The caller answers only once
// the returned write is durable (write.wait). The operation's error is mapped to its
// Kafka error and nothing is written.
//
// Acknowledgements go through here. The KIP-1289 entry points are in txnack.go:
// TxnShareAcknowledge stages through the same load/lock/persist path (persistOr, which
// unstages instead of dropping the partition when the store refused the write), and
// ApplyMarker resolves the store first (store.ApplyMarkerResult, marker durable in the
// same log) and then the live partitions in memory, without a second write.
func (m *Manager) step(key sharestate.Key, op func(sp *sharepartition.SharePartition) (sharepartition.Update, error)) (*write, error) {
	p, err := m.lockedPartition(key)
	if err != nil {
		return nil, err
	}
	defer p.mu.Unlock()
	u, err := op(p.sp)
	if err != nil {
		return nil, shareError(err)
	}
	return p.persistAndWake(u), nil
}
