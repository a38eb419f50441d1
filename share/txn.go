package share

import (
	"github.com/exactq/exactq/share/sharepartition"
	"github.com/exactq/exactq/share/sharestate"
)

// step runs one mutating SharePartition operation on the live share partition of key
// (loading it first) and starts persisting its Update after the partition's earlier
// writes; long polls are woken, the lock timer rescheduled. The caller answers only once
// the returned write is durable (write.wait). The operation's error is mapped to its
// Kafka error and nothing is written.
//
// Acknowledgements go through here, and so will the KIP-1289 entry points (not built yet;
// kip-1289.md 5.1-5.3, sharepartition doc steps 6-7):
//
//   - TxnShareAcknowledge (a handler in this package, txnacknowledge.go): validate the
//     request and the producer's transaction, register the share-state partitions
//     store.PartitionFor(key) in the transaction (the AddPartitionsToTxn path), then
//     step(key, sp.StageTxnAcks(member, pid, epoch, batches)) and answer when the write is
//     durable. If the write fails, UnstageTxnAcks with the same batches (under the
//     partition's lock; nothing to persist) unless the outcome is unknown, in which case
//     the partition is dropped and reloaded from the store, which step already does for
//     every failed write. toStoreBatches already carries the staging fields and decides
//     the abort state from the delivery limit (decision D5).
//   - Markers on a __share_group_state partition: the broker calls store.ApplyMarker,
//     which resolves the store's TX_PENDING batches durably, and then a Manager method
//     (TxnCompleted(keys, pid, epoch, commit)) that, for each returned key with a live
//     share partition, calls CompleteTxn under its lock and wakes long polls. Its Update
//     restates what the marker already made durable, so it needs no write before the
//     marker is answered; writing it through step is harmless (the store merges it).
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
