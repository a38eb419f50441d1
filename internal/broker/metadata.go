package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/server"
)

// authorizedOperationsUnset is Kafka's INT32_MIN marker for "not requested".
const authorizedOperationsUnset = -2147483648

func (b *Broker) brokerList() []kmsg.MetadataResponseBroker {
	br := kmsg.NewMetadataResponseBroker()
	br.NodeID = b.cfg.NodeID
	br.Host = b.cfg.AdvertisedHost
	br.Port = b.cfg.AdvertisedPort
	if b.cfg.Rack != "" {
		rack := b.cfg.Rack
		br.Rack = &rack
	}
	return []kmsg.MetadataResponseBroker{br}
}

func (b *Broker) handleMetadata(ctx context.Context, req *server.Request, r *kmsg.MetadataRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = b.brokerList()
	cid := b.ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = b.cfg.NodeID
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
	parts, _ := t.snapshot()
	for i, p := range parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = b.cfg.NodeID
		mp.LeaderEpoch = leaderEpoch
		mp.Replicas = []int32{b.cfg.NodeID}
		mp.ISR = []int32{b.cfg.NodeID}
		mp.OfflineReplicas = []int32{}
		if p == nil {
			// Its log could not be opened here: as Kafka reports a partition whose only
			// replica is on an offline log directory, without a leader.
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			mp.Leader = -1
			mp.OfflineReplicas = []int32{b.cfg.NodeID}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// allTopicOperations is the authorized-operations bit set for a topic when there is no
// authorizer: READ(3) WRITE(4) CREATE(5) DELETE(6) ALTER(7) DESCRIBE(8) DESCRIBE_CONFIGS(10)
// ALTER_CONFIGS(11), the set Kafka reports for a topic to a fully authorized principal.
const allTopicOperations = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
