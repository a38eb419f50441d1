package controller

import (
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AutoCreateTopicRequest asks for a topic a client named in Metadata, with the default
// partitions, replication and configs (admin.AutoCreateTopic). It has no Kafka message of
// its own: Kafka's broker sends the controller a CreateTopics for it. It is answered, as
// Kafka's controller answers that CreateTopics, with a *kmsg.CreateTopicsResponse of one
// topic: error NONE and the topic's id when it exists afterwards (created now or before),
// otherwise the code the client gets (UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION)
// with the reason as its message.
type AutoCreateTopicRequest struct {
	Name string
}

// CreateInternalTopicRequest asks for an internal topic a coordinator needs on first use
// (__consumer_offsets, __transaction_state, __share_group_state), one replica per
// partition, not bounded by max.broker.partitions (admin.CreateInternalTopic). It is
// answered like AutoCreateTopicRequest.
type CreateInternalTopicRequest struct {
	Name       string
	Partitions int32
	Configs    map[string]string
}

// perRecordBytes bounds what a batch adds around one record's value (its length,
// attributes, timestamp and offset deltas, key and value lengths, header count: seven
// varints, none longer than 5 bytes), and batchHeaderBytes is the v2 batch header; with
// them a batch's size is known without encoding it.
const (
	perRecordBytes   = 7 * 5
	batchHeaderBytes = 61
)

// adminResult turns an admin function's record groups and response into a Result: the
// groups cut into batches at group boundaries, each batch at most metadata.MaxEntryBytes
// (a group is a topic or a resource: it must apply atomically, a request need not).
// Without groups (refusals, ValidateOnly) the answer waits only for what it was decided
// on. A group too large for one entry refuses the whole request with
// RECORD_LIST_TOO_LARGE before anything is proposed.
func adminResult(req any, groups [][]wire.MetadataRecord, resp kmsg.Response, maxBytes int) Result {
	reply := func(uint64) kmsg.Response { return resp }
	if len(groups) == 0 {
		return Result{Reply: reply}
	}
	var r Result
	size := batchHeaderBytes
	for _, g := range groups {
		gs := 0
		for _, rec := range g {
			gs += len(wire.AppendMetadataRecord(nil, rec)) + perRecordBytes
		}
		if batchHeaderBytes+gs > maxBytes {
			return errorResult(req, kerr.RecordListTooLarge, fmt.Sprintf(
				"the records of one topic or resource take %d bytes, more than one metadata entry holds (%d)", gs, maxBytes))
		}
		if size+gs > maxBytes {
			r.Splits = append(r.Splits, len(r.Records))
			size = batchHeaderBytes
		}
		r.Records = append(r.Records, g...)
		size += gs
	}
	r.Reply = reply
	return r
}

// placement is where a request's new partitions go: striped over latest's unfenced
// brokers not shutting down (Kafka's usable brokers), in id order, from a start drawn by
// cfg.PlacementStart. With none, the stripe is this node alone: a single node creates
// topics before (or without) its broker registering, as step 5's broker does, and they
// are led by it from their first record (admin makes the first replica leader). Kafka
// refuses such a request (INVALID_REPLICATION_FACTOR, no broker registered); on a
// cluster the fallback only matters while no broker at all is unfenced.
func (c *Core) placement(latest *metadata.Image) admin.Placement {
	var ids []int32
	for _, id := range sortedBrokerIDs(latest) {
		if br := latest.Brokers[id]; !br.Fenced && !br.InControlledShutdown {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		ids = []int32{c.cfg.NodeID}
	}
	return admin.Placement{Brokers: ids, Start: c.cfg.PlacementStart(len(ids))}
}

// requestIDs is cfg.NewTopicID never giving one request the same id twice: admin checks
// a drawn id against the image only, and a request's earlier topics are not in it yet.
func (c *Core) requestIDs() func() metadata.TopicID {
	drawn := map[metadata.TopicID]bool{}
	return func() metadata.TopicID {
		for {
			if id := c.cfg.NewTopicID(); !drawn[id] {
				drawn[id] = true
				return id
			}
		}
	}
}

// handleAdmin decides the admin requests; ok is false for any other.
func (c *Core) handleAdmin(latest *metadata.Image, clientID string, req any) (r Result, ok bool) {
	cfg := c.cfg.Admin
	newID := c.requestIDs()
	switch req := req.(type) {
	case *kmsg.CreateTopicsRequest:
		groups, resp := admin.CreateTopics(latest, req, clientID, c.placement(latest), cfg, newID)
		return adminResult(req, groups, resp, c.cfg.maxBatchBytes), true
	case *kmsg.DeleteTopicsRequest:
		groups, resp := admin.DeleteTopics(latest, req, cfg)
		return adminResult(req, groups, resp, c.cfg.maxBatchBytes), true
	case *kmsg.CreatePartitionsRequest:
		groups, resp := admin.CreatePartitions(latest, req, c.placement(latest), cfg)
		return adminResult(req, groups, resp, c.cfg.maxBatchBytes), true
	case *kmsg.AlterConfigsRequest:
		groups, resp := admin.AlterConfigs(latest, req, cfg)
		return adminResult(req, groups, resp, c.cfg.maxBatchBytes), true
	case *kmsg.IncrementalAlterConfigsRequest:
		groups, resp := admin.IncrementalAlterConfigs(latest, req, cfg)
		return adminResult(req, groups, resp, c.cfg.maxBatchBytes), true
	case *kmsg.UpdateFeaturesRequest:
		recs, _, resp := admin.UpdateFeatures(latest, req, c.cfg.NodeID)
		var groups [][]wire.MetadataRecord
		if len(recs) > 0 {
			groups = [][]wire.MetadataRecord{recs} // every feature or none
		}
		return adminResult(req, groups, resp, c.cfg.maxBatchBytes), true
	case *AutoCreateTopicRequest:
		recs, code, reason := admin.AutoCreateTopic(latest, req.Name, c.placement(latest), cfg, newID)
		if code != nil {
			return errorResult(req, code, reason), true
		}
		return topicCreated(latest, req, req.Name, recs, c.cfg.maxBatchBytes), true
	case *CreateInternalTopicRequest:
		recs, err := admin.CreateInternalTopic(latest, req.Name, req.Partitions, req.Configs, c.placement(latest), newID)
		if err != nil { // no broker to place on: placement never leaves none
			return errorResult(req, kerr.UnknownServerError, err.Error()), true
		}
		return topicCreated(latest, req, req.Name, recs, c.cfg.maxBatchBytes), true
	}
	return Result{}, false
}

// topicCreated answers an internal creation: recs create the topic, or none when it
// exists in latest already (created by this request's predecessors, maybe in flight: the
// answer waits for them either way).
func topicCreated(latest *metadata.Image, req any, name string, recs []wire.MetadataRecord, maxBytes int) Result {
	var id metadata.TopicID
	var groups [][]wire.MetadataRecord
	if len(recs) > 0 {
		id, groups = recs[0].(*wire.TopicRecord).TopicID, [][]wire.MetadataRecord{recs}
	} else if t := latest.Topic(name); t != nil {
		id = t.ID
	}
	return adminResult(req, groups, topicAnswer(name, id, nil, ""), maxBytes)
}

// topicAnswer is the one-topic CreateTopicsResponse that answers the internal requests.
func topicAnswer(name string, id metadata.TopicID, code *kerr.Error, msg string) *kmsg.CreateTopicsResponse {
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.SetVersion(resp.MaxVersion())
	t := kmsg.NewCreateTopicsResponseTopic()
	t.Topic, t.TopicID, t.NumPartitions, t.ReplicationFactor = name, id, -1, -1
	if code != nil {
		t.ErrorCode = code.Code
		if msg != "" {
			t.ErrorMessage = &msg
		}
	}
	resp.Topics = []kmsg.CreateTopicsResponseTopic{t}
	return resp
}

// randomStart is Kafka's placement start: drawn at random per request.
func randomStart(brokers int) int { return mrand.IntN(brokers) }

// randomTopicID is a version-4 UUID, as Kafka's Uuid.randomUuid.
func randomTopicID() metadata.TopicID {
	var id metadata.TopicID
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

// adminErrorResponse is an admin request's response with code in every topic or resource
// it names (every one of a CreateTopics, so a client retries them all on NOT_CONTROLLER),
// at the request's version; nil for a request that is not an admin request.
func adminErrorResponse(req kmsg.Request, code *kerr.Error, msg string) kmsg.Response {
	var m *string
	if msg != "" {
		m = &msg
	}
	switch req := req.(type) {
	case *kmsg.CreateTopicsRequest:
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage, t.NumPartitions, t.ReplicationFactor = rt.Topic, code.Code, m, -1, -1
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		resp.Version = req.Version
		add := func(name *string, id [16]byte) {
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.Topic, t.TopicID, t.ErrorCode, t.ErrorMessage = name, id, code.Code, m
			resp.Topics = append(resp.Topics, t)
		}
		if req.Version >= 6 {
			for _, rt := range req.Topics {
				add(rt.Topic, rt.TopicID)
			}
		} else {
			for _, n := range req.TopicNames {
				add(&n, [16]byte{})
			}
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			t := kmsg.NewCreatePartitionsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = rt.Topic, code.Code, m
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	case *kmsg.AlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		resp.Version = req.Version
		for _, rr := range req.Resources {
			r := kmsg.NewAlterConfigsResponseResource()
			r.ResourceType, r.ResourceName, r.ErrorCode, r.ErrorMessage = rr.ResourceType, rr.ResourceName, code.Code, m
			resp.Resources = append(resp.Resources, r)
		}
		return resp
	case *kmsg.IncrementalAlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		resp.Version = req.Version
		for _, rr := range req.Resources {
			r := kmsg.NewIncrementalAlterConfigsResponseResource()
			r.ResourceType, r.ResourceName, r.ErrorCode, r.ErrorMessage = rr.ResourceType, rr.ResourceName, code.Code, m
			resp.Resources = append(resp.Resources, r)
		}
		return resp
	case *kmsg.UpdateFeaturesRequest:
		resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
		resp.Version = req.Version
		resp.ErrorCode, resp.ErrorMessage = code.Code, m
		return resp
	}
	return nil
}
