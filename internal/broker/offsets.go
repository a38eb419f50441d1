package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/server"
)

// ListOffsets special timestamps.
const (
	listLatest          = -1
	listEarliest        = -2
	listMaxTimestamp    = -3
	listEarliestLocal   = -4 // KIP-1005: no tiered storage, so the same as earliest
	listEarliestPending = -5 // KIP-1023: nothing is pending upload without tiered storage
	listLatestTiered    = -6
)

func (b *Broker) handleListOffsets(req *server.Request, r *kmsg.ListOffsetsRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	readCommitted := r.IsolationLevel == 1
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t := b.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			rt := b.routeTo(t, rp.Partition, kerr.UnknownTopicOrPartition)
			if rt.err == nil {
				rt.err = rt.checkEpoch(rp.CurrentLeaderEpoch)
			}
			if rt.err != nil {
				sp.ErrorCode = rt.err.Code
			} else {
				b.listOffset(rt.p, rp.Timestamp, readCommitted, &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return server.Reply{Resp: resp}
}

func (b *Broker) listOffset(p *partition, ts int64, readCommitted bool, sp *kmsg.ListOffsetsResponseTopicPartition) {
	sp.LeaderEpoch = p.epoch.Load()
	switch ts {
	case listLatest:
		sp.Offset = p.highWatermark()
		if readCommitted {
			sp.Offset = p.lastStableOffset()
		}
	case listEarliest, listEarliestLocal:
		sp.Offset = p.log.StartOffset()
	case listEarliestPending, listLatestTiered:
		// No tiered storage: Kafka answers -1 (no such offset) for these.
		sp.Offset = -1
		sp.LeaderEpoch = -1
	case listMaxTimestamp:
		mts, off, err := p.log.MaxTimestamp()
		if err != nil {
			sp.ErrorCode = kerr.KafkaStorageError.Code
			return
		}
		if off >= 0 && off < p.highWatermark() {
			sp.Timestamp, sp.Offset = mts, off
		} else {
			sp.LeaderEpoch = -1
		}
	default:
		if ts < 0 {
			sp.ErrorCode = kerr.InvalidRequest.Code
			return
		}
		off, fts, ok, err := p.log.OffsetForTimestamp(ts)
		switch {
		case err != nil:
			sp.ErrorCode = kerr.KafkaStorageError.Code
		case ok && off < p.highWatermark():
			sp.Offset, sp.Timestamp = off, fts
		default:
			sp.LeaderEpoch = -1
		}
	}
}

func (b *Broker) handleDeleteRecords(req *server.Request, r *kmsg.DeleteRecordsRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t := b.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			rt := b.routeTo(t, rp.Partition, kerr.UnknownTopicOrPartition)
			p := rt.p
			switch {
			case rt.err != nil:
				sp.ErrorCode = rt.err.Code
			case t.internal:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case deleteRefusedByPolicy(t):
				sp.ErrorCode = kerr.PolicyViolation.Code
			default:
				// -1 means "up to the high watermark"; beyond it is out of range.
				before := rp.Offset
				hw := p.highWatermark()
				if before == -1 {
					before = hw
				}
				if before < 0 || before > hw {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
					break
				}
				start, err := p.log.DeleteRecordsBefore(before)
				if err != nil {
					sp.ErrorCode = kerr.KafkaStorageError.Code
					break
				}
				sp.LowWatermark = start
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return server.Reply{Resp: resp}
}

// deleteRefusedByPolicy is Kafka's rule (Partition.deleteRecordsOnLeader): a topic whose
// cleanup.policy is compact without delete keeps its records until the cleaner removes
// them, so DeleteRecords is refused; compact,delete and delete alone allow it.
func deleteRefusedByPolicy(t *topic) bool {
	_, settings := t.snapshot()
	return settings.log.Compact && !settings.log.Delete
}
