package broker

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/internal/topicconfig"
)

func strPtr(s string) *string { return &s }

func (b *Broker) handleDescribeConfigs(req *server.Request, r *kmsg.DescribeConfigsRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if err := validateTopicName(rr.ResourceName); err != nil {
				res.ErrorCode, res.ErrorMessage = kerr.InvalidTopicException.Code, strPtr(err.Error())
				break
			}
			t := b.topics.get(rr.ResourceName)
			if t == nil {
				res.ErrorCode = kerr.UnknownTopicOrPartition.Code
				res.ErrorMessage = strPtr("Topic '" + rr.ResourceName + "' does not exist.")
				break
			}
			t.mu.RLock()
			overrides := t.configs
			t.mu.RUnlock()
			res.Configs = topicconfig.Describe(overrides, b.defaults.topic, rr.ConfigNames, r.IncludeSynonyms, r.IncludeDocumentation)
		case kmsg.ConfigResourceTypeBroker:
			switch rr.ResourceName {
			case "": // the cluster-wide default resource: no dynamic defaults are set
			case strconv.Itoa(int(b.cfg.NodeID)):
				res.Configs = b.defaults.topic.DescribeBroker(rr.ConfigNames, r.IncludeSynonyms, r.IncludeDocumentation)
			default:
				res.ErrorCode = kerr.InvalidRequest.Code
				res.ErrorMessage = strPtr("Unexpected broker id, expected " + strconv.Itoa(int(b.cfg.NodeID)) + " or empty string, but received " + rr.ResourceName)
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			res.Configs = b.groupCfg.describe(rr.ResourceName, rr.ConfigNames, r.IncludeDocumentation)
		default:
			res.ErrorCode = kerr.InvalidRequest.Code
			res.ErrorMessage = strPtr("exactq does not serve configs of resource type " + rr.ResourceType.String())
		}
		resp.Resources = append(resp.Resources, res)
	}
	return server.Reply{Resp: resp}
}

// alterTopicConfigs validates a topic's new override set and, unless validateOnly, makes it
// durable and live. compute derives the new set from the current one.
func (b *Broker) alterTopicConfigs(name string, validateOnly bool, compute func(cur topicconfig.Set) (topicconfig.Set, error)) *adminError {
	if err := validateTopicName(name); err != nil {
		return newAdminError(kerr.InvalidTopicException, "%v", err)
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.topics.get(name)
	if t == nil {
		return newAdminError(kerr.UnknownTopicOrPartition, "Topic '%s' does not exist.", name)
	}
	t.mu.RLock()
	old := t.configs // replaced whole on a change, never written to
	t.mu.RUnlock()
	cur := topicconfig.Set(old).Clone()
	next, err := compute(cur)
	if err != nil {
		return configAdminError(err)
	}
	if validateOnly {
		return nil
	}
	settings, err := b.resolveSettings(next)
	if err != nil {
		return configAdminError(err)
	}
	if len(next) == 0 {
		next = nil
	}
	if recs := configRecords(metadata.ResourceTopic, t.name, old, next); len(recs) > 0 {
		if _, err := b.propose(recs...); err != nil {
			b.storageError("alter topic configs", err, "topic", t.name)
			return newAdminError(kerr.KafkaStorageError, "%v", err)
		}
	}
	t.mu.Lock()
	t.configs, t.settings = next, settings
	parts := t.partitions
	t.mu.Unlock()
	for _, p := range parts {
		p.log.SetConfig(settings.log)
	}
	return nil
}

func unsupportedAlter(rt kmsg.ConfigResourceType) *adminError {
	if rt == kmsg.ConfigResourceTypeBroker {
		return newAdminError(kerr.InvalidRequest, "exactq does not support dynamic broker configs; set them in the config file")
	}
	return newAdminError(kerr.InvalidRequest, "exactq does not serve configs of resource type %s", rt.String())
}

func (b *Broker) handleAlterConfigs(req *server.Request, r *kmsg.AlterConfigsRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range r.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = b.alterResource(rr.ResourceType, rr.ResourceName, r.ValidateOnly,
			func(topicconfig.Set) (topicconfig.Set, error) {
				return topicconfig.ApplyAlter(rr.Configs, b.defaults.topic)
			},
			func() *adminError { return b.groupCfg.replace(rr.ResourceName, rr.Configs, r.ValidateOnly) })
		resp.Resources = append(resp.Resources, res)
	}
	return server.Reply{Resp: resp}
}

// alterResource is what AlterConfigs and IncrementalAlterConfigs do with one resource: a
// topic's configs become what topic computes from the current ones, a group's are
// changed by group, any other resource type is refused. It returns the resource's error
// code and message (0 and nil on success).
func (b *Broker) alterResource(rt kmsg.ConfigResourceType, name string, validateOnly bool,
	topic func(cur topicconfig.Set) (topicconfig.Set, error), group func() *adminError) (int16, *string) {
	var aerr *adminError
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		aerr = b.alterTopicConfigs(name, validateOnly, topic)
	case kmsg.ConfigResourceTypeGroupConfig:
		aerr = group()
	default:
		aerr = unsupportedAlter(rt)
	}
	if aerr == nil {
		return 0, nil
	}
	return aerr.err.Code, strPtr(aerr.msg)
}

func (b *Broker) handleIncrementalAlterConfigs(req *server.Request, r *kmsg.IncrementalAlterConfigsRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = b.alterResource(rr.ResourceType, rr.ResourceName, r.ValidateOnly,
			func(cur topicconfig.Set) (topicconfig.Set, error) {
				return topicconfig.ApplyIncremental(cur, rr.Configs, b.defaults.topic)
			},
			func() *adminError { return b.groupCfg.alter(rr.ResourceName, rr.Configs, r.ValidateOnly) })
		resp.Resources = append(resp.Resources, res)
	}
	return server.Reply{Resp: resp}
}
