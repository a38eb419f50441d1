package client

import (
	"context"
	"fmt"
	"sort"
)

// SetGroupConfigs sets dynamic configs of one group (the GROUP config resource, KIP-848 /
// KIP-932), e.g. share.auto.offset.reset=earliest so a new share group reads a topic from
// its start. Configs not named keep their values. It is IncrementalAlterConfigs with
// OpSet for each name, in name order.
func (a *Admin) SetGroupConfigs(ctx context.Context, group string, configs map[string]string) error {
	names := make([]string, 0, len(configs))
	for n := range configs {
		names = append(names, n)
	}
	sort.Strings(names)
	set := make([]AlterConfig, 0, len(names))
	for _, n := range names {
		set = append(set, AlterConfig{Name: n, Op: OpSet, Value: configs[n]})
	}
	if _, err := a.IncrementalAlterConfigs(ctx, false, map[ConfigResource][]AlterConfig{{Type: GroupResource, Name: group}: set}); err != nil {
		return fmt.Errorf("client: set configs of group %s: %w", group, err)
	}
	return nil
}
