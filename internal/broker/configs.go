package broker

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
			res.Configs = b.groupCfg.broker.DescribeConfigs(b.groupCfg.overrides(rr.ResourceName), rr.ConfigNames, r.IncludeSynonyms, r.IncludeDocumentation)
		default:
			res.ErrorCode = kerr.InvalidRequest.Code
			res.ErrorMessage = strPtr("exactq does not serve configs of resource type " + rr.ResourceType.String())
		}
		resp.Resources = append(resp.Resources, res)
	}
	return server.Reply{Resp: resp}
}
