package conformance

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Topic admin refusals as Kafka words them. A client shows the broker's ErrorMessage to
// its user (kadm keeps it in ErrMessage, the Java AdminClient puts it in the exception),
// so the code alone is not the whole answer: these are Kafka 4.4's messages
// (ZkAdminManager/ControllerManager, ReplicationControlManager, ConfigurationControlManager).

// TestCreateTopicTwiceMessage: a second CreateTopics of a name is TOPIC_ALREADY_EXISTS
// with "Topic '<name>' already exists.", and the first topic is untouched.
func TestCreateTopicTwiceMessage(t *testing.T) {
	e := newEnv(t, nil)
	id := e.createTopic("demo", 2)
	// kadm's CreateTopic returns the topic's error as err as well; the message is in resp.
	resp, _ := e.adm.CreateTopic(e.ctx(), 1, 1, nil, "demo")
	if !errors.Is(resp.Err, kerr.TopicAlreadyExists) || resp.ErrMessage != "Topic 'demo' already exists." {
		t.Fatalf("second create: %v, message %q; want TOPIC_ALREADY_EXISTS, \"Topic 'demo' already exists.\"", resp.Err, resp.ErrMessage)
	}
	td, err := e.adm.ListTopics(e.ctx(), "demo")
	if err != nil || td["demo"].ID != id || len(td["demo"].Partitions) != 2 {
		t.Fatalf("after the refused create: %+v %v; want the first topic (id %x, 2 partitions)", td["demo"], err, id)
	}
}

// TestCreatePartitionsCannotShrinkOrStay: CreatePartitions to fewer partitions than the
// topic has, or to as many, is INVALID_PARTITIONS with Kafka's message, and the topic keeps
// its partitions.
func TestCreatePartitionsCannotShrinkOrStay(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("parts", 4)
	for _, tc := range []struct {
		count int
		msg   string
	}{
		{2, "Topic currently has 4 partitions, which is higher than the requested 2."},
		{4, "Topic already has 4 partitions."},
	} {
		resp, err := e.adm.UpdatePartitions(e.ctx(), tc.count, "parts")
		if err != nil {
			t.Fatal(err)
		}
		r, err := resp.On("parts", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(r.Err, kerr.InvalidPartitions) || r.ErrMessage != tc.msg {
			t.Errorf("CreatePartitions to %d: %v, message %q; want INVALID_PARTITIONS, %q", tc.count, r.Err, r.ErrMessage, tc.msg)
		}
	}
	if td, err := e.adm.ListTopics(e.ctx(), "parts"); err != nil || len(td["parts"].Partitions) != 4 {
		t.Fatalf("after refused CreatePartitions: %d partitions, %v; want 4", len(td["parts"].Partitions), err)
	}
}

// TestAlterUnknownTopicConfig: IncrementalAlterConfigs setting a name that is no topic
// config is INVALID_CONFIG ("Unknown topic config name: ..."), and the valid change in the
// same request is not applied either (Kafka validates a resource's changes as a whole).
func TestAlterUnknownTopicConfig(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("cfg", 1)
	resp, err := e.adm.AlterTopicConfigs(e.ctx(), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("7200000")},
		{Op: kadm.SetConfig, Name: "no.such.config", Value: kadm.StringPtr("1")},
	}, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	r, err := resp.On("cfg", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Unknown topic config name: no.such.config"; !errors.Is(r.Err, kerr.InvalidConfig) || r.ErrMessage != want {
		t.Fatalf("alter no.such.config: %v, message %q; want INVALID_CONFIG, %q", r.Err, r.ErrMessage, want)
	}
	rcs, err := e.adm.DescribeTopicConfigs(e.ctx(), "cfg")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("cfg", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe: %v %v", err, rc.Err)
	}
	retention := "not described"
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			retention = c.MaybeValue()
		}
	}
	if retention != "604800000" {
		t.Fatalf("retention.ms = %q after a refused request, want the default 604800000", retention)
	}
}
