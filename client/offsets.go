package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Offset is a consumer start position: an exact offset (≥ 0) or Earliest or Latest.
type Offset int64

const (
	// Latest is the end of the partition: the high watermark, or the last stable offset
	// for read_committed.
	Latest Offset = -1
	// Earliest is the log start offset.
	Earliest Offset = -2
)

// IsolationLevel selects which records a consumer sees.
type IsolationLevel int8

const (
	ReadUncommitted IsolationLevel = 0
	ReadCommitted   IsolationLevel = 1 // only committed transactional records, up to the LSO
)

// ListedOffset is one partition's ListOffsets answer.
type ListedOffset struct {
	Offset      int64
	Timestamp   int64 // of the record at Offset, for timestamp lookups; -1 otherwise
	LeaderEpoch int32
	Err         error
}

// listOffsets looks up offsets per partition. ts is a timestamp in milliseconds or -1
// (latest) / -2 (earliest), as in Kafka. Requests go to each partition's leader.
func listOffsets(ctx context.Context, cl *cluster, iso IsolationLevel, ts map[TopicPartition]int64) (map[TopicPartition]ListedOffset, error) {
	out := make(map[TopicPartition]ListedOffset, len(ts))
	byLeader, err := groupByLeader(ctx, cl, keys(ts), out)
	if err != nil {
		return nil, err
	}
	for leader, tps := range byLeader {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		req.IsolationLevel = int8(iso)
		idx := map[string]int{}
		for _, tp := range tps {
			i, ok := idx[tp.Topic]
			if !ok {
				i = len(req.Topics)
				idx[tp.Topic] = i
				t := kmsg.NewListOffsetsRequestTopic()
				t.Topic = tp.Topic
				req.Topics = append(req.Topics, t)
			}
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Partition = tp.Partition
			p.CurrentLeaderEpoch = -1
			p.Timestamp = ts[tp]
			p.MaxNumOffsets = 1
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
		}
		resp, err := cl.do(ctx, broker(leader), req)
		if err != nil {
			for _, tp := range tps {
				out[tp] = ListedOffset{Offset: -1, Err: err}
			}
			continue
		}
		for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				lo := ListedOffset{Offset: p.Offset, Timestamp: p.Timestamp, LeaderEpoch: p.LeaderEpoch, Err: kerr.ErrorForCode(p.ErrorCode)}
				out[TopicPartition{t.Topic, p.Partition}] = lo
			}
		}
	}
	return out, nil
}

// groupByLeader maps partitions to their leaders, refreshing metadata once for unknown
// ones; partitions without a leader get an error entry in errs.
func groupByLeader(ctx context.Context, cl *cluster, tps []TopicPartition, errs map[TopicPartition]ListedOffset) (map[int32][]TopicPartition, error) {
	var missing []string
	seen := map[string]bool{}
	for _, tp := range tps {
		if cl.leader(tp.Topic, tp.Partition) < 0 && !seen[tp.Topic] {
			seen[tp.Topic] = true
			missing = append(missing, tp.Topic)
		}
	}
	if len(missing) > 0 {
		if _, err := cl.refreshMetadata(ctx, missing); err != nil {
			return nil, err
		}
	}
	out := make(map[int32][]TopicPartition)
	for _, tp := range tps {
		leader := cl.leader(tp.Topic, tp.Partition)
		if leader < 0 {
			errs[tp] = ListedOffset{Offset: -1, Err: partitionErr(cl, tp)}
			continue
		}
		out[leader] = append(out[leader], tp)
	}
	return out, nil
}

// partitionErr explains why a partition has no leader.
func partitionErr(cl *cluster, tp TopicPartition) error {
	tm := cl.topic(tp.Topic)
	switch {
	case tm == nil:
		return kerr.UnknownTopicOrPartition
	case tm.err != nil:
		return tm.err
	case tp.Partition < 0 || int(tp.Partition) >= len(tm.partitions):
		return kerr.UnknownTopicOrPartition
	case tm.partitions[tp.Partition].err != nil:
		return tm.partitions[tp.Partition].err
	}
	return kerr.LeaderNotAvailable
}

func keys[V any](m map[TopicPartition]V) []TopicPartition {
	out := make([]TopicPartition, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// firstErr joins per-partition errors into one error naming the partitions, or nil.
func firstErr[V any](m map[TopicPartition]V, get func(V) error) error {
	var errs []error
	for tp, v := range m {
		if err := get(v); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, err))
		}
	}
	return errors.Join(errs...)
}
