package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

func alterGroupConfig(t *testing.T, cl *kgo.Client, group, name, value string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, &value
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0].ErrorCode
}

func describeGroupConfig(t *testing.T, cl *kgo.Client, group, name string) string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, []string{name}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("describe group config: %v %+v", err, resp)
	}
	return *resp.Resources[0].Configs[0].Value
}

// Group configs (the share.* settings users set before share consumers join) are
// validated against the broker's bounds and survive a restart.
func TestGroupConfigsPersistAndValidate(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	if got := describeGroupConfig(t, cl, "sg", "share.auto.offset.reset"); got != "latest" {
		t.Fatalf("default share.auto.offset.reset = %q", got)
	}
	if code := alterGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatalf("set: %v", kerr.ErrorForCode(code))
	}
	if code := alterGroupConfig(t, cl, "sg", "share.record.lock.duration.ms", "1000"); code != kerr.InvalidConfig.Code {
		t.Fatalf("lock duration below the broker minimum: %v", kerr.ErrorForCode(code))
	}
	if code := alterGroupConfig(t, cl, "sg", "share.no.such.config", "1"); code != kerr.InvalidConfig.Code {
		t.Fatalf("unknown config: %v", kerr.ErrorForCode(code))
	}
	tb.Restart()
	cl = newClient(t, tb.Addr)
	if got := describeGroupConfig(t, cl, "sg", "share.auto.offset.reset"); got != "earliest" {
		t.Fatalf("after restart share.auto.offset.reset = %q, want earliest", got)
	}
}
