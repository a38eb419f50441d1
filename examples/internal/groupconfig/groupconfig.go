// Package groupconfig sets share-group configs for the eos examples. kadm has no call for
// group configs (KIP-848/932 GROUP resources), so it sends IncrementalAlterConfigs itself.
package groupconfig

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Set sets each of configs on group (IncrementalAlterConfigs, SET), through a kgo client
// of brokers with opts.
func Set(ctx context.Context, brokers []string, opts []kgo.Opt, group string, configs map[string]string) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for name, value := range configs {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value, cfg.Op = name, kmsg.StringPtr(value), kmsg.IncrementalAlterConfigOpSet
		res.Configs = append(res.Configs, cfg)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("configs of group %s: %w", group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("configs of group %s: %w", group, err)
		}
	}
	return nil
}

// ReadFromEarliest sets share.auto.offset.reset=earliest on group, so that it reads the
// records produced before it existed.
func ReadFromEarliest(ctx context.Context, brokers []string, opts []kgo.Opt, group string) error {
	return Set(ctx, brokers, opts, group, map[string]string{"share.auto.offset.reset": "earliest"})
}
