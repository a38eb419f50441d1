package broker

import (
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/groupconfig"
)

// groupConfigs reads the GROUP config resource's overrides (share.auto.offset.reset and the
// like): ConfigRecords of resource type GROUP in the metadata log, as Kafka keeps them. The
// controller changes them (admin.AlterConfigs, admin.IncrementalAlterConfigs).
type groupConfigs struct {
	b      *Broker
	broker *groupconfig.Broker
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
