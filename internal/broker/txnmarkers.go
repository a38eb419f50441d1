package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/server"
)

// handleWriteTxnMarkers serves WriteTxnMarkers (27) to clients, as Kafka 4.4's KafkaApis
// does: kafka-transactions abort sends one to a partition's leader to end a hanging
// transaction, and a remote transaction coordinator will send its markers the same way.
// Each marker goes through the path this node's own coordinator uses (writeMarkers): the
// producer-epoch and coordinator-epoch checks, the control batch, durability, the last
// stable offset, and on __share_group_state the resolution of TX_PENDING stagings or on
// __consumer_offsets the group coordinator's pending offsets. A partition not led here is
// answered as the other routed requests are (NOT_LEADER_OR_FOLLOWER, or
// UNKNOWN_TOPIC_OR_PARTITION when the image has no such partition). Kafka answers one
// entry per producer id, its partitions grouped by topic; so does this.
func (b *Broker) handleWriteTxnMarkers(ctx context.Context, req *server.Request, r *kmsg.WriteTxnMarkersRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	entryOf := map[int64]int{} // producer id → index in resp.Markers
	for _, rm := range r.Markers {
		m := txnMarker{pid: rm.ProducerID, epoch: rm.ProducerEpoch, commit: rm.Committed,
			coordinatorEpoch: rm.CoordinatorEpoch, transactionVersion: rm.TransactionVersion}
		codes := map[TopicPartition]int16{}
		var asked, write []TopicPartition
		for _, rt := range rm.Topics {
			t := b.topics.get(rt.Topic)
			for _, idx := range rt.Partitions {
				tp := TopicPartition{Topic: rt.Topic, Partition: idx}
				if _, dup := codes[tp]; dup {
					continue // Kafka keys the appends by partition: one marker each
				}
				asked = append(asked, tp)
				codes[tp] = 0
				if route := b.routeTo(t, idx, kerr.UnknownTopicOrPartition); route.err != nil {
					codes[tp] = route.err.Code
					continue
				}
				write = append(write, tp)
			}
		}
		if len(write) > 0 {
			for tp, err := range b.writeMarkers(ctx, m, write) {
				codes[tp] = markerErrorCode(err)
			}
		}

		i, ok := entryOf[m.pid]
		if !ok {
			i = len(resp.Markers)
			entryOf[m.pid] = i
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.pid
			resp.Markers = append(resp.Markers, rm)
		}
		addMarkerResults(&resp.Markers[i], asked, codes)
	}
	return server.Reply{Resp: resp}
}

// addMarkerResults appends each partition's code to the producer's entry, under its topic.
func addMarkerResults(entry *kmsg.WriteTxnMarkersResponseMarker, asked []TopicPartition, codes map[TopicPartition]int16) {
	for _, tp := range asked {
		ti := -1
		for j := range entry.Topics {
			if entry.Topics[j].Topic == tp.Topic {
				ti = j
				break
			}
		}
		if ti < 0 {
			ti = len(entry.Topics)
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = tp.Topic
			entry.Topics = append(entry.Topics, st)
		}
		sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
		sp.Partition = tp.Partition
		sp.ErrorCode = codes[tp]
		entry.Topics[ti].Partitions = append(entry.Topics[ti].Partitions, sp)
	}
}

// markerErrorCode is the Kafka code of a marker write's error: the typed ones (epoch checks,
// share-state errors) as they are, the log's append and fsync failures KAFKA_STORAGE_ERROR.
func markerErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.KafkaStorageError.Code
}
