package admin_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
)

const propCap = 14 // max.broker.partitions in the property test

var (
	propNames   = []string{"a", "b", "a.b", "a_b", "c", "__consumer_offsets", "bad name", ""}
	propConfigs = [][2]string{{"retention.ms", "1000"}, {"retention.ms", "soon"}, {"cleanup.policy", "compact"}, {"segment.bytes", "1048576"}, {"no.such", "1"}}
	propGroups  = [][2]string{{"share.auto.offset.reset", "earliest"}, {"share.auto.offset.reset", "never"}, {"share.record.lock.duration.ms", "20000"}}
)

func propConfig(t *testing.T) admin.Config {
	return adminConfig(t, map[string]string{"num.partitions": "2", "max.broker.partitions": strconv.Itoa(propCap)})
}

// TestEveryOutputApplies: random admin requests against the image they build, with random
// brokers, placements and replication limits. Every record group must be accepted by
// metadata.Apply in order, a success must show in the image as answered, and no broker
// may end above the cap.
func TestEveryOutputApplies(t *testing.T) {
	base := propConfig(t)
	rapid.Check(t, func(rt *rapid.T) {
		im, _, err := metadata.Apply(metadata.Empty(), admin.InitialFeatures())
		if err != nil {
			rt.Fatal(err)
		}
		cfg := base
		cfg.MaxReplicationFactor = int16(rapid.IntRange(0, 2).Draw(rt, "max rf"))
		var nextID byte
		newID := func() metadata.TopicID { nextID++; return metadata.TopicID{nextID} }
		for step := range rapid.IntRange(1, 25).Draw(rt, "steps") {
			brokers := rapid.SliceOfNDistinct(rapid.Int32Range(0, 5), 0, 4, rapid.ID[int32]).Draw(rt, "brokers")
			pl := admin.Placement{Brokers: brokers, Start: rapid.IntRange(-3, 7).Draw(rt, "start")}
			var groups [][]wire.MetadataRecord
			var check func(after *metadata.Image)
			switch rapid.IntRange(0, 5).Draw(rt, "request") {
			case 0:
				r := genCreate(rt, brokers)
				var resp *kmsg.CreateTopicsResponse
				groups, resp = admin.CreateTopics(im, r, "prop", pl, cfg, newID)
				check = func(after *metadata.Image) { checkCreated(rt, after, r, resp, groups, brokers) }
			case 1:
				r := genGrow(rt, im, brokers)
				var resp *kmsg.CreatePartitionsResponse
				groups, resp = admin.CreatePartitions(im, r, pl, cfg)
				check = func(after *metadata.Image) {
					for i, st := range resp.Topics {
						if st.ErrorCode == 0 && !r.ValidateOnly && len(after.Topic(st.Topic).Partitions) < int(r.Topics[i].Count) {
							rt.Fatalf("%s grown to %d, has %d", st.Topic, r.Topics[i].Count, len(after.Topic(st.Topic).Partitions))
						}
					}
				}
			case 2:
				r := genDelete(rt, im)
				var resp *kmsg.DeleteTopicsResponse
				groups, resp = admin.DeleteTopics(im, r, cfg)
				check = func(after *metadata.Image) {
					for _, st := range resp.Topics {
						if st.ErrorCode == 0 && after.TopicsByID[st.TopicID] != nil {
							rt.Fatalf("%x deleted, still there", st.TopicID)
						}
					}
				}
			case 3:
				groups, _ = admin.IncrementalAlterConfigs(im, genIncremental(rt), cfg)
			case 4:
				groups, _ = admin.AlterConfigs(im, genAlter(rt), cfg)
			case 5:
				r := kmsg.NewPtrUpdateFeaturesRequest()
				r.Version = int16(rapid.IntRange(0, 2).Draw(rt, "version"))
				u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
				u.Feature = rapid.SampledFrom([]string{"share.version", "transaction.version", "x"}).Draw(rt, "feature")
				u.MaxVersionLevel = int16(rapid.IntRange(-1, 3).Draw(rt, "level"))
				u.UpgradeType = int8(rapid.IntRange(0, 4).Draw(rt, "type"))
				r.FeatureUpdates = append(r.FeatureUpdates, u)
				r.ValidateOnly = rapid.Bool().Draw(rt, "validate only")
				recs, _, _ := admin.UpdateFeatures(im, r, 1)
				groups = [][]wire.MetadataRecord{recs}
			}
			for i, g := range groups {
				next, _, err := metadata.Apply(im, g)
				if err != nil {
					rt.Fatalf("step %d group %d refused: %v", step, i, err)
				}
				im = next
			}
			if check != nil {
				check(im)
			}
			for b, n := range admin.Hosted(im) {
				if n > propCap {
					rt.Fatalf("broker %d hosts %d partitions, above the cap %d", b, n, propCap)
				}
			}
		}
	})
}

func genCreate(rt *rapid.T, brokers []int32) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.Version = int16(rapid.IntRange(0, 7).Draw(rt, "version"))
	r.ValidateOnly = rapid.IntRange(0, 4).Draw(rt, "validate only") == 0
	for range rapid.IntRange(1, 3).Draw(rt, "topics") {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = rapid.SampledFrom(propNames).Draw(rt, "name")
		t.NumPartitions = int32(rapid.IntRange(-1, 4).Draw(rt, "partitions"))
		t.ReplicationFactor = int16(rapid.IntRange(-1, 3).Draw(rt, "rf"))
		if rapid.IntRange(0, 4).Draw(rt, "assign") == 0 {
			t.NumPartitions, t.ReplicationFactor = -1, -1
			ids := append(slices.Clone(brokers), 9)
			for i := range rapid.IntRange(1, 3).Draw(rt, "assigned") {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition = int32(i)
				a.Replicas = rapid.SliceOfN(rapid.SampledFrom(ids), 0, 3).Draw(rt, "replicas")
				t.ReplicaAssignment = append(t.ReplicaAssignment, a)
			}
		}
		for range rapid.IntRange(0, 2).Draw(rt, "configs") {
			kv := rapid.SampledFrom(propConfigs).Draw(rt, "config")
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
			t.Configs = append(t.Configs, c)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

// checkCreated: each topic answered created is in the image with the partitions, factor
// and id answered, its replicas distinct placement brokers led by the first.
func checkCreated(rt *rapid.T, im *metadata.Image, r *kmsg.CreateTopicsRequest, resp *kmsg.CreateTopicsResponse, groups [][]wire.MetadataRecord, brokers []int32) {
	created := 0
	for _, st := range resp.Topics {
		if st.ErrorCode != 0 || r.ValidateOnly {
			continue
		}
		created++
		t := im.Topic(st.Topic)
		if t == nil || t.ID != metadata.TopicID(st.TopicID) || int32(len(t.Partitions)) != st.NumPartitions {
			rt.Fatalf("%s answered created (%x, %d partitions), image has %+v", st.Topic, st.TopicID, st.NumPartitions, t)
		}
		for i, p := range t.Partitions {
			if len(p.Replicas) != int(st.ReplicationFactor) || p.Leader != p.Replicas[0] || !slices.Equal(p.ISR, p.Replicas) || p.LeaderEpoch != 0 {
				rt.Fatalf("%s-%d: %+v, factor %d", st.Topic, i, p, st.ReplicationFactor)
			}
			for _, b := range p.Replicas {
				if !slices.Contains(brokers, b) {
					rt.Fatalf("%s-%d on broker %d, not one of %v", st.Topic, i, b, brokers)
				}
			}
		}
	}
	if created != len(groups) {
		rt.Fatalf("%d topics answered created, %d record groups", created, len(groups))
	}
}

func genGrow(rt *rapid.T, im *metadata.Image, brokers []int32) *kmsg.CreatePartitionsRequest {
	r := kmsg.NewPtrCreatePartitionsRequest()
	r.ValidateOnly = rapid.IntRange(0, 4).Draw(rt, "validate only") == 0
	names := append(slices.Collect(func(yield func(string) bool) {
		for n := range im.TopicsByName {
			if !yield(n) {
				return
			}
		}
	}), "nope")
	slices.Sort(names)
	for range rapid.IntRange(1, 3).Draw(rt, "topics") {
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic = rapid.SampledFrom(names).Draw(rt, "topic")
		t.Count = int32(rapid.IntRange(0, 8).Draw(rt, "count"))
		if rapid.IntRange(0, 3).Draw(rt, "assign") == 0 {
			ids := append(slices.Clone(brokers), 9)
			for range rapid.IntRange(0, 3).Draw(rt, "assigned") {
				a := kmsg.NewCreatePartitionsRequestTopicAssignment()
				a.Replicas = rapid.SliceOfN(rapid.SampledFrom(ids), 0, 3).Draw(rt, "replicas")
				t.Assignment = append(t.Assignment, a)
			}
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

func genDelete(rt *rapid.T, im *metadata.Image) *kmsg.DeleteTopicsRequest {
	r := kmsg.NewPtrDeleteTopicsRequest()
	r.Version = int16(rapid.IntRange(0, 6).Draw(rt, "version"))
	ids := []metadata.TopicID{{0xee}}
	for id := range im.TopicsByID {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b metadata.TopicID) int { return slices.Compare(a[:], b[:]) })
	for range rapid.IntRange(1, 3).Draw(rt, "topics") {
		t := kmsg.NewDeleteTopicsRequestTopic()
		if rapid.Bool().Draw(rt, "by id") {
			t.TopicID = rapid.SampledFrom(ids).Draw(rt, "id")
		} else {
			n := rapid.SampledFrom(propNames).Draw(rt, "name")
			t.Topic = &n
			r.TopicNames = append(r.TopicNames, n)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

func genResource(rt *rapid.T) (kmsg.ConfigResourceType, string, [][2]string) {
	if rapid.Bool().Draw(rt, "group") {
		return kmsg.ConfigResourceTypeGroupConfig, rapid.SampledFrom([]string{"g", "h", ""}).Draw(rt, "group id"), propGroups
	}
	return kmsg.ConfigResourceTypeTopic, rapid.SampledFrom(propNames).Draw(rt, "topic"), propConfigs
}

func genIncremental(rt *rapid.T) *kmsg.IncrementalAlterConfigsRequest {
	r := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r.ValidateOnly = rapid.IntRange(0, 4).Draw(rt, "validate only") == 0
	for range rapid.IntRange(1, 3).Draw(rt, "resources") {
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		var kvs [][2]string
		res.ResourceType, res.ResourceName, kvs = genResource(rt)
		for range rapid.IntRange(1, 2).Draw(rt, "ops") {
			kv := rapid.SampledFrom(kvs).Draw(rt, "config")
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
			c.Op = kmsg.IncrementalAlterConfigOp(rapid.IntRange(0, 3).Draw(rt, "op"))
			res.Configs = append(res.Configs, c)
		}
		r.Resources = append(r.Resources, res)
	}
	return r
}

func genAlter(rt *rapid.T) *kmsg.AlterConfigsRequest {
	r := kmsg.NewPtrAlterConfigsRequest()
	r.ValidateOnly = rapid.IntRange(0, 4).Draw(rt, "validate only") == 0
	for range rapid.IntRange(1, 3).Draw(rt, "resources") {
		res := kmsg.NewAlterConfigsRequestResource()
		var kvs [][2]string
		res.ResourceType, res.ResourceName, kvs = genResource(rt)
		for range rapid.IntRange(0, 2).Draw(rt, "configs") {
			kv := rapid.SampledFrom(kvs).Draw(rt, "config")
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
			res.Configs = append(res.Configs, c)
		}
		r.Resources = append(r.Resources, res)
	}
	return r
}
