package broker_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// alterGroupConfig sets one group config and returns the resource's error code.
func alterGroupConfig(t *testing.T, cl *kgo.Client, group, name, value string) int16 {
	t.Helper()
	err := testbroker.SetGroupConfigs(ctxT(t), cl, group, name, value)
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
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

// The KIP-1191 dead-letter group configs are refused with INVALID_CONFIG by
// IncrementalAlterConfigs and AlterConfigs (exactq dead-letters nothing yet, and a config is
// never accepted and ignored) and DescribeConfigs does not list them. Before the fix both
// were accepted, stored and described; AlterConfigs refused every GROUP resource.
func TestDLQGroupConfigsRefused(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	for name, value := range map[string]string{"errors.deadletterqueue.topic.name": "dlq", "errors.deadletterqueue.copy.record.enable": "true"} {
		if code := alterGroupConfig(t, cl, "sg", name, value); code != kerr.InvalidConfig.Code {
			t.Errorf("IncrementalAlterConfigs %s: %v, want INVALID_CONFIG", name, kerr.ErrorForCode(code))
		}
		if code, msg := alterGroupConfigLegacy(t, cl, "sg", name, value); code != kerr.InvalidConfig.Code || !strings.Contains(msg, "dead-letter") {
			t.Errorf("AlterConfigs %s: %v %q, want INVALID_CONFIG saying there is no dead-letter queue", name, kerr.ErrorForCode(code), msg)
		}
	}
	// Legacy AlterConfigs sets what exactq supports, durably.
	if code, msg := alterGroupConfigLegacy(t, cl, "sg", "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatalf("AlterConfigs share.auto.offset.reset: %v %s", kerr.ErrorForCode(code), msg)
	}
	tb.Restart()
	cl = newClient(t, tb.Addr)
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe: %v %+v", err, resp)
	}
	for _, c := range resp.Resources[0].Configs {
		if strings.HasPrefix(c.Name, "errors.deadletterqueue.") && !c.ReadOnly {
			t.Errorf("DescribeConfigs lists %s as writable", c.Name)
		}
		if c.Name == "share.auto.offset.reset" && *c.Value != "earliest" {
			t.Errorf("share.auto.offset.reset after restart = %s, want earliest", *c.Value)
		}
	}
}

// alterGroupConfigLegacy sets one group config with legacy AlterConfigs (which replaces the
// group's whole override set) and returns the resource's error code and message.
func alterGroupConfigLegacy(t *testing.T, cl *kgo.Client, group, name, value string) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrAlterConfigsRequest()
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, &value
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Resources[0]
	msg := ""
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	return r.ErrorCode, msg
}
