package group

import (
	"testing"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetCommitGenerationFencing(t *testing.T) {
	e := newEnv(t, nil)
	m := e.stableOne("g")
	if code := e.commit("g", m, 0, "t", 0, 1); code != errIllegalGeneration {
		t.Fatalf("stale generation: %d", code)
	}
	if code := e.commit("g", "other", 1, "t", 0, 1); code != errUnknownMemberID {
		t.Fatalf("unknown member: %d", code)
	}
	if code := e.commit("g", "", -1, "t", 0, 1); code != errUnknownMemberID {
		t.Fatalf("simple commit to a Stable group: %d", code)
	}
	// A simple (generation -1) commit creates and uses an Empty group.
	if code := e.commit("simple", "", -1, "t", 0, 7); code != 0 {
		t.Fatalf("simple commit: %d", code)
	}
	if off, _ := e.fetch("simple", "t", 0, false); off != 7 {
		t.Fatalf("simple fetch: %d", off)
	}
	// Generation >= 0 for a missing group: ILLEGAL_GENERATION before v9 (GROUP_ID_NOT_FOUND from v9).
	if code := e.commit("missing", "m", 3, "t", 0, 1); code != errIllegalGeneration {
		t.Fatalf("missing group: %d", code)
	}
	if off, code := e.fetch("missing", "t", 0, false); off != -1 || code != 0 {
		t.Fatalf("fetch of a missing group: %d %d", off, code)
	}
}

func TestOffsetCommitRebalanceInProgress(t *testing.T) {
	e := newEnv(t, nil)
	m := e.stableOne("g")
	jr(t, e.join(5, joinReq("g", m))) // leader rejoin: CompletingRebalance, generation 2
	if code := e.commit("g", m, 2, "t", 0, 1); code != errRebalanceInProgress {
		t.Fatalf("commit while CompletingRebalance: %d", code)
	}
}

func TestOffsetCommitUnknownTopicAndMetadataSize(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.TopicExists = func(topic string, _ int32) bool { return topic == "t" }
		c.OffsetMetadataMaxBytes = 3
	})
	if code := e.commit("s", "", -1, "nope", 0, 1); code != errUnknownTopicOrPart {
		t.Fatalf("unknown topic: %d", code)
	}
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Group, r.Generation = "s", -1
	tp := kmsg.NewOffsetCommitRequestTopic()
	tp.Topic = "t"
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Offset, p.Metadata = 5, strp("toolong")
	tp.Partitions = append(tp.Partitions, p)
	r.Topics = append(r.Topics, tp)
	resp := start(e.c.OffsetCommit(t.Context(), 8, r)).get(t).(*kmsg.OffsetCommitResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != errOffsetMetadataTooLarge {
		t.Fatalf("metadata too large: %d", code)
	}
}

func (e *env) txnCommit(group, member string, gen int32, pid int64, topic string, partition int32, offset int64) int16 {
	e.t.Helper()
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = "tx", group, pid, 0
	r.MemberID, r.Generation = member, gen
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = partition, offset, -1
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	resp := start(e.c.TxnOffsetCommit(e.t.Context(), 3, r)).get(e.t).(*kmsg.TxnOffsetCommitResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func TestTxnOffsetCommitPendingThenMarker(t *testing.T) {
	e := newEnv(t, nil)
	m := e.stableOne("g")
	if code := e.commit("g", m, 1, "t", 0, 10); code != 0 {
		t.Fatal(code)
	}
	if code := e.txnCommit("g", m, 0, 77, "t", 0, 20); code != errIllegalGeneration {
		t.Fatalf("txn commit with a stale generation: %d", code)
	}
	if code := e.txnCommit("g", m, 1, 77, "t", 0, 20); code != 0 {
		t.Fatalf("txn commit: %d", code)
	}
	if off, code := e.fetch("g", "t", 0, false); off != 10 || code != 0 {
		t.Fatalf("read-uncommitted-style fetch sees %d %d, want the committed 10", off, code)
	}
	if _, code := e.fetch("g", "t", 0, true); code != errUnstableOffsetCommit {
		t.Fatalf("require-stable fetch: %d, want UNSTABLE_OFFSET_COMMIT", code)
	}
	// The broker writes the marker, then tells us.
	p := e.c.PartitionFor("g")
	e.logs[p].AppendMarker(77, 0, true, 0)
	e.c.CompleteTxn(p, 77, true)
	if off, code := e.fetch("g", "t", 0, true); off != 20 || code != 0 {
		t.Fatalf("after commit marker: %d %d", off, code)
	}
	// An aborted transaction leaves the offset alone.
	if code := e.txnCommit("g", m, 1, 78, "t", 0, 30); code != 0 {
		t.Fatal(code)
	}
	e.logs[p].AppendMarker(78, 0, false, 0)
	e.c.CompleteTxn(p, 78, false)
	if off, _ := e.fetch("g", "t", 0, true); off != 20 {
		t.Fatalf("after abort marker: %d", off)
	}
	// A transaction still open at restart stays pending; markers decided the others.
	if code := e.txnCommit("g", m, 1, 79, "t", 0, 40); code != 0 {
		t.Fatal(code)
	}
	e.settle()
	e.restart()
	if off, code := e.fetch("g", "t", 0, true); off != -1 || code != errUnstableOffsetCommit {
		t.Fatalf("open txn after restart: %d %d", off, code)
	}
	if off, _ := e.fetch("g", "t", 0, false); off != 20 {
		t.Fatalf("committed after restart: %d", off)
	}
	e.logs[p].AppendMarker(79, 0, true, 0)
	e.restart()
	if off, code := e.fetch("g", "t", 0, true); off != 40 || code != 0 {
		t.Fatalf("marker found on replay: %d %d", off, code)
	}
}

// A transactional offset older in the log than a later plain commit does not overwrite
// it when its marker arrives (Kafka keeps the most recent record).
func TestTxnCommitOlderThanPlainCommitIsNotMaterialized(t *testing.T) {
	e := newEnv(t, nil)
	if code := e.txnCommit("s", "", -1, 5, "t", 0, 100); code != 0 {
		t.Fatal(code)
	}
	if code := e.commit("s", "", -1, "t", 0, 200); code != 0 {
		t.Fatal(code)
	}
	e.c.CompleteTxn(e.c.PartitionFor("s"), 5, true)
	if off, _ := e.fetch("s", "t", 0, false); off != 200 {
		t.Fatalf("offset %d, want 200", off)
	}
}

func TestPersistedFormatIsKafkas(t *testing.T) {
	e := newEnv(t, nil)
	if code := e.commit("s", "", -1, "t", 3, 9); code != 0 {
		t.Fatal(code)
	}
	var found bool
	_ = e.logs[e.c.PartitionFor("s")].Replay(func(b coordlog.Stored) error {
		for _, r := range b.Records {
			var k kmsg.OffsetCommitKey
			if k.ReadFrom(r.Key) != nil || k.Version != 1 {
				continue
			}
			var v kmsg.OffsetCommitValue
			if err := v.ReadFrom(r.Value); err != nil {
				t.Fatal(err)
			}
			if k.Group == "s" && k.Topic == "t" && k.Partition == 3 && v.Version == 4 && v.Offset == 9 && v.LeaderEpoch == -1 {
				found = true
			}
		}
		return nil
	})
	if !found {
		t.Fatal("no OffsetCommitKey v1 / OffsetCommitValue v4 record")
	}
}

func TestDeleteGroupsAndOffsetDeleteAndList(t *testing.T) {
	e := newEnv(t, nil)
	m := e.stableOne("g")
	e.commit("g", m, 1, "t", 0, 5)
	e.commit("g", m, 1, "u", 0, 6)
	e.commit("s", "", -1, "t", 0, 1)

	// ListGroups with filters.
	list := func(states, types []string) []string {
		resp, _ := e.c.ListGroups(t.Context(), 5, &kmsg.ListGroupsRequest{StatesFilter: states, TypesFilter: types})
		var ids []string
		for _, g := range resp.(*kmsg.ListGroupsResponse).Groups {
			ids = append(ids, g.Group+"/"+g.GroupState+"/"+g.GroupType)
		}
		return ids
	}
	if got := list([]string{"stable"}, []string{"Classic"}); len(got) != 1 || got[0] != "g/Stable/classic" {
		t.Fatalf("list stable: %v", got)
	}
	if got := list(nil, []string{"consumer"}); len(got) != 0 {
		t.Fatalf("list consumer type: %v", got)
	}
	if got := list(nil, nil); len(got) != 2 {
		t.Fatalf("list all: %v", got)
	}

	// OffsetDelete: the group is subscribed to "t" (subscription() says so) but not "u".
	od := func(topic string) (int16, int16) {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = "g"
		tt := kmsg.NewOffsetDeleteRequestTopic()
		tt.Topic = topic
		tt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
		r.Topics = append(r.Topics, tt)
		resp := start(e.c.OffsetDelete(t.Context(), 0, r)).get(t).(*kmsg.OffsetDeleteResponse)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode, 0
		}
		return 0, resp.Topics[0].Partitions[0].ErrorCode
	}
	if _, code := od("t"); code != errGroupSubscribedToTopic {
		t.Fatalf("offset delete of a subscribed topic: %d", code)
	}
	if top, code := od("u"); top != 0 || code != 0 {
		t.Fatalf("offset delete: %d %d", top, code)
	}
	if off, _ := e.fetch("g", "u", 0, false); off != -1 {
		t.Fatalf("deleted offset still there: %d", off)
	}

	del := func(ids ...string) []int16 {
		resp := start(e.c.DeleteGroups(t.Context(), 2, &kmsg.DeleteGroupsRequest{Groups: ids})).get(t).(*kmsg.DeleteGroupsResponse)
		codes := map[string]int16{}
		for _, g := range resp.Groups {
			codes[g.Group] = g.ErrorCode
		}
		var out []int16
		for _, id := range ids {
			out = append(out, codes[id])
		}
		return out
	}
	if c := del("g", "missing", "s"); c[0] != errNonEmptyGroup || c[1] != errGroupIDNotFound || c[2] != 0 {
		t.Fatalf("delete groups: %v", c)
	}
	if off, _ := e.fetch("s", "t", 0, false); off != -1 {
		t.Fatalf("offsets of a deleted group: %d", off)
	}
	e.settle()
	e.restart()
	if got := list(nil, nil); len(got) != 1 {
		t.Fatalf("groups after restart: %v", got)
	}
	if off, _ := e.fetch("g", "u", 0, false); off != -1 {
		t.Fatalf("deleted offset after restart: %d", off)
	}
	if off, _ := e.fetch("g", "t", 0, false); off != 5 {
		t.Fatalf("kept offset after restart: %d", off)
	}
}

func TestOffsetExpiration(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.OffsetsRetentionMs = 1000; c.RetentionCheckInterval = 1 })
	if code := e.commit("s", "", -1, "t", 0, 1); code != 0 {
		t.Fatal(code)
	}
	m := e.stableOne("g")
	e.commit("g", m, 1, "t", 0, 5)
	e.advance(500 * 1e6)
	e.heartbeat("g", m, 1)
	e.advance(600 * 1e6)
	e.settle()
	if off, _ := e.fetch("s", "t", 0, false); off != -1 {
		t.Fatalf("simple group's offset not expired: %d", off)
	}
	if off, _ := e.fetch("g", "t", 0, false); off != 5 {
		t.Fatalf("subscribed topic's offset expired: %d", off)
	}
}
