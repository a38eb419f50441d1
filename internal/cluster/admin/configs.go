package admin

import (
	"errors"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/groupconfig"
	"github.com/exactq/exactq/internal/topicconfig"
	"github.com/exactq/exactq/wire"
)

// ConfigRecords are the ConfigRecords that turn a resource's configs from cur into next,
// by config name: a value for each config set or changed, a null for each removed.
func ConfigRecords(resourceType int8, resource string, cur, next map[string]string) []wire.MetadataRecord {
	var out []wire.MetadataRecord
	names := slices.Sorted(maps.Keys(cur))
	for n := range next {
		if _, ok := cur[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		v, set := next[name]
		if old, had := cur[name]; set && had && old == v {
			continue
		}
		r := &wire.ConfigRecord{ResourceType: resourceType, ResourceName: resource, Name: name}
		if set {
			r.Value = &v
		}
		out = append(out, versioned(r))
	}
	return out
}

// configView is the image's configs as a request sees them part way: a later resource of
// a request sees what an earlier one changed, as the broker's did.
type configView struct {
	im      *metadata.Image
	changed map[metadata.ConfigResource]map[string]string
}

func (v *configView) get(res metadata.ConfigResource) map[string]string {
	if m, ok := v.changed[res]; ok {
		return m
	}
	return v.im.Configs[res]
}

// configAdminError is a topicconfig error as the response carries it.
func configAdminError(err error) *adminError {
	var ce *topicconfig.Error
	if errors.As(err, &ce) {
		return &adminError{err: kerr.ErrorForCode(ce.Code()).(*kerr.Error), msg: ce.Message}
	}
	return newAdminError(kerr.InvalidConfig, "%v", err)
}

// alterTopic checks a topic's new override set, computed from its current one, and
// returns the records that make it so (none when validateOnly).
func (v *configView) alterTopic(name string, validateOnly bool, compute func(cur topicconfig.Set) (topicconfig.Set, error)) ([]wire.MetadataRecord, *adminError) {
	if err := topicconfig.ValidateTopicName(name); err != nil {
		return nil, newAdminError(kerr.InvalidTopicException, "%v", err)
	}
	if v.im.Topic(name) == nil {
		return nil, newAdminError(kerr.UnknownTopicOrPartition, "Topic '%s' does not exist.", name)
	}
	return v.change(metadata.ConfigResource{Type: metadata.ResourceTopic, Name: name}, validateOnly, func(cur map[string]string) (map[string]string, error) {
		return compute(topicconfig.Set(cur).Clone())
	}, configAdminError)
}

// alterGroup is alterTopic for a group's configs.
func (v *configView) alterGroup(group string, validateOnly bool, compute func(cur map[string]string) (map[string]string, error)) ([]wire.MetadataRecord, *adminError) {
	if group == "" {
		return nil, newAdminError(kerr.InvalidRequest, "Group name must not be empty")
	}
	return v.change(metadata.ConfigResource{Type: metadata.ResourceGroup, Name: group}, validateOnly, compute, func(err error) *adminError {
		var ce *groupconfig.Error
		if errors.As(err, &ce) {
			return &adminError{err: ce.Kind, msg: ce.Message}
		}
		return newAdminError(kerr.InvalidConfig, "%v", err)
	})
}

func (v *configView) change(res metadata.ConfigResource, validateOnly bool, compute func(cur map[string]string) (map[string]string, error), toAdmin func(error) *adminError) ([]wire.MetadataRecord, *adminError) {
	cur := v.get(res)
	next, err := compute(maps.Clone(cur))
	if err != nil {
		return nil, toAdmin(err)
	}
	if validateOnly {
		return nil, nil
	}
	v.changed[res] = next
	return ConfigRecords(res.Type, res.Name, cur, next), nil
}

func unsupportedAlter(rt kmsg.ConfigResourceType) *adminError {
	if rt == kmsg.ConfigResourceTypeBroker {
		return newAdminError(kerr.InvalidRequest, "exactq does not support dynamic broker configs; set them in the config file")
	}
	return newAdminError(kerr.InvalidRequest, "exactq does not serve configs of resource type %s", rt.String())
}

// alterResource is what AlterConfigs and IncrementalAlterConfigs do with one resource.
func (v *configView) alterResource(rt kmsg.ConfigResourceType, name string, validateOnly bool,
	topic func(cur topicconfig.Set) (topicconfig.Set, error), group func(cur map[string]string) (map[string]string, error)) ([]wire.MetadataRecord, *adminError) {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return v.alterTopic(name, validateOnly, topic)
	case kmsg.ConfigResourceTypeGroupConfig:
		return v.alterGroup(name, validateOnly, group)
	default:
		return nil, unsupportedAlter(rt)
	}
}

// AlterConfigs is the legacy AlterConfigs against im: each resource's configs become the
// ones given (topics and groups; other resource types are refused), one group of records
// per resource changed, and the response.
func AlterConfigs(im *metadata.Image, r *kmsg.AlterConfigsRequest, cfg Config) ([][]wire.MetadataRecord, *kmsg.AlterConfigsResponse) {
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	resp.Version = r.Version
	v := &configView{im: im, changed: map[metadata.ConfigResource]map[string]string{}}
	var groups [][]wire.MetadataRecord
	for _, rr := range r.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		recs, aerr := v.alterResource(rr.ResourceType, rr.ResourceName, r.ValidateOnly,
			func(topicconfig.Set) (topicconfig.Set, error) { return topicconfig.ApplyAlter(rr.Configs, cfg.Topic) },
			func(map[string]string) (map[string]string, error) { return cfg.Group.ApplyAlter(rr.Configs) })
		if len(recs) > 0 {
			groups = append(groups, recs)
		}
		res.ErrorCode, res.ErrorMessage = aerr.code()
		resp.Resources = append(resp.Resources, res)
	}
	return groups, resp
}

// IncrementalAlterConfigs is IncrementalAlterConfigs against im: each resource's
// operations applied to its current configs (topics and groups), one group of records per
// resource changed, and the response.
func IncrementalAlterConfigs(im *metadata.Image, r *kmsg.IncrementalAlterConfigsRequest, cfg Config) ([][]wire.MetadataRecord, *kmsg.IncrementalAlterConfigsResponse) {
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	resp.Version = r.Version
	v := &configView{im: im, changed: map[metadata.ConfigResource]map[string]string{}}
	var groups [][]wire.MetadataRecord
	for _, rr := range r.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		recs, aerr := v.alterResource(rr.ResourceType, rr.ResourceName, r.ValidateOnly,
			func(cur topicconfig.Set) (topicconfig.Set, error) {
				return topicconfig.ApplyIncremental(cur, rr.Configs, cfg.Topic)
			},
			func(cur map[string]string) (map[string]string, error) {
				return cfg.Group.ApplyIncremental(cur, rr.Configs)
			})
		if len(recs) > 0 {
			groups = append(groups, recs)
		}
		res.ErrorCode, res.ErrorMessage = aerr.code()
		resp.Resources = append(resp.Resources, res)
	}
	return groups, resp
}
