package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/server"
)

// handleDescribeProducers lists the active idempotent and transactional producers of each
// partition (KIP-664), the tool operators use to find a hanging transaction.
func (b *Broker) handleDescribeProducers(req *server.Request, r *kmsg.DescribeProducersRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t := b.topics.get(rt.Topic)
		for _, idx := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			p := partitionOf(t, idx)
			if p == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p.mu.Lock()
			entries := p.producers.Producers()
			p.mu.Unlock()
			for _, e := range entries {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID = e.ProducerID
				ap.ProducerEpoch = int32(e.Epoch)
				ap.LastSequence = -1
				if n := len(e.Batches); n > 0 {
					ap.LastSequence = e.Batches[n-1].LastSeq
				}
				ap.LastTimestamp = e.LastTimestampMs
				ap.CoordinatorEpoch = e.CoordinatorEpoch
				ap.CurrentTxnStartOffset = e.CurrentTxnFirstOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return server.Reply{Resp: resp}
}
