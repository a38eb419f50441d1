package client

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/testbroker"
)

// DescribeShareGroups shows the member and its assignment; DescribeShareGroupOffsets the
// start offset and lag of the share partitions, before and after acknowledging.
func TestIntegrationAdminDescribeShareGroups(t *testing.T) {
	b := shareSetup(t, "sq", "sg-adm", 2, 6)
	a := newTestAdmin(t, b.Addr)
	c := newTestShareConsumer(t, b.Addr, "sg-adm", "sq", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	seen := pollUntil(t, c, AckAccept, countAtLeast(6))
	if _, err := c.CommitSync(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	ds, err := a.DescribeShareGroups(testCtx(t), "sg-adm", "sg-ghost")
	if !errors.Is(err, kerr.GroupIDNotFound) || len(ds) != 2 || ds[1].Err == nil {
		t.Fatalf("describe with an unknown group: %v %+v", err, ds)
	}
	d := ds[0]
	if d.Err != nil || d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != c.GroupMetadata().MemberID {
		t.Fatalf("described %+v", d)
	}
	if m := d.Members[0]; len(m.Assignment) != 2 || m.Assignment[0] != (TopicPartition{"sq", 0}) || m.Assignment[1] != (TopicPartition{"sq", 1}) ||
		len(m.SubscribedTopics) != 1 || m.SubscribedTopics[0] != "sq" {
		t.Errorf("member %+v", m)
	}

	offs, err := a.DescribeShareGroupOffsets(testCtx(t), "sg-adm")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 2 || len(seen) != 6 {
		t.Fatalf("offsets %+v after %d records", offs, len(seen))
	}
	for tp, o := range offs {
		if o.StartOffset != 3 || o.Lag != 0 || o.Err != nil {
			t.Errorf("%v: %+v, want start offset 3, lag 0", tp, o)
		}
	}
	if _, err := a.DescribeShareGroupOffsets(testCtx(t), "sg-ghost"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("offsets of an unknown group: %v", err)
	}
}

// AlterShareGroupOffsets and DeleteShareGroupOffsets on an empty share group: the start
// offset moves (per-partition errors for what does not exist), and deleting forgets it; a
// group with a member is refused with NON_EMPTY_GROUP.
func TestIntegrationAdminAlterDeleteShareGroupOffsets(t *testing.T) {
	b := shareSetup(t, "sqo", "sg-off", 1, 5)
	a := newTestAdmin(t, b.Addr)
	c := newTestShareConsumer(t, b.Addr, "sg-off", "sqo", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	pollUntil(t, c, AckAccept, countAtLeast(5))
	if _, err := c.CommitSync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AlterShareGroupOffsets(testCtx(t), "sg-off", map[TopicPartition]int64{{"sqo", 0}: 1}); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("alter with a member: %v", err)
	}
	if err := c.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	res, err := a.AlterShareGroupOffsets(testCtx(t), "sg-off", map[TopicPartition]int64{{"sqo", 0}: 2, {"sqo", 3}: 0})
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || res[TopicPartition{"sqo", 0}] != nil || !errors.Is(res[TopicPartition{"sqo", 3}], kerr.UnknownTopicOrPartition) {
		t.Fatalf("alter: %v %v", res, err)
	}
	offs, err := a.DescribeShareGroupOffsets(testCtx(t), "sg-off")
	if err != nil || offs[TopicPartition{"sqo", 0}].StartOffset != 2 || offs[TopicPartition{"sqo", 0}].Lag != 3 {
		t.Fatalf("offsets after alter: %+v %v", offs, err)
	}
	del, err := a.DeleteShareGroupOffsets(testCtx(t), "sg-off", "sqo", "nope")
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || del["sqo"] != nil || !errors.Is(del["nope"], kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete: %v %v", del, err)
	}
	if offs, err := a.DescribeShareGroupOffsets(testCtx(t), "sg-off"); err != nil || len(offs) != 0 {
		t.Fatalf("offsets after delete: %+v %v", offs, err)
	}
	if _, err := a.DeleteShareGroupOffsets(testCtx(t), "sg-ghost", "sqo"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("delete of a missing group: %v", err)
	}
}

// DescribeFeatures reads the finalized levels; UpdateFeatures lowers share.version to 0
// (share groups refused) and raises it back.
func TestIntegrationAdminFeatures(t *testing.T) {
	b := testbroker.Start(t)
	a := newTestAdmin(t, b.Addr)
	f, err := a.DescribeFeatures(testCtx(t))
	if err != nil || f.Finalized["share.version"] != 1 || f.Finalized["transaction.version"] != 2 || f.Supported["share.version"] != [2]int16{0, 1} {
		t.Fatalf("features %+v %v", f, err)
	}
	if err := a.UpdateFeatures(testCtx(t), false, FeatureUpdate{"share.version", 2, FeatureUpgrade}); !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Fatalf("share.version 2: %v", err)
	}
	if err := a.UpdateFeatures(testCtx(t), false, FeatureUpdate{"share.version", 0, FeatureSafeDowngrade}); err != nil {
		t.Fatal(err)
	}
	g, err := a.DescribeFeatures(testCtx(t))
	if _, ok := g.Finalized["share.version"]; err != nil || ok || g.Epoch != f.Epoch+1 {
		t.Fatalf("after disabling: %+v %v", g, err)
	}
	if _, err := a.DescribeShareGroupOffsets(testCtx(t), "any"); !errors.Is(err, kerr.UnsupportedVersion) {
		t.Fatalf("share RPC while disabled: %v", err)
	}
	if err := a.UpdateFeatures(testCtx(t), false, FeatureUpdate{"share.version", 1, FeatureUpgrade}); err != nil {
		t.Fatal(err)
	}
}
