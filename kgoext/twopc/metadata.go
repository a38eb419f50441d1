package twopc

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicMeta is what the producer needs of a topic: its partitions' leaders and its id
// (share acknowledgements name topics by id).
type topicMeta struct {
	id      [16]byte
	leaders []int32 // by partition; -1: no leader now
}

// metadata returns topics' partitions and leaders from the kgo client's metadata cache,
// asking a broker when a topic is not cached, after staleMeta was set (a leader moved),
// and again, with backoff, while a partition has no leader (up to RequestRetries) or a
// topic is unknown (up to kgo.UnknownTopicRetries, as kgo's producer: the topic may be
// being auto-created).
func (p *Producer) metadata(ctx context.Context, topics []string) (map[string]topicMeta, error) {
	var last error
	unknown := 0
	for try := 0; ; try++ {
		if try > 0 {
			if try > p.retries || (p.unknownTopicRetries >= 0 && unknown > p.unknownTopicRetries) {
				return nil, last
			}
			if err := sleep(ctx, p.backoff(try)); err != nil {
				return nil, fmt.Errorf("%w (last error: %v)", err, last)
			}
		}
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = p.autoCreate
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
		var resp *kmsg.MetadataResponse
		var err error
		if p.staleMeta || try > 0 {
			var r kmsg.Response
			if r, err = p.cl.Request(ctx, req); err == nil {
				resp = r.(*kmsg.MetadataResponse)
			}
		} else {
			resp, err = p.cl.RequestCachedMetadata(ctx, req, 0)
		}
		if err != nil {
			if final(ctx, err) {
				return nil, err
			}
			last = err
			continue
		}
		out, err := topicMetas(resp, topics)
		if err == nil {
			p.staleMeta = false
			return out, nil
		}
		if !kerr.IsRetriable(err) {
			return nil, err
		}
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			unknown++
		}
		last = err
	}
}

// topicMetas reads topics out of resp: an error for the first topic missing, failed or
// with a partition without leader.
func topicMetas(resp *kmsg.MetadataResponse, topics []string) (map[string]topicMeta, error) {
	out := make(map[string]topicMeta, len(topics))
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("twopc: topic %s: %w", *t.Topic, err)
		}
		m := topicMeta{id: t.TopicID, leaders: make([]int32, len(t.Partitions))}
		for _, pt := range t.Partitions {
			if pt.Partition < 0 || int(pt.Partition) >= len(m.leaders) {
				return nil, fmt.Errorf("twopc: topic %s: metadata names partition %d of %d: %w", *t.Topic, pt.Partition, len(m.leaders), kerr.UnknownTopicOrPartition)
			}
			if err := kerr.ErrorForCode(pt.ErrorCode); err != nil || pt.Leader < 0 {
				if err == nil {
					err = kerr.LeaderNotAvailable
				}
				return nil, fmt.Errorf("twopc: %s[%d]: %w", *t.Topic, pt.Partition, err)
			}
			m.leaders[pt.Partition] = pt.Leader
		}
		if len(m.leaders) == 0 {
			return nil, fmt.Errorf("twopc: topic %s has no partitions: %w", *t.Topic, kerr.LeaderNotAvailable)
		}
		out[*t.Topic] = m
	}
	for _, t := range topics {
		if _, ok := out[t]; !ok {
			return nil, fmt.Errorf("twopc: topic %s: %w", t, kerr.UnknownTopicOrPartition)
		}
	}
	return out, nil
}
