package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/server"
)

// authorizedOperationsUnset is Kafka's INT32_MIN marker for "not requested".
const authorizedOperationsUnset = -2147483648

func (b *Broker) brokerList() []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, e := range b.brokers() {
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port, br.Rack = e.id, e.host, e.port, e.rack
		out = append(out, br)
	}
	return out
}

func (b *Broker) handleMetadata(ctx context.Context, req *server.Request, r *kmsg.MetadataRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = b.brokerList()
	cid := b.ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = b.controllerID()
	resp.AuthorizedOperations = authorizedOperationsUnset

	// A null topic list means all topics; an empty list (v1+) means none.
	if r.Topics == nil {
		for _, t := range b.topics.all() {
			resp.Topics = append(resp.Topics, b.topicMetadata(t, r))
		}
		return server.Reply{Resp: resp}
	}
	autoCreate := b.cfg.AutoCreateTopics && (r.Version < 4 || r.AllowAutoTopicCreation)
	if autoCreate {
		if n := b.autoCreatePartitions(r.Topics); n > admin.MaxPartitionsPerRequest {
			// Kafka sends the request's unknown topics to the controller as one CreateTopics,
			// which refuses it whole (POLICY_VIOLATION, logged); the Metadata response names
			// each of them UNKNOWN_TOPIC_OR_PARTITION either way.
			b.logger.Warn("auto topic creation refused: Excessively large number of partitions per request.",
				"partitions", n, "limit", admin.MaxPartitionsPerRequest)
			autoCreate = false
		}
	}
	for _, rt := range r.Topics {
		switch {
		case rt.Topic == nil && rt.TopicID != [16]byte{}:
			if t := b.topics.getByID(rt.TopicID); t != nil {
				resp.Topics = append(resp.Topics, b.topicMetadata(t, r))
			} else {
				resp.Topics = append(resp.Topics, topicError(nil, rt.TopicID, kerr.UnknownTopicID))
			}
		case rt.Topic == nil:
			resp.Topics = append(resp.Topics, topicError(nil, rt.TopicID, kerr.InvalidRequest))
		default:
			name := *rt.Topic
			t := b.topics.get(name)
			if t == nil && autoCreate {
				var err *kerr.Error
				t, err = b.autoCreateTopic(ctx, name)
				if err != nil {
					resp.Topics = append(resp.Topics, topicError(&name, [16]byte{}, err))
					continue
				}
			}
			if t == nil {
				code := kerr.UnknownTopicOrPartition
				if validateTopicName(name) != nil {
					code = kerr.InvalidTopicException
				}
				resp.Topics = append(resp.Topics, topicError(&name, [16]byte{}, code))
				continue
			}
			resp.Topics = append(resp.Topics, b.topicMetadata(t, r))
		}
	}
	return server.Reply{Resp: resp}
}

// autoCreatePartitions is how many partitions auto-creating the request's unknown topics
// would create: each distinct valid, non-internal name that is not a topic yet gets
// num.partitions.
func (b *Broker) autoCreatePartitions(rts []kmsg.MetadataRequestTopic) int64 {
	unknown := map[string]struct{}{}
	for _, rt := range rts {
		if rt.Topic == nil || isInternalTopic(*rt.Topic) || validateTopicName(*rt.Topic) != nil || b.topics.get(*rt.Topic) != nil {
			continue
		}
		unknown[*rt.Topic] = struct{}{}
	}
	return int64(len(unknown)) * int64(b.defaults.numPartitions)
}

func topicError(name *string, id [16]byte, err *kerr.Error) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = name
	mt.TopicID = id
	mt.ErrorCode = err.Code
	mt.AuthorizedOperations = authorizedOperationsUnset
	return mt
}

func (b *Broker) topicMetadata(t *topic, r *kmsg.MetadataRequest) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.name
	mt.Topic = &name
	mt.TopicID = t.id
	mt.IsInternal = t.internal
	mt.AuthorizedOperations = authorizedOperationsUnset
	if r.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = allTopicOperations
	}
	it := b.pub.image().TopicsByID[t.id]
	if it == nil {
		return mt
	}
	for i, ip := range it.Partitions {
		s := b.stateOf(t, int32(i), ip)
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader, mp.LeaderEpoch = s.leader, s.epoch
		mp.Replicas, mp.ISR, mp.OfflineReplicas = s.replicas, s.isr, s.offline
		if s.err != nil {
			mp.ErrorCode = s.err.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// allTopicOperations is the authorized-operations bit set for a topic when there is no
// authorizer: READ(3) WRITE(4) CREATE(5) DELETE(6) ALTER(7) DESCRIBE(8) DESCRIBE_CONFIGS(10)
// ALTER_CONFIGS(11), the set Kafka reports for a topic to a fully authorized principal.
const allTopicOperations = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11

// maxDescribePartitions is max.request.partition.size.limit (Kafka's default): the most
// partitions one DescribeTopicPartitions response carries.
const maxDescribePartitions = 2000

// handleDescribeTopicPartitions answers DescribeTopicPartitions (75, KIP-966) from the
// image the registry matches, as Kafka's DescribeTopicPartitionsRequestHandler: the named
// topics (every topic when none is named) by name, from the cursor on, at most
// min(ResponsePartitionLimit, 2000) partitions, with a next cursor when cut; an unknown
// named topic is UNKNOWN_TOPIC_OR_PARTITION; a cursor outside the named topics, or at a
// negative partition, is INVALID_REQUEST, which Kafka's handler throws for the request.
func (b *Broker) handleDescribeTopicPartitions(req *server.Request, r *kmsg.DescribeTopicPartitionsRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	from := ""
	if r.Cursor != nil {
		from = r.Cursor.Topic
	}
	var names []string
	all := len(r.Topics) == 0
	if all {
		for _, t := range b.topics.all() {
			names = append(names, t.name)
		}
	} else {
		seen := map[string]bool{}
		for _, rt := range r.Topics {
			if !seen[rt.Topic] {
				seen[rt.Topic] = true
				names = append(names, rt.Topic)
			}
		}
		slices.Sort(names)
		if r.Cursor != nil && !seen[r.Cursor.Topic] {
			return server.Reply{Resp: invalidDescribeTopicPartitions(resp, names)}
		}
	}
	if r.Cursor != nil && r.Cursor.Partition < 0 {
		return server.Reply{Resp: invalidDescribeTopicPartitions(resp, names)}
	}
	left := min(r.ResponsePartitionLimit, maxDescribePartitions)
	for _, name := range names {
		if name < from {
			continue
		}
		t := b.topics.get(name)
		var it *metadata.Topic
		if t != nil {
			it = b.pub.image().TopicsByID[t.id]
		}
		dt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		dt.Topic = kmsg.StringPtr(name)
		if it == nil {
			if all {
				continue
			}
			dt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, dt)
			continue
		}
		dt.TopicID, dt.IsInternal = t.id, t.internal
		start := int32(0)
		if r.Cursor != nil && name == r.Cursor.Topic {
			start = r.Cursor.Partition
		}
		for i := start; i < int32(len(it.Partitions)); i++ {
			if left <= 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: i}
				break
			}
			left--
			s := b.stateOf(t, i, it.Partitions[i])
			dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			dp.Partition, dp.LeaderID, dp.LeaderEpoch = i, s.leader, s.epoch
			dp.Replicas, dp.ISR, dp.OfflineReplicas = s.replicas, s.isr, s.offline
			dp.EligibleLeaderReplicas, dp.LastKnownELR = orEmpty(s.elr), orEmpty(s.lastKnownELR)
			if s.err != nil {
				dp.ErrorCode = s.err.Code
			}
			dt.Partitions = append(dt.Partitions, dp)
		}
		if len(dt.Partitions) > 0 || resp.NextCursor == nil {
			resp.Topics = append(resp.Topics, dt)
		}
		if resp.NextCursor != nil {
			break
		}
	}
	return server.Reply{Resp: resp}
}

func orEmpty(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

// invalidDescribeTopicPartitions is the answer to a request Kafka's handler refuses
// whole: INVALID_REQUEST in each named topic (the response has no top-level code).
func invalidDescribeTopicPartitions(resp *kmsg.DescribeTopicPartitionsResponse, names []string) *kmsg.DescribeTopicPartitionsResponse {
	for _, name := range names {
		dt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		dt.Topic, dt.ErrorCode = kmsg.StringPtr(name), kerr.InvalidRequest.Code
		resp.Topics = append(resp.Topics, dt)
	}
	return resp
}
