package controller

import (
	"bytes"
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What a broker sends a controller on another node (docs/architecture.md, "Inter-broker
// client"): the Kafka requests as they are, and the two creations without a Kafka message
// of their own (AutoCreateTopicRequest, CreateInternalTopicRequest) as a one-topic
// CreateTopics at its highest version carrying creationTag, as Kafka's broker sends its
// controller a CreateTopics for them. A client's CreateTopics never carries the tag: the
// broker clears its unknown tags before forwarding it (StripInternalTag), so only a peer
// can create an internal topic.

// creationTag is the CreateTopics tagged field (outside Kafka's tags) whose one byte says
// which internal creation the request is: creationAuto or creationInternal.
const creationTag = 0x7e51

const (
	creationAuto     = 1
	creationInternal = 2
)

// WireRequest is req as a Kafka request a controller on another node decodes back into it
// (FromWire): a kmsg request is itself, the internal creations a tagged CreateTopics.
func WireRequest(req any) kmsg.Request {
	switch req := req.(type) {
	case *AutoCreateTopicRequest:
		return creationRequest(creationAuto, req.Name, -1, nil)
	case *CreateInternalTopicRequest:
		return creationRequest(creationInternal, req.Name, req.Partitions, req.Configs)
	case kmsg.Request:
		return req
	}
	return nil
}

func creationRequest(kind byte, name string, partitions int32, configs map[string]string) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.Version = r.MaxVersion()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, -1
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		v := configs[k]
		c.Name, c.Value = k, &v
		t.Configs = append(t.Configs, c)
	}
	r.Topics = []kmsg.CreateTopicsRequestTopic{t}
	r.UnknownTags.Set(creationTag, []byte{kind})
	return r
}

// FromWire is the controller request a decoded Kafka request stands for: an internal
// creation for a tagged CreateTopics (WireRequest's), req itself otherwise.
func FromWire(req kmsg.Request) any {
	ct, ok := req.(*kmsg.CreateTopicsRequest)
	if !ok || len(ct.Topics) != 1 {
		return req
	}
	var kind []byte
	ct.UnknownTags.Each(func(k uint32, v []byte) {
		if k == creationTag {
			kind = v
		}
	})
	t := ct.Topics[0]
	switch {
	case bytes.Equal(kind, []byte{creationAuto}):
		return &AutoCreateTopicRequest{Name: t.Topic}
	case bytes.Equal(kind, []byte{creationInternal}):
		configs := map[string]string{}
		for _, c := range t.Configs {
			if c.Value != nil {
				configs[c.Name] = *c.Value
			}
		}
		return &CreateInternalTopicRequest{Name: t.Topic, Partitions: t.NumPartitions, Configs: configs}
	}
	return req
}

// StripInternalTag clears the unknown tagged fields of a client's CreateTopics, so that a
// client cannot pass it off as a broker's internal creation.
func StripInternalTag(req kmsg.Request) {
	if ct, ok := req.(*kmsg.CreateTopicsRequest); ok {
		ct.UnknownTags = kmsg.Tags{}
	}
}

// HandleAny answers a decoded controller request as Handle does, an internal creation
// (FromWire) included.
func (d *Driver) HandleAny(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	switch r := FromWire(req).(type) {
	case *AutoCreateTopicRequest:
		return d.ask(ctx, r)
	case *CreateInternalTopicRequest:
		return d.ask(ctx, r)
	}
	return d.Handle(ctx, req)
}

// NotController reports whether resp is a controller's NOT_CONTROLLER answer (the node
// does not lead, or stopped leading before the request's records were applied): the
// request was not decided there, and a broker retries it at the current controller.
// An admin request's answer carries the code in every topic or resource (ErrorResponse).
func NotController(resp kmsg.Response) bool {
	nc := kerr.NotController.Code
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode == nc
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode == nc
	case *kmsg.UnregisterBrokerResponse:
		return r.ErrorCode == nc
	case *kmsg.AllocateProducerIDsResponse:
		return r.ErrorCode == nc
	case *kmsg.UpdateFeaturesResponse:
		return r.ErrorCode == nc
	case *kmsg.CreateTopicsResponse:
		return len(r.Topics) > 0 && r.Topics[0].ErrorCode == nc
	case *kmsg.DeleteTopicsResponse:
		return len(r.Topics) > 0 && r.Topics[0].ErrorCode == nc
	case *kmsg.CreatePartitionsResponse:
		return len(r.Topics) > 0 && r.Topics[0].ErrorCode == nc
	case *kmsg.AlterConfigsResponse:
		return len(r.Resources) > 0 && r.Resources[0].ErrorCode == nc
	case *kmsg.IncrementalAlterConfigsResponse:
		return len(r.Resources) > 0 && r.Resources[0].ErrorCode == nc
	case *kmsg.CreateACLsResponse:
		return len(r.Results) > 0 && r.Results[0].ErrorCode == nc
	case *kmsg.DeleteACLsResponse:
		return len(r.Results) > 0 && r.Results[0].ErrorCode == nc
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		return len(r.Results) > 0 && r.Results[0].ErrorCode == nc
	}
	return false
}
