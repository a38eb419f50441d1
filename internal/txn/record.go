package txn

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Records in __transaction_state use Kafka's format (TransactionLog.java):
//
//	key   int16 version 0 | TransactionalId string       (TransactionLogKey v0)
//	value int16 version 1 | TransactionLogValue v1 (flexible; tagged PreviousProducerId,
//	      NextProducerId, ClientTransactionVersion), or null: the id expired.
//
// Kafka writes value version 1 when the finalized transaction.version is ≥ 1; exactq runs
// at 2, so it always writes v1. NextProducerEpoch (tag 3, KIP-939) is -1, as Kafka 4.4's
// TransactionLog.valueToBytes writes it, except in the Prepare* record that ends a kept
// transaction whose producer id was rotated (Metadata.Kept). Empty has null partitions;
// other states list theirs (Complete* an empty list).
//
// A kept transaction (KIP-939 KeepPreparedTxn, which Kafka 4.4 does not implement) also
// carries exactq's own tagged fields 939 (KeptProducerId, int64) and 940
// (KeptProducerEpoch, int16). Kafka's generated reader keeps unknown tags aside, so the
// record stays readable by Kafka.
const valueVersion = 1

// exactq's tags on TransactionLogValue v1.
const (
	tagKeptProducerID    = 939
	tagKeptProducerEpoch = 940
)

func encodeKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version = 0
	k.TransactionalID = id
	return k.AppendTo(nil)
}

func encodeValue(m Metadata) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID = m.ProducerID
	v.ProducerEpoch = m.ProducerEpoch
	v.TimeoutMillis = m.TimeoutMs
	v.State = kmsg.TransactionState(m.State)
	v.LastUpdateTimestamp = m.LastUpdateMs
	v.StartTimestamp = m.StartMs
	v.PreviousProducerID = m.PrevProducerID
	v.NextProducerID = m.NextProducerID
	v.NextProducerEpoch = m.NextProducerEpoch
	v.ClientTransactionVersion = m.ClientTV
	if m.Kept {
		v.UnknownTags.Set(tagKeptProducerID, binary.BigEndian.AppendUint64(nil, uint64(m.KeptProducerID)))
		v.UnknownTags.Set(tagKeptProducerEpoch, binary.BigEndian.AppendUint16(nil, uint16(m.KeptProducerEpoch)))
	}
	if m.State != Empty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for i := 0; i < len(m.Partitions); {
			j := i
			t := kmsg.NewTxnMetadataValueTopic()
			t.Topic = m.Partitions[i].Topic
			for ; j < len(m.Partitions) && m.Partitions[j].Topic == t.Topic; j++ {
				t.Partitions = append(t.Partitions, m.Partitions[j].Partition)
			}
			v.Topics = append(v.Topics, t)
			i = j
		}
	}
	return v.AppendTo(nil)
}

func record(t *transit) kmsg.Record {
	r := kmsg.Record{Key: encodeKey(t.id)}
	if t.meta.State != Dead {
		r.Value = encodeValue(t.meta)
	}
	return r
}

// decodeRecord reads one __transaction_state record. ok is false for records of another
// key version (Kafka skips those with a warning). meta is nil for a tombstone.
func decodeRecord(key, value []byte) (id string, meta *Metadata, ok bool, err error) {
	if len(key) < 2 {
		return "", nil, false, fmt.Errorf("txn: short key (%d bytes)", len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != 0 {
		return "", nil, false, nil
	}
	k := kmsg.NewTxnMetadataKey()
	if err := k.ReadFrom(key); err != nil {
		return "", nil, false, fmt.Errorf("txn: key: %w", err)
	}
	if value == nil {
		return k.TransactionalID, nil, true, nil
	}
	if len(value) < 2 {
		return "", nil, false, fmt.Errorf("txn: short value for %q", k.TransactionalID)
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 || v > 1 {
		return "", nil, false, nil
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(value); err != nil {
		return "", nil, false, fmt.Errorf("txn: value for %q: %w", k.TransactionalID, err)
	}
	m := &Metadata{
		ProducerID: v.ProducerID, PrevProducerID: v.PreviousProducerID, NextProducerID: v.NextProducerID,
		NextProducerEpoch: v.NextProducerEpoch,
		ProducerEpoch:     v.ProducerEpoch, LastProducerEpoch: noProducerEpoch,
		TimeoutMs: v.TimeoutMillis, State: State(v.State),
		StartMs: v.StartTimestamp, LastUpdateMs: v.LastUpdateTimestamp,
		ClientTV:       v.ClientTransactionVersion,
		KeptProducerID: noProducerID, KeptProducerEpoch: noProducerEpoch,
	}
	if v.Version == 0 {
		m.PrevProducerID, m.NextProducerID, m.NextProducerEpoch, m.ClientTV = noProducerID, noProducerID, noProducerEpoch, 0
	}
	var keptPID, keptEpoch []byte
	v.UnknownTags.Each(func(tag uint32, val []byte) {
		switch tag {
		case tagKeptProducerID:
			keptPID = val
		case tagKeptProducerEpoch:
			keptEpoch = val
		}
	})
	switch {
	case keptPID == nil && keptEpoch == nil:
	case len(keptPID) != 8 || len(keptEpoch) != 2:
		return "", nil, false, fmt.Errorf("txn: value for %q: bad kept producer tags (%d and %d bytes)", k.TransactionalID, len(keptPID), len(keptEpoch))
	default:
		m.Kept = true
		m.KeptProducerID = int64(binary.BigEndian.Uint64(keptPID))
		m.KeptProducerEpoch = int16(binary.BigEndian.Uint16(keptEpoch))
	}
	if m.State < Empty || m.State > PrepareEpochFence {
		return "", nil, false, fmt.Errorf("txn: unknown state %d for %q", m.State, k.TransactionalID)
	}
	if m.State != Empty {
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				m.Partitions = append(m.Partitions, TopicPartition{t.Topic, p})
			}
		}
		slices.SortFunc(m.Partitions, compareTP)
		m.Partitions = slices.CompactFunc(m.Partitions, func(a, b TopicPartition) bool { return compareTP(a, b) == 0 })
	}
	return k.TransactionalID, m, true, nil
}
