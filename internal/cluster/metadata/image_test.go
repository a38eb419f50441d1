package metadata

import (
	"bytes"
	"errors"
	"github.com/exactq/exactq/internal/security/acl"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/exactq/exactq/wire"
)

// frames is im's checkpoint as bytes: its records framed as the metadata log holds them.
func frames(t *rapid.T, im *Image) []byte {
	var b []byte
	for _, r := range im.Records() {
		b = wire.AppendMetadataRecord(b, r)
		b = append(b, '|') // records are not self-delimiting; the test only compares
	}
	return b
}

// replayFrames decodes every record of im's checkpoint from its bytes and replays them.
func replayFrames(t *rapid.T, im *Image) *Image {
	var recs []wire.MetadataRecord
	for _, r := range im.Records() {
		back, err := wire.ReadMetadataRecord(wire.AppendMetadataRecord(nil, r), false)
		if err != nil {
			t.Fatalf("%s: %v", r.Type(), err)
		}
		recs = append(recs, back)
	}
	out, err := Replay(recs)
	if err != nil {
		t.Fatalf("replaying a checkpoint: %v", err)
	}
	return out
}

// model is what the test expects of each partition, by KRaft's rules alone.
type model struct {
	leader, leaderEpoch, partitionEpoch int32
}

type partKey struct {
	topic TopicID
	p     int32
}

// genRecord draws a record for im: most fit it, some do not (unknown ids, stale epochs,
// bad replicas, a name taken).
func genRecord(t *rapid.T, im *Image) wire.MetadataRecord {
	brokerID := rapid.Int32Range(0, 4).Draw(t, "broker")
	replicas := func() []int32 {
		n := rapid.IntRange(1, 3).Draw(t, "replicas")
		perm := rapid.Permutation([]int32{0, 1, 2, 3, 4}).Draw(t, "perm")
		return perm[:n]
	}
	topicIDs := sortedTopicIDs(im.TopicsByID)
	anyTopic := func() TopicID {
		if len(topicIDs) == 0 || rapid.IntRange(0, 9).Draw(t, "unknown topic") == 0 {
			return TopicID{byte(rapid.IntRange(1, 6).Draw(t, "tid"))}
		}
		return rapid.SampledFrom(topicIDs).Draw(t, "topic")
	}
	epoch := func() int64 {
		if br, ok := im.Brokers[brokerID]; ok && rapid.IntRange(0, 5).Draw(t, "stale") > 0 {
			return br.Epoch
		}
		return rapid.Int64Range(0, 20).Draw(t, "epoch")
	}
	switch rapid.IntRange(0, 15).Draw(t, "kind") {
	case 12, 13, 14:
		return genSecurityRecord(t, im)
	case 0:
		return &wire.RegisterBrokerRecord{BrokerID: brokerID, BrokerEpoch: rapid.Int64Range(0, 20).Draw(t, "epoch"),
			Fenced: rapid.Bool().Draw(t, "fenced"), EndPoints: []wire.RegisterBrokerRecordEndPoint{{Name: "PLAINTEXT", Host: "h", Port: 9092}}}
	case 1:
		return &wire.UnregisterBrokerRecord{BrokerID: brokerID, BrokerEpoch: epoch()}
	case 2:
		return &wire.BrokerRegistrationChangeRecord{BrokerID: brokerID, BrokerEpoch: epoch(), Fenced: int8(rapid.IntRange(-1, 2).Draw(t, "f")),
			InControlledShutdown: int8(rapid.IntRange(0, 1).Draw(t, "cs"))}
	case 3:
		return &wire.TopicRecord{Name: rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(t, "name"), TopicID: TopicID{byte(rapid.IntRange(1, 6).Draw(t, "tid"))}}
	case 4, 5:
		id := anyTopic()
		next := int32(0)
		if tp := im.TopicsByID[id]; tp != nil {
			next = int32(len(tp.Partitions))
		}
		r := replicas()
		return &wire.PartitionRecord{TopicID: id, PartitionID: next + int32(rapid.IntRange(0, 6).Draw(t, "skip")/6), Replicas: r, ISR: r,
			Leader: r[0], LeaderEpoch: 0, PartitionEpoch: 0}
	case 6, 7:
		id := anyTopic()
		pc := wire.NewPartitionChangeRecord()
		pc.TopicID = id
		if tp := im.TopicsByID[id]; tp != nil && len(tp.Partitions) > 0 {
			pc.PartitionID = int32(rapid.IntRange(0, len(tp.Partitions)).Draw(t, "p"))
			if int(pc.PartitionID) < len(tp.Partitions) {
				reps := tp.Partitions[pc.PartitionID].Replicas
				pc.Leader = rapid.SampledFrom(append([]int32{-2, -1, 7}, reps...)).Draw(t, "leader")
				if rapid.Bool().Draw(t, "isr") {
					pc.ISR = reps[:rapid.IntRange(0, len(reps)).Draw(t, "isrn")]
					if pc.Leader >= 0 && !contains(pc.ISR, pc.Leader) && rapid.Bool().Draw(t, "fix") {
						pc.ISR = reps
					}
				}
				if rapid.IntRange(0, 4).Draw(t, "elr") == 0 {
					pc.EligibleLeaderReplicas = reps[:1]
				}
			}
		}
		return &pc
	case 8:
		return &wire.RemoveTopicRecord{TopicID: anyTopic()}
	case 9:
		typ := rapid.SampledFrom([]int8{ResourceTopic, ResourceBroker, ResourceGroup, 9}).Draw(t, "rt")
		var value *string
		if rapid.Bool().Draw(t, "set") {
			v := rapid.SampledFrom([]string{"1", "2"}).Draw(t, "value")
			value = &v
		}
		return &wire.ConfigRecord{ResourceType: typ, ResourceName: rapid.SampledFrom([]string{"a", "b", "1"}).Draw(t, "rn"),
			Name: rapid.SampledFrom([]string{"retention.ms", "x"}).Draw(t, "cn"), Value: value}
	case 10:
		if rapid.Bool().Draw(t, "pid") {
			return &wire.ProducerIdsRecord{BrokerID: brokerID, BrokerEpoch: epoch(), NextProducerID: im.ProducerIDs.Next + rapid.Int64Range(-1, 1).Draw(t, "d")*1000}
		}
		return &wire.FeatureLevelRecord{Name: rapid.SampledFrom([]string{"metadata.version", "share.version"}).Draw(t, "feat"),
			FeatureLevel: int16(rapid.IntRange(-1, 3).Draw(t, "level"))}
	default:
		if rapid.Bool().Draw(t, "clear all") {
			return &wire.ClearElrRecord{}
		}
		return &wire.ClearElrRecord{TopicName: rapid.SampledFrom([]string{"a", "b", "z"}).Draw(t, "n")}
	}
}

func contains(s []int32, x int32) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// TestApplyProperties: random batches of records, applied one batch at a time:
//   - a refused batch changes nothing (the image it was applied to still checkpoints the
//     same bytes), an applied one never changes the image it was applied to;
//   - each partition's leader, leader epoch and partition epoch follow KRaft's rules
//     (the model: a PartitionChangeRecord bumps the partition epoch, and the leader epoch
//     when it sets a leader);
//   - the checkpoint (Records, framed and decoded) replays to an equal image;
//   - the delta reports exactly what differs (a full diff of the images agrees), and the
//     composition of two batches' deltas is the delta of the two as one batch.
func TestApplyProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		im := Empty()
		parts := map[partKey]model{}
		var prev *Delta
		var prevBatch []wire.MetadataRecord
		for range rapid.IntRange(1, 40).Draw(t, "batches") {
			var batch []wire.MetadataRecord
			scratch := im
			for range rapid.IntRange(1, 4).Draw(t, "records") {
				r := genRecord(t, scratch)
				batch = append(batch, r)
				if next, _, err := Apply(scratch, []wire.MetadataRecord{r}); err == nil {
					scratch = next // later records of the batch see the earlier ones
				}
			}
			before := frames(t, im)
			next, d, err := Apply(im, batch)
			if !bytes.Equal(frames(t, im), before) {
				t.Fatal("Apply changed the image it was applied to")
			}
			if err != nil {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("error %v does not wrap ErrRefused", err)
				}
				prev = nil
				continue
			}
			cur := im // the image before each record of the batch
			for _, r := range batch {
				after, _, err := Apply(cur, []wire.MetadataRecord{r})
				if err != nil {
					t.Fatalf("a record of an applied batch, alone: %v", err)
				}
				switch r := r.(type) {
				case *wire.PartitionRecord:
					parts[partKey{r.TopicID, r.PartitionID}] = model{r.Leader, r.LeaderEpoch, r.PartitionEpoch}
				case *wire.PartitionChangeRecord:
					m := parts[partKey{r.TopicID, r.PartitionID}]
					m.partitionEpoch++
					if r.Leader != -2 {
						m.leader, m.leaderEpoch = r.Leader, m.leaderEpoch+1
					}
					parts[partKey{r.TopicID, r.PartitionID}] = m
				case *wire.ClearElrRecord:
					for _, id := range sortedTopicIDs(cur.TopicsByID) {
						tp := cur.TopicsByID[id]
						if r.TopicName != "" && r.TopicName != tp.Name {
							continue
						}
						for i, p := range tp.Partitions {
							if len(p.ELR) > 0 || len(p.LastKnownELR) > 0 {
								m := parts[partKey{id, int32(i)}]
								m.partitionEpoch++
								parts[partKey{id, int32(i)}] = m
							}
						}
					}
				case *wire.RemoveTopicRecord:
					for k := range parts {
						if k.topic == r.TopicID {
							delete(parts, k)
						}
					}
				}
				cur = after
			}
			n := 0
			for _, tp := range next.TopicsByID {
				for i, p := range tp.Partitions {
					n++
					if m := parts[partKey{tp.ID, int32(i)}]; m != (model{p.Leader, p.LeaderEpoch, p.PartitionEpoch}) {
						t.Fatalf("%s-%d: leader %d epoch %d partition epoch %d, model %+v", tp.Name, i, p.Leader, p.LeaderEpoch, p.PartitionEpoch, m)
					}
				}
			}
			if n != len(parts) {
				t.Fatalf("%d partitions, model %d", n, len(parts))
			}

			if back := replayFrames(t, next); !bytes.Equal(frames(t, back), frames(t, next)) {
				t.Fatal("the checkpoint does not replay to the image")
			}
			checkDeltaComplete(t, d)
			if prev != nil && prev.After == im {
				two, d2, err := Apply(prev.Before, append(slicesClone(prevBatch), batch...))
				if err != nil {
					t.Fatalf("the two batches as one: %v", err)
				}
				if !bytes.Equal(frames(t, two), frames(t, next)) {
					t.Fatal("the two batches as one give another image")
				}
				c := Compose(prev, d)
				c.After = two // the same content; the accessors compare content
				if !reflect.DeepEqual(summary(c), summary(d2)) {
					t.Fatalf("composed delta %+v, one batch's %+v", summary(c), summary(d2))
				}
			}
			prev, prevBatch, im = d, batch, next
		}
	})
}

func slicesClone(s []wire.MetadataRecord) []wire.MetadataRecord {
	return append([]wire.MetadataRecord(nil), s...)
}

type deltaSummary struct {
	Topics     []TopicChange
	Partitions []PartitionChange
	Brokers    []BrokerChange
	Configs    []ConfigResource
	Features   []string
	PIDs, Clus bool
	ACLsAdded  []acl.ACL
	ACLsGone   []acl.ACL
	Scram      []ScramKey
}

func summary(d *Delta) deltaSummary {
	added, removed := d.ACLChanges()
	return deltaSummary{d.Topics(), d.Partitions(), d.Brokers(), d.Configs(), d.Features(), d.ProducerIDsChanged(), d.ClusterChanged(),
		added, removed, d.ScramChanges()}
}

// checkDeltaComplete: every topic, broker, config resource and feature that differs
// between the images is in the delta.
func checkDeltaComplete(t *rapid.T, d *Delta) {
	checkSecurityDelta(t, d)
	changed := 0
	for id := range union(d.Before.TopicsByID, d.After.TopicsByID) {
		if !reflect.DeepEqual(d.Before.TopicsByID[id], d.After.TopicsByID[id]) {
			changed++
		}
	}
	if len(d.Topics()) != changed {
		t.Fatalf("delta has %d topic changes, the images differ in %d", len(d.Topics()), changed)
	}
	changed = 0
	for id := range union(d.Before.Brokers, d.After.Brokers) {
		if !reflect.DeepEqual(d.Before.Brokers[id], d.After.Brokers[id]) {
			changed++
		}
	}
	if len(d.Brokers()) != changed {
		t.Fatalf("delta has %d broker changes, the images differ in %d", len(d.Brokers()), changed)
	}
	changed = 0
	for r := range union(d.Before.Configs, d.After.Configs) {
		if !reflect.DeepEqual(d.Before.Configs[r], d.After.Configs[r]) {
			changed++
		}
	}
	if len(d.Configs()) != changed {
		t.Fatalf("delta has %d config changes, the images differ in %d", len(d.Configs()), changed)
	}
	changed = 0
	for f := range union(d.Before.Features, d.After.Features) {
		if d.Before.Features[f] != d.After.Features[f] {
			changed++
		}
	}
	if len(d.Features()) != changed {
		t.Fatalf("delta has %d feature changes, the images differ in %d", len(d.Features()), changed)
	}
}

func union[K comparable, V any](a, b map[K]V) map[K]struct{} {
	m := map[K]struct{}{}
	for k := range a {
		m[k] = struct{}{}
	}
	for k := range b {
		m[k] = struct{}{}
	}
	return m
}
