package testbroker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SetGroupConfigs sets dynamic configs of group (kv: name, value, name, value, ...) with
// one IncrementalAlterConfigs on the GROUP resource, which kadm has no call for. It
// returns the request's error, or the broker's refusal as its *kerr.Error (wrapped with
// the broker's message when it sent one), so callers can match it with errors.Is.
func SetGroupConfigs(ctx context.Context, cl *kgo.Client, group string, kv ...string) error {
	if len(kv)%2 != 0 {
		return fmt.Errorf("testbroker: SetGroupConfigs takes name, value pairs; got %d strings", len(kv))
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = kv[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Resources) != 1 {
		return fmt.Errorf("IncrementalAlterConfigs answered %d resources for 1", len(resp.Resources))
	}
	r := resp.Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		if r.ErrorMessage != nil && *r.ErrorMessage != "" {
			return fmt.Errorf("%w: %s", err, *r.ErrorMessage)
		}
		return err
	}
	return nil
}
