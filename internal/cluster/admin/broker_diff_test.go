package admin_test

import (
	"context"
	"crypto/rand"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/node"
	"github.com/exactq/exactq/internal/groupconfig"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/internal/topicconfig"
	"github.com/exactq/exactq/wire"
)

// testbrokerDefaults are the broker configs testbroker.Start sets, which the admin rules
// must be given too.
var testbrokerDefaults = map[string]string{
	"group.initial.rebalance.delay.ms":             "0",
	"offsets.topic.num.partitions":                 "5",
	"transaction.state.log.num.partitions":         "5",
	"share.coordinator.state.topic.num.partitions": "5",
}

// adminConfig is the admin rules' configuration from static broker configs, which must
// set max.broker.partitions.
func adminConfig(t *testing.T, static map[string]string) admin.Config {
	t.Helper()
	td, err := topicconfig.NewBrokerDefaults(static)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := groupconfig.NewBroker(static)
	if err != nil {
		t.Fatal(err)
	}
	maxParts, ok := td.MaxBrokerPartitions()
	if !ok {
		t.Fatal("max.broker.partitions is not set")
	}
	return admin.Config{Topic: td, Group: gb, MaxBrokerPartitions: int64(maxParts)}
}

// diff runs admin requests against a real single-node broker and against the admin
// functions over an image kept in step with it (the admin records applied after each
// request), and compares the responses: the admin rules must answer what the broker
// answers today, error codes and messages included.
type diff struct {
	t       *testing.T
	tb      *testbroker.Broker
	cfg     admin.Config
	im      *metadata.Image
	clients map[[2]int16]*kgo.Client // by pinned (key, version); {-1,-1}: newest versions
	ids     []metadata.TopicID       // topic ids the broker gave, for the admin side to reuse
}

const diffClientID = "admin-diff"

func newDiff(t *testing.T, configs map[string]string, opts ...testbroker.Option) *diff {
	static := map[string]string{}
	for k, v := range testbrokerDefaults {
		static[k] = v
	}
	for k, v := range configs {
		static[k] = v
	}
	cfg := adminConfig(t, static)
	cfg.MaxReplicationFactor = 1
	im, _, err := metadata.Apply(metadata.Empty(), append([]wire.MetadataRecord{&wire.ClusterRecord{ClusterID: "c"}}, admin.InitialFeatures()...))
	if err != nil {
		t.Fatal(err)
	}
	return &diff{
		t:       t,
		tb:      testbroker.Start(t, append([]testbroker.Option{testbroker.WithoutAutoCreate(), testbroker.WithConfig(configs)}, opts...)...),
		cfg:     cfg,
		im:      im,
		clients: map[[2]int16]*kgo.Client{},
	}
}

// client returns a client that sends key at most at version (-1: the newest).
func (d *diff) client(key, version int16) *kgo.Client {
	k := [2]int16{key, version}
	if cl := d.clients[k]; cl != nil {
		return cl
	}
	opts := []kgo.Opt{kgo.SeedBrokers(d.tb.Addr), kgo.ClientID(diffClientID)}
	if version >= 0 {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(key, version)
		opts = append(opts, kgo.MaxVersions(vs))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(cl.Close)
	d.clients[k] = cl
	return cl
}

// broker sends req to the broker (at most at version) and returns its response; req's
// Version is then the one sent.
func (d *diff) broker(req kmsg.Request, version int16) kmsg.Response {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := d.client(req.Key(), version).Request(ctx, req)
	if err != nil {
		d.t.Fatalf("%s to the broker: %v", kmsg.NameForKey(req.Key()), err)
	}
	req.SetVersion(resp.GetVersion())
	return resp
}

// asSent is resp as the client decodes it at its version: fields the version lacks take
// their defaults, as they do in the broker's response.
func asSent(t *testing.T, resp kmsg.Response) kmsg.Response {
	t.Helper()
	out := kmsg.ResponseForKey(resp.Key())
	out.SetVersion(resp.GetVersion())
	if err := out.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("decoding the admin response: %v", err)
	}
	return out
}

// brokerTopicID asks the broker for a topic's id.
func (d *diff) brokerTopicID(topic string) metadata.TopicID {
	d.t.Helper()
	r := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	r.Topics = append(r.Topics, mt)
	resp := d.broker(r, -1).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		d.t.Fatalf("metadata of %s: %+v", topic, resp.Topics)
	}
	return resp.Topics[0].TopicID
}

// newID hands the admin side the ids the broker gave, in order.
func (d *diff) newID() metadata.TopicID {
	if len(d.ids) == 0 {
		var id metadata.TopicID
		rand.Read(id[:]) // the broker created fewer topics: the responses differ anyway
		return id
	}
	id := d.ids[0]
	d.ids = d.ids[1:]
	return id
}

// apply applies the admin side's record groups to the image, each on its own.
func (d *diff) apply(name string, groups [][]wire.MetadataRecord) {
	d.t.Helper()
	for i, g := range groups {
		im, _, err := metadata.Apply(d.im, g)
		if err != nil {
			d.t.Fatalf("%s: group %d refused by metadata.Apply: %v", name, i, err)
		}
		d.im = im
	}
}

func (d *diff) same(name string, got, want any) {
	d.t.Helper()
	if r, ok := got.(kmsg.Response); ok {
		got = asSent(d.t, r)
	}
	if !reflect.DeepEqual(got, want) {
		d.t.Errorf("%s:\nadmin  %+v\nbroker %+v", name, got, want)
	}
}

func (d *diff) createTopics(name string, version int16, r *kmsg.CreateTopicsRequest) {
	d.t.Helper()
	want := d.broker(r, version).(*kmsg.CreateTopicsResponse)
	d.ids = nil
	for _, t := range want.Topics {
		switch {
		case t.TopicID != [16]byte{}:
			d.ids = append(d.ids, t.TopicID)
		case t.ErrorCode == 0 && !r.ValidateOnly: // before v7: the id is in Metadata
			d.ids = append(d.ids, d.brokerTopicID(t.Topic))
		}
	}
	groups, got := admin.CreateTopics(d.im, r, diffClientID, admin.Placement{Brokers: []int32{1}}, d.cfg, d.newID)
	d.same(name, got, want)
	d.apply(name, groups)
}

// run sends req to the broker (at most at version), runs the admin side, compares the
// responses and applies the admin records.
func run[R kmsg.Response](d *diff, name string, version int16, req kmsg.Request, admin func() ([][]wire.MetadataRecord, R)) {
	d.t.Helper()
	want := d.broker(req, version)
	groups, got := admin()
	d.same(name, got, want)
	d.apply(name, groups)
}

func (d *diff) deleteTopics(name string, version int16, r *kmsg.DeleteTopicsRequest) {
	d.t.Helper()
	run(d, name, version, r, func() ([][]wire.MetadataRecord, *kmsg.DeleteTopicsResponse) {
		return admin.DeleteTopics(d.im, r, d.cfg)
	})
}

func (d *diff) createPartitions(name string, r *kmsg.CreatePartitionsRequest) {
	d.t.Helper()
	run(d, name, -1, r, func() ([][]wire.MetadataRecord, *kmsg.CreatePartitionsResponse) {
		return admin.CreatePartitions(d.im, r, admin.Placement{Brokers: []int32{1}}, d.cfg)
	})
}

func (d *diff) alterConfigs(name string, r *kmsg.AlterConfigsRequest) {
	d.t.Helper()
	run(d, name, -1, r, func() ([][]wire.MetadataRecord, *kmsg.AlterConfigsResponse) {
		return admin.AlterConfigs(d.im, r, d.cfg)
	})
}

func (d *diff) incrementalAlterConfigs(name string, r *kmsg.IncrementalAlterConfigsRequest) {
	d.t.Helper()
	run(d, name, -1, r, func() ([][]wire.MetadataRecord, *kmsg.IncrementalAlterConfigsResponse) {
		return admin.IncrementalAlterConfigs(d.im, r, d.cfg)
	})
}

func (d *diff) updateFeatures(name string, version int16, r *kmsg.UpdateFeaturesRequest) {
	d.t.Helper()
	run(d, name, version, r, func() ([][]wire.MetadataRecord, *kmsg.UpdateFeaturesResponse) {
		recs, _, resp := admin.UpdateFeatures(d.im, r, 1)
		return [][]wire.MetadataRecord{recs}, resp
	})
}

// sameImage stops the broker and checks the image the admin records built is the one its
// metadata log holds: topics, partitions, configs, features.
func (d *diff) sameImage() {
	d.t.Helper()
	d.tb.Stop()
	n, err := node.Open(context.Background(), node.Config{NodeID: 1, DataDir: d.tb.DataDir})
	if err != nil {
		d.t.Fatal(err)
	}
	files, _ := n.Image()
	if err := n.Close(); err != nil {
		d.t.Fatal(err)
	}
	d.same("topics by id", d.im.TopicsByID, withoutLeadership(files.TopicsByID))
	d.same("topics by name", d.im.TopicsByName, files.TopicsByName)
	d.same("configs", d.im.Configs, files.Configs)
	d.same("features", d.im.Features, files.Features)
}

// withoutLeadership is topics with each partition's leadership as created (leader the
// first replica, epochs 0): the broker's controlled shutdown at Stop fences it, and its
// controller, which created the topics, takes their leaders away with it.
func withoutLeadership(topics map[metadata.TopicID]*metadata.Topic) map[metadata.TopicID]*metadata.Topic {
	out := map[metadata.TopicID]*metadata.Topic{}
	for id, t := range topics {
		c := *t
		c.Partitions = nil
		for _, p := range t.Partitions {
			q := *p
			q.Leader, q.LeaderEpoch, q.PartitionEpoch = p.Replicas[0], 0, 0
			c.Partitions = append(c.Partitions, &q)
		}
		out[id] = &c
	}
	return out
}

// Request builders.

type topicSpec struct {
	name       string
	partitions int32
	rf         int16
	assignment [][]int32
	configs    map[string]*string
}

func createReq(validateOnly bool, specs ...topicSpec) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.ValidateOnly, r.TimeoutMillis = validateOnly, 10000
	for _, s := range specs {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = s.name, s.partitions, s.rf
		for i, rs := range s.assignment {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(i), rs
			t.ReplicaAssignment = append(t.ReplicaAssignment, a)
		}
		for k, v := range s.configs {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, v
			t.Configs = append(t.Configs, c)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

func deleteByName(names ...string) *kmsg.DeleteTopicsRequest {
	r := kmsg.NewPtrDeleteTopicsRequest()
	r.TimeoutMillis = 10000
	r.TopicNames = names
	for _, n := range names {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		r.Topics = append(r.Topics, t)
	}
	return r
}

func deleteByID(ids ...[16]byte) *kmsg.DeleteTopicsRequest {
	r := kmsg.NewPtrDeleteTopicsRequest()
	r.TimeoutMillis = 10000
	for _, id := range ids {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.TopicID = id
		r.Topics = append(r.Topics, t)
	}
	return r
}

type growSpec struct {
	topic      string
	count      int32
	assignment [][]int32
}

func growReq(validateOnly bool, specs ...growSpec) *kmsg.CreatePartitionsRequest {
	r := kmsg.NewPtrCreatePartitionsRequest()
	r.ValidateOnly, r.TimeoutMillis = validateOnly, 10000
	for _, s := range specs {
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic, t.Count = s.topic, s.count
		for _, rs := range s.assignment {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = rs
			t.Assignment = append(t.Assignment, a)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

type op struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

func incReq(validateOnly bool, rt kmsg.ConfigResourceType, resource string, ops ...op) *kmsg.IncrementalAlterConfigsRequest {
	r := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r.ValidateOnly = validateOnly
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = rt, resource
	for _, o := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = o.name, o.op, o.value
		res.Configs = append(res.Configs, c)
	}
	r.Resources = append(r.Resources, res)
	return r
}

func alterReq(validateOnly bool, rt kmsg.ConfigResourceType, resource string, kv map[string]*string) *kmsg.AlterConfigsRequest {
	r := kmsg.NewPtrAlterConfigsRequest()
	r.ValidateOnly = validateOnly
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = rt, resource
	for k, v := range kv {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, v
		res.Configs = append(res.Configs, c)
	}
	r.Resources = append(r.Resources, res)
	return r
}

func featuresReq(validateOnly bool, name string, level int16, upgradeType int8) *kmsg.UpdateFeaturesRequest {
	r := kmsg.NewPtrUpdateFeaturesRequest()
	r.ValidateOnly, r.TimeoutMillis = validateOnly, 10000
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType, u.AllowDowngrade = name, level, upgradeType, upgradeType != 1
	r.FeatureUpdates = append(r.FeatureUpdates, u)
	return r
}

var s = kmsg.StringPtr

func TestSameAnswersAsTheBroker(t *testing.T) {
	d := newDiff(t, map[string]string{"num.partitions": "2", "max.broker.partitions": "40"})

	// CreateTopics.
	d.createTopics("create", -1, createReq(false, topicSpec{name: "a", partitions: 3, rf: 1, configs: map[string]*string{"retention.ms": s("60000")}}))
	d.createTopics("create v4 (no configs answered)", 4, createReq(false, topicSpec{name: "v4", partitions: 1, rf: -1}))
	d.createTopics("exists", -1, createReq(false, topicSpec{name: "a", partitions: 1, rf: 1}))
	d.createTopics("collision in one request", -1, createReq(false, topicSpec{name: "x.y", partitions: 1, rf: 1}, topicSpec{name: "x_y", partitions: 1, rf: 1}))
	d.createTopics("bad names", -1, createReq(false, topicSpec{name: "bad name", partitions: 1, rf: 1}, topicSpec{name: "..", partitions: 1, rf: 1}, topicSpec{name: "", partitions: 1, rf: 1}))
	d.createTopics("partitions", -1, createReq(false, topicSpec{name: "p0", partitions: 0, rf: 1}, topicSpec{name: "pneg", partitions: -5, rf: 1}))
	d.createTopics("replication", -1, createReq(false, topicSpec{name: "r2", partitions: 1, rf: 2}, topicSpec{name: "r0", partitions: 1, rf: 0}, topicSpec{name: "rneg", partitions: 1, rf: -2}))
	d.createTopics("defaults", -1, createReq(false, topicSpec{name: "defaults", partitions: -1, rf: -1}))
	d.createTopics("assignments", -1, createReq(false,
		topicSpec{name: "assigned", partitions: -1, rf: -1, assignment: [][]int32{{1}, {1}}},
		topicSpec{name: "both", partitions: 2, rf: -1, assignment: [][]int32{{1}}},
		topicSpec{name: "elsewhere", partitions: -1, rf: -1, assignment: [][]int32{{1}, {2}}},
		topicSpec{name: "twice", partitions: -1, rf: -1, assignment: [][]int32{{1, 1}}},
		topicSpec{name: "empty", partitions: -1, rf: -1, assignment: [][]int32{{}}}))
	d.createTopics("duplicates", -1, createReq(false, topicSpec{name: "dup", partitions: 1, rf: 1}, topicSpec{name: "dup", partitions: 1, rf: 1}, topicSpec{name: "single", partitions: 1, rf: 1}))
	d.createTopics("internal", -1, createReq(false, topicSpec{name: "__consumer_offsets", partitions: 1, rf: 1}))
	d.createTopics("configs", -1, createReq(false,
		topicSpec{name: "badvalue", partitions: 1, rf: 1, configs: map[string]*string{"retention.ms": s("soon")}},
		topicSpec{name: "nullvalue", partitions: 1, rf: 1, configs: map[string]*string{"retention.ms": nil}},
		topicSpec{name: "unknown", partitions: 1, rf: 1, configs: map[string]*string{"no.such.config": s("1")}},
		topicSpec{name: "lags", partitions: 1, rf: 1, configs: map[string]*string{"min.compaction.lag.ms": s("10"), "max.compaction.lag.ms": s("5")}},
		topicSpec{name: "compacted", partitions: 1, rf: 1, configs: map[string]*string{"cleanup.policy": s("compact,delete"), "segment.bytes": s("1048576")}}))
	d.createTopics("validate only", -1, createReq(true, topicSpec{name: "vo", partitions: 2, rf: 1}, topicSpec{name: "a", partitions: 2, rf: 1}))
	d.createTopics("too many per request", -1, createReq(false, topicSpec{name: "big1", partitions: 6000, rf: 1}, topicSpec{name: "big2", partitions: 6000, rf: 1}))
	d.createTopics("over a topic's limit", -1, createReq(false, topicSpec{name: "huge", partitions: 100001, rf: 1}))
	// 13 partitions so far; the cap is 40.
	d.createTopics("the broker's cap", -1, createReq(false, topicSpec{name: "fits", partitions: 20, rf: 1}, topicSpec{name: "overflows", partitions: 10, rf: 1}, topicSpec{name: "last", partitions: 7, rf: 1}))

	// CreatePartitions.
	d.createPartitions("grow", growReq(false, growSpec{topic: "v4", count: 2}, growSpec{topic: "nope", count: 3}))
	d.createPartitions("counts", growReq(false, growSpec{topic: "a", count: 2}, growSpec{topic: "a", count: 3}, growSpec{topic: "a", count: 100001}))
	d.createPartitions("assignments", growReq(false, growSpec{topic: "single", count: 3, assignment: [][]int32{{1}}},
		growSpec{topic: "single", count: 2, assignment: [][]int32{{2}}}, growSpec{topic: "single", count: 2, assignment: [][]int32{{1}}}))
	d.createPartitions("twice in one request", growReq(false, growSpec{topic: "v4", count: 3}, growSpec{topic: "v4", count: 3}, growSpec{topic: "v4", count: 4}))
	d.createPartitions("validate only", growReq(true, growSpec{topic: "a", count: 4}))
	d.createPartitions("over the cap", growReq(false, growSpec{topic: "a", count: 30}))
	d.createPartitions("too many per request", growReq(false, growSpec{topic: "a", count: 10004}, growSpec{topic: "v4", count: 5}))

	// Configs.
	d.incrementalAlterConfigs("set", incReq(false, kmsg.ConfigResourceTypeTopic, "a",
		op{"retention.ms", kmsg.IncrementalAlterConfigOpSet, s("120000")}, op{"max.message.bytes", kmsg.IncrementalAlterConfigOpSet, s("4096")}))
	d.incrementalAlterConfigs("append", incReq(false, kmsg.ConfigResourceTypeTopic, "a", op{"cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, s("compact")}))
	d.incrementalAlterConfigs("subtract", incReq(false, kmsg.ConfigResourceTypeTopic, "compacted", op{"cleanup.policy", kmsg.IncrementalAlterConfigOpSubtract, s("delete")}))
	d.incrementalAlterConfigs("delete", incReq(false, kmsg.ConfigResourceTypeTopic, "a", op{"retention.ms", kmsg.IncrementalAlterConfigOpDelete, nil}))
	d.incrementalAlterConfigs("bad value", incReq(false, kmsg.ConfigResourceTypeTopic, "a", op{"retention.ms", kmsg.IncrementalAlterConfigOpSet, s("x")}))
	d.incrementalAlterConfigs("unknown topic", incReq(false, kmsg.ConfigResourceTypeTopic, "nope", op{"retention.ms", kmsg.IncrementalAlterConfigOpSet, s("1")}))
	d.incrementalAlterConfigs("bad topic name", incReq(false, kmsg.ConfigResourceTypeTopic, "no way", op{"retention.ms", kmsg.IncrementalAlterConfigOpSet, s("1")}))
	d.incrementalAlterConfigs("validate only", incReq(true, kmsg.ConfigResourceTypeTopic, "a", op{"retention.ms", kmsg.IncrementalAlterConfigOpSet, s("5")}))
	d.incrementalAlterConfigs("broker", incReq(false, kmsg.ConfigResourceTypeBroker, "1", op{"log.retention.ms", kmsg.IncrementalAlterConfigOpSet, s("5")}))
	d.incrementalAlterConfigs("client metrics", incReq(false, kmsg.ConfigResourceTypeClientMetrics, "m", op{"interval.ms", kmsg.IncrementalAlterConfigOpSet, s("5")}))
	d.incrementalAlterConfigs("group set", incReq(false, kmsg.ConfigResourceTypeGroupConfig, "g", op{"share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, s("earliest")},
		op{"share.record.lock.duration.ms", kmsg.IncrementalAlterConfigOpSet, s("20000")}))
	d.incrementalAlterConfigs("group bad", incReq(false, kmsg.ConfigResourceTypeGroupConfig, "g", op{"share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, s("sometimes")}))
	d.incrementalAlterConfigs("group duplicate", incReq(false, kmsg.ConfigResourceTypeGroupConfig, "g", op{"share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, s("latest")},
		op{"share.auto.offset.reset", kmsg.IncrementalAlterConfigOpDelete, nil}))
	d.incrementalAlterConfigs("group delete", incReq(false, kmsg.ConfigResourceTypeGroupConfig, "g", op{"share.record.lock.duration.ms", kmsg.IncrementalAlterConfigOpDelete, nil}))
	d.incrementalAlterConfigs("group append", incReq(false, kmsg.ConfigResourceTypeGroupConfig, "g", op{"share.auto.offset.reset", kmsg.IncrementalAlterConfigOpAppend, s("x")}))
	d.incrementalAlterConfigs("empty group", incReq(false, kmsg.ConfigResourceTypeGroupConfig, "", op{"share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, s("earliest")}))
	two := incReq(false, kmsg.ConfigResourceTypeTopic, "v4", op{"retention.ms", kmsg.IncrementalAlterConfigOpSet, s("1000")})
	two.Resources = append(two.Resources, incReq(false, kmsg.ConfigResourceTypeTopic, "v4", op{"segment.ms", kmsg.IncrementalAlterConfigOpSet, s("100000")}).Resources...)
	d.incrementalAlterConfigs("one topic twice", two)
	d.alterConfigs("replace", alterReq(false, kmsg.ConfigResourceTypeTopic, "a", map[string]*string{"segment.ms": s("3600000")}))
	d.alterConfigs("replace null", alterReq(false, kmsg.ConfigResourceTypeTopic, "a", map[string]*string{"segment.ms": nil}))
	d.alterConfigs("replace group", alterReq(false, kmsg.ConfigResourceTypeGroupConfig, "g2", map[string]*string{"share.isolation.level": s("read_committed")}))
	d.alterConfigs("replace group null", alterReq(false, kmsg.ConfigResourceTypeGroupConfig, "g2", map[string]*string{"share.isolation.level": nil}))
	d.alterConfigs("replace broker", alterReq(false, kmsg.ConfigResourceTypeBroker, "1", map[string]*string{"log.retention.ms": s("1")}))
	d.alterConfigs("replace to nothing", alterReq(false, kmsg.ConfigResourceTypeTopic, "compacted", nil))

	// DeleteTopics.
	d.deleteTopics("by name", -1, deleteByName("fits", "nope"))
	d.deleteTopics("by name, v5", 5, deleteByName("defaults", "nope", "defaults"))
	aID := d.im.Topic("a").ID
	d.deleteTopics("by id", -1, deleteByID(aID, aID, [16]byte{7}))
	both := deleteByName("v4")
	both.Topics[0].TopicID = d.im.Topic("v4").ID
	d.deleteTopics("name and id", -1, both)

	// UpdateFeatures.
	d.updateFeatures("unknown feature", -1, featuresReq(false, "no.such", 1, 1))
	d.updateFeatures("upgrade type", -1, featuresReq(false, "share.version", 0, 4))
	d.updateFeatures("downgrade as upgrade", -1, featuresReq(false, "share.version", 0, 1))
	d.updateFeatures("above the max", -1, featuresReq(false, "share.version", 2, 1))
	d.updateFeatures("transactions fixed", -1, featuresReq(false, "transaction.version", 1, 2))
	d.updateFeatures("validate only", -1, featuresReq(true, "share.version", 0, 2))
	d.updateFeatures("downgrade v1", 1, featuresReq(false, "share.version", 0, 2))
	d.updateFeatures("upgrade v0", 0, featuresReq(false, "share.version", 1, 1))
	d.updateFeatures("nothing changes", -1, featuresReq(false, "share.version", 1, 1))
	d.updateFeatures("unsafe downgrade", -1, featuresReq(false, "share.version", 0, 3))

	d.sameImage()
}

// TestSameAnswersInternalTopicsAndNoDeletion: internal topics (created by a coordinator on
// first use) cannot be deleted or grown, deletion can be switched off, and Metadata
// auto-creates topics, all as the broker does.
func TestSameAnswersInternalTopicsAndNoDeletion(t *testing.T) {
	d := newDiff(t, map[string]string{"delete.topic.enable": "false", "max.broker.partitions": "100"},
		func(c *broker.Config) { c.AutoCreateTopics = true })
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g"}
	if resp := d.broker(fc, -1).(*kmsg.FindCoordinatorResponse); len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %+v", resp)
	}
	id := d.brokerTopicID("__consumer_offsets")
	recs, err := admin.CreateInternalTopic(d.im, "__consumer_offsets", d.cfg.Topic.OffsetsTopicNumPartitions(), admin.InternalTopicConfigs,
		admin.Placement{Brokers: []int32{1}}, func() metadata.TopicID { return id })
	if err != nil {
		t.Fatal(err)
	}
	d.apply("internal topic", [][]wire.MetadataRecord{recs})
	if again, err := admin.CreateInternalTopic(d.im, "__consumer_offsets", 5, nil, admin.Placement{Brokers: []int32{1}}, d.newID); err != nil || again != nil {
		t.Fatalf("an existing internal topic created again: %v %v", again, err)
	}

	// Metadata auto-creation: a new topic gets the defaults; a bad name is refused.
	for _, name := range []string{"auto", "bad name"} {
		md := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		md.Topics, md.AllowAutoTopicCreation = append(md.Topics, mt), true
		want := d.broker(md, -1).(*kmsg.MetadataResponse).Topics[0]
		d.ids = []metadata.TopicID{want.TopicID}
		recs, kerr, _ := admin.AutoCreateTopic(d.im, name, admin.Placement{Brokers: []int32{1}}, d.cfg, d.newID)
		if code := errCode(kerr); code != want.ErrorCode {
			t.Errorf("auto-create %q: admin code %d, broker %d", name, code, want.ErrorCode)
		}
		d.apply("auto-create", [][]wire.MetadataRecord{recs})
	}
	if recs, kerr, _ := admin.AutoCreateTopic(d.im, "auto", admin.Placement{Brokers: []int32{1}}, d.cfg, d.newID); recs != nil || kerr != nil {
		t.Errorf("auto-creating an existing topic: %v %v", recs, kerr)
	}
	if _, kerr, _ := admin.AutoCreateTopic(d.im, "__transaction_state", admin.Placement{Brokers: []int32{1}}, d.cfg, d.newID); kerr == nil {
		t.Errorf("auto-created an internal topic")
	}

	d.createTopics("create", -1, createReq(false, topicSpec{name: "kept", partitions: 1, rf: 1}))
	d.deleteTopics("internal", -1, deleteByName("__consumer_offsets", "kept"))
	d.deleteTopics("internal by id", -1, deleteByID(id))
	d.createPartitions("internal", growReq(false, growSpec{topic: "__consumer_offsets", count: 10}))
	d.sameImage()
}

func errCode(err *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	return err.Code
}
