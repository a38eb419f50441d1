package admin_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/topicconfig"
)

// CreateTopics answers each topic's configs as Kafka 4.4's controller does: a value taken
// from a broker synonym that is set is STATIC_BROKER_CONFIG, converted to the topic
// config's unit (log.retention.hours=100 is retention.ms 360000000), and the topic's own
// overrides are DYNAMIC_TOPIC_CONFIG.
func TestCreateTopicsAnswersEffectiveConfigs(t *testing.T) {
	cfg := propConfig(t)
	defaults, err := topicconfig.NewBrokerDefaults(map[string]string{"log.retention.hours": "100"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Topic = defaults
	req := createReq(false, topicSpec{name: "x", partitions: 1, rf: 1})
	req.Version = 7
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "cleanup.policy", kmsg.StringPtr("compact")
	req.Topics[0].Configs = append(req.Topics[0].Configs, c)
	_, resp := admin.CreateTopics(metadata.Empty(), req, "t", admin.Placement{Brokers: []int32{1}}, cfg, counter())
	st := resp.Topics[0]
	if st.ErrorCode != 0 {
		t.Fatalf("create: %d %v", st.ErrorCode, st.ErrorMessage)
	}
	got := map[string]kmsg.CreateTopicsResponseTopicConfig{}
	for _, c := range st.Configs {
		got[c.Name] = c
	}
	for name, want := range map[string]struct {
		value  string
		source kmsg.ConfigSource
	}{
		"retention.ms":   {"360000000", kmsg.ConfigSourceStaticBrokerConfig},
		"cleanup.policy": {"compact", kmsg.ConfigSourceDynamicTopicConfig},
	} {
		c, ok := got[name]
		if !ok || c.Value == nil || *c.Value != want.value || c.Source != int8(want.source) {
			t.Errorf("%s = %+v, want %s from %v", name, c, want.value, want.source)
		}
	}
}
