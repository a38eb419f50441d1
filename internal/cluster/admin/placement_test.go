package admin_test

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
)

func replicasOf(t *testing.T, im *metadata.Image, topic string) [][]int32 {
	t.Helper()
	tp := im.Topic(topic)
	if tp == nil {
		t.Fatalf("no topic %s", topic)
	}
	var out [][]int32
	for _, p := range tp.Partitions {
		out = append(out, p.Replicas)
	}
	return out
}

func applyAll(t *testing.T, im *metadata.Image, groups [][]wire.MetadataRecord) *metadata.Image {
	t.Helper()
	for _, g := range groups {
		next, _, err := metadata.Apply(im, g)
		if err != nil {
			t.Fatal(err)
		}
		im = next
	}
	return im
}

func counter() func() metadata.TopicID {
	var n byte
	return func() metadata.TopicID { n++; return metadata.TopicID{n} }
}

// TestStripedPlacement: partition k of a request is led by Brokers[(Start+k) % n], its
// followers the next brokers; the stripe runs on across a request's topics and into
// CreatePartitions from the start given there.
func TestStripedPlacement(t *testing.T) {
	cfg := propConfig(t)
	cfg.MaxBrokerPartitions = 100
	pl := admin.Placement{Brokers: []int32{7, 3, 5}, Start: 1}
	groups, resp := admin.CreateTopics(metadata.Empty(), createReq(false,
		topicSpec{name: "x", partitions: 4, rf: 2}, topicSpec{name: "y", partitions: 2, rf: 3}), "t", pl, cfg, counter())
	for _, st := range resp.Topics {
		if st.ErrorCode != 0 {
			t.Fatalf("%s: %d %s", st.Topic, st.ErrorCode, *st.ErrorMessage)
		}
	}
	im := applyAll(t, metadata.Empty(), groups)
	if got, want := replicasOf(t, im, "x"), [][]int32{{3, 5}, {5, 7}, {7, 3}, {3, 5}}; !reflect.DeepEqual(got, want) {
		t.Errorf("x placed %v, want %v", got, want)
	}
	if got, want := replicasOf(t, im, "y"), [][]int32{{5, 7, 3}, {7, 3, 5}}; !reflect.DeepEqual(got, want) {
		t.Errorf("y placed %v, want %v", got, want)
	}
	groups, gresp := admin.CreatePartitions(im, growReq(false, growSpec{topic: "x", count: 6}), admin.Placement{Brokers: []int32{7, 3, 5}, Start: 2}, cfg)
	if gresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("grow: %s", *gresp.Topics[0].ErrorMessage)
	}
	im = applyAll(t, im, groups)
	if got, want := replicasOf(t, im, "x")[4:], [][]int32{{5, 7}, {7, 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("x grown onto %v, want %v", got, want)
	}
	// The first replica leads, every replica is in the ISR.
	for _, p := range im.Topic("y").Partitions {
		if p.Leader != p.Replicas[0] || !reflect.DeepEqual(p.ISR, p.Replicas) {
			t.Errorf("partition %+v", p)
		}
	}
}

// TestSeveralBrokers: the answers that depend on how many brokers there are.
func TestSeveralBrokers(t *testing.T) {
	cfg := propConfig(t)
	three := admin.Placement{Brokers: []int32{1, 2, 3}}
	existing := applyAll(t, metadata.Empty(), func() [][]wire.MetadataRecord {
		g, _ := admin.CreateTopics(metadata.Empty(), createReq(false, topicSpec{name: "t", partitions: 1, rf: 3}), "c", three, cfg, counter())
		return g
	}())
	for _, c := range []struct {
		name  string
		cfg   func(admin.Config) admin.Config
		pl    admin.Placement
		topic topicSpec
		code  *kerr.Error
		msg   string
	}{
		{name: "factor above the brokers", pl: three, topic: topicSpec{name: "n", partitions: 1, rf: 4}, code: kerr.InvalidReplicationFactor,
			msg: "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached because only 3 broker(s) are registered."},
		{name: "no brokers", pl: admin.Placement{}, topic: topicSpec{name: "n", partitions: 1, rf: 1}, code: kerr.InvalidReplicationFactor,
			msg: "Unable to replicate the partition 1 time(s): The target replication factor of 1 cannot be reached because only 0 broker(s) are registered."},
		{name: "not replicated yet", cfg: func(c admin.Config) admin.Config { c.MaxReplicationFactor = 1; return c }, pl: three,
			topic: topicSpec{name: "n", partitions: 1, rf: 2}, code: kerr.InvalidReplicationFactor, msg: "Replication factor 2 is above 1: exactq does not replicate partitions yet."},
		{name: "assignment to unknown", pl: three, topic: topicSpec{name: "n", partitions: -1, rf: -1, assignment: [][]int32{{1, 4}}}, code: kerr.InvalidReplicaAssignment,
			msg: "Replica assignment for partition 0 names brokers that do not exist; this cluster has only nodes 1, 2, 3"},
		{name: "assignment sizes", pl: three, topic: topicSpec{name: "n", partitions: -1, rf: -1, assignment: [][]int32{{1, 2}, {3}}}, code: kerr.InvalidReplicaAssignment,
			msg: "All partitions should have the same number of replicas"},
		{name: "assignment of three", pl: three, topic: topicSpec{name: "n", partitions: -1, rf: -1, assignment: [][]int32{{3, 1, 2}}}},
		// Each broker holds a replica of t-0; 5 more partitions at factor 3 would put 6 on each.
		{name: "cap per broker", cfg: func(c admin.Config) admin.Config { c.MaxBrokerPartitions = 5; return c }, pl: three,
			topic: topicSpec{name: "n", partitions: 5, rf: 3}, code: kerr.PolicyViolation,
			msg: "Adding 5 partition(s) would exceed this broker's limit of 5 partitions (max.broker.partitions); it hosts 1."},
		{name: "cap fits", cfg: func(c admin.Config) admin.Config { c.MaxBrokerPartitions = 5; return c }, pl: three,
			topic: topicSpec{name: "n", partitions: 4, rf: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfg
			if c.cfg != nil {
				cfg = c.cfg(cfg)
			}
			groups, resp := admin.CreateTopics(existing, createReq(false, c.topic), "c", c.pl, cfg, counter())
			st := resp.Topics[0]
			if c.code == nil {
				if st.ErrorCode != 0 || len(groups) != 1 {
					t.Fatalf("refused: %d %v", st.ErrorCode, st.ErrorMessage)
				}
				applyAll(t, existing, groups)
				return
			}
			if st.ErrorCode != c.code.Code || st.ErrorMessage == nil || *st.ErrorMessage != c.msg || len(groups) != 0 {
				t.Fatalf("answer %d %v, want %d %q", st.ErrorCode, deref(st.ErrorMessage), c.code.Code, c.msg)
			}
		})
	}
	// New partitions keep the topic's factor.
	groups, resp := admin.CreatePartitions(existing, growReq(false, growSpec{topic: "t", count: 2, assignment: [][]int32{{2}}}), three, cfg)
	if st := resp.Topics[0]; st.ErrorCode != kerr.InvalidReplicaAssignment.Code || len(groups) != 0 {
		t.Fatalf("a one-replica partition for a factor-3 topic: %+v", st)
	}
	groups, resp = admin.CreatePartitions(existing, growReq(false, growSpec{topic: "t", count: 2}), admin.Placement{Brokers: []int32{1, 2}}, cfg)
	if st := resp.Topics[0]; st.ErrorCode != kerr.InvalidReplicationFactor.Code || len(groups) != 0 {
		t.Fatalf("a factor-3 topic grown over two brokers: %+v", st)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
