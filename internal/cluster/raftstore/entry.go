package raftstore

import (
	"encoding/binary"
	"fmt"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
	pb "go.etcd.io/raft/v3/raftpb"
)

// One raft entry is one v2 record batch holding one record, so that it takes one offset:
// base offset = index - 1, PartitionLeaderEpoch = term (neither is covered by the batch
// CRC, which covers the record). A normal entry with data is a data batch whose record
// value is the entry's Data (a KRaft-framed batch of metadata records, to the applier);
// raft's own entries are control batches, with Kafka's control-record key (version 0,
// type) and the entry's Data as value. The types are exactq's, above Kafka's (0-6).
const (
	ctlEmpty        = 100 // the empty normal entry a new leader appends
	ctlConfChange   = 101 // EntryConfChange
	ctlConfChangeV2 = 102 // EntryConfChangeV2
)

// encodeEntry returns e as the batch the log stores.
func encodeEntry(e *pb.Entry, nowMs int64) ([]byte, error) {
	if e.GetIndex() == 0 || e.GetTerm() > 1<<31-1 {
		return nil, fmt.Errorf("raftstore: entry index %d term %d cannot be stored", e.GetIndex(), e.GetTerm())
	}
	h := batch.NoProducer(int64(e.GetIndex())-1, nowMs)
	h.PartitionLeaderEpoch = int32(e.GetTerm())
	rec := kmsg.Record{Value: e.GetData()}
	var typ uint16
	switch t := e.GetType(); {
	case t == pb.EntryNormal && len(e.GetData()) > 0:
		if rec.Value == nil {
			rec.Value = []byte{}
		}
	case t == pb.EntryNormal:
		typ = ctlEmpty
	case t == pb.EntryConfChange:
		typ = ctlConfChange
	case t == pb.EntryConfChangeV2:
		typ = ctlConfChangeV2
	default:
		return nil, fmt.Errorf("raftstore: entry %d has unknown type %v", e.GetIndex(), t)
	}
	if typ != 0 {
		h.Attributes = batch.AttrControl
		rec.Key = binary.BigEndian.AppendUint16([]byte{0, 0}, typ)
	}
	return batch.Encode(nil, h, []kmsg.Record{rec}, batch.CodecNone)
}

// decodeEntry is the inverse of encodeEntry, for a batch the log returned.
func decodeEntry(b []byte) (*pb.Entry, error) {
	h, err := batch.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("raftstore: stored entry at offset %d: %w", batch.BaseOffset(b), err)
	}
	recs, err := batch.Records(b)
	if err != nil || len(recs) != 1 || h.LastOffsetDelta != 0 || h.PartitionLeaderEpoch < 0 {
		return nil, fmt.Errorf("raftstore: stored entry at offset %d is not one record (%v)", h.FirstOffset, err)
	}
	e := &pb.Entry{Index: new(uint64(h.FirstOffset) + 1), Term: new(uint64(h.PartitionLeaderEpoch))}
	r := recs[0]
	typ := pb.EntryNormal
	if h.Attributes&batch.AttrControl != 0 {
		if len(r.Key) != 4 {
			return nil, fmt.Errorf("raftstore: stored entry at offset %d: control key of %d bytes", h.FirstOffset, len(r.Key))
		}
		switch binary.BigEndian.Uint16(r.Key[2:]) {
		case ctlEmpty:
		case ctlConfChange:
			typ = pb.EntryConfChange
		case ctlConfChangeV2:
			typ = pb.EntryConfChangeV2
		default:
			return nil, fmt.Errorf("raftstore: stored entry at offset %d: control type %d", h.FirstOffset, binary.BigEndian.Uint16(r.Key[2:]))
		}
	}
	e.Type = typ.Enum()
	if len(r.Value) > 0 {
		e.Data = append([]byte(nil), r.Value...)
	}
	return e, nil
}
