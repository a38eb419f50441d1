package broker

import (
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/groupconfig"
	"github.com/exactq/exactq/wire"
)

// groupConfigs holds the GROUP config resource's overrides (share.auto.offset.reset and the
// like): ConfigRecords of resource type GROUP in the metadata log, as Kafka keeps them.
type groupConfigs struct {
	b      *Broker
	broker *groupconfig.Broker
	mu     sync.Mutex // serializes changes: each is computed from the overrides before it
}

func openGroupConfigs(b *Broker, static map[string]string) (*groupConfigs, error) {
	gb, err := groupconfig.NewBroker(static)
	if err != nil {
		return nil, err
	}
	return &groupConfigs{b: b, broker: gb}, nil
}

// overrides is a group's explicit configs in the image (not to be changed).
func (gc *groupConfigs) overrides(groupID string) map[string]string {
	im, _ := gc.b.image()
	return im.Configs[metadata.ConfigResource{Type: metadata.ResourceGroup, Name: groupID}]
}

// Resolve returns a group's effective configuration.
func (gc *groupConfigs) Resolve(groupID string) groupconfig.Resolved {
	return gc.broker.Resolve(gc.overrides(groupID))
}

func (gc *groupConfigs) describe(groupID string, names []string, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	return gc.broker.Describe(gc.overrides(groupID), names, docs)
}

// alter applies IncrementalAlterConfigs operations to one group and makes them durable.
func (gc *groupConfigs) alter(groupID string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) *adminError {
	return gc.change(groupID, validateOnly, func(cur map[string]string) (map[string]string, error) {
		return gc.broker.ApplyIncremental(cur, ops)
	})
}

// replace applies a legacy AlterConfigs request (the configs given become the group's whole
// override set) and makes it durable.
func (gc *groupConfigs) replace(groupID string, configs []kmsg.AlterConfigsRequestResourceConfig, validateOnly bool) *adminError {
	return gc.change(groupID, validateOnly, func(map[string]string) (map[string]string, error) {
		return gc.broker.ApplyAlter(configs)
	})
}

// change validates a group's new override set, computed from the current one, and unless
// validateOnly makes it durable and live.
func (gc *groupConfigs) change(groupID string, validateOnly bool, compute func(cur map[string]string) (map[string]string, error)) *adminError {
	if groupID == "" {
		return newAdminError(kerr.InvalidRequest, "Group name must not be empty")
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	cur := gc.overrides(groupID)
	next, err := compute(maps.Clone(cur))
	if err != nil {
		var ce *groupconfig.Error
		if errors.As(err, &ce) {
			return &adminError{err: ce.Kind, msg: ce.Message}
		}
		return newAdminError(kerr.InvalidConfig, "%v", err)
	}
	if validateOnly {
		return nil
	}
	recs := configRecords(metadata.ResourceGroup, groupID, cur, next)
	if len(recs) == 0 {
		return nil
	}
	if _, err := gc.b.propose(recs...); err != nil {
		return newAdminError(kerr.KafkaStorageError, "%v", err)
	}
	return nil
}

// configRecords are the ConfigRecords that turn a resource's overrides cur into next: a
// value for each key set or changed, a null value for each key removed, in key order.
func configRecords(resourceType int8, name string, cur, next map[string]string) []wire.MetadataRecord {
	var out []wire.MetadataRecord
	for _, k := range slices.Sorted(maps.Keys(next)) {
		if v, ok := cur[k]; !ok || v != next[k] {
			v := next[k]
			out = append(out, &wire.ConfigRecord{ResourceType: resourceType, ResourceName: name, Name: k, Value: &v})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		if _, ok := next[k]; !ok {
			out = append(out, &wire.ConfigRecord{ResourceType: resourceType, ResourceName: name, Name: k})
		}
	}
	return out
}
