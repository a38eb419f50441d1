package client

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
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
