package share

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AlterShareGroupOffsets' reset: records in flight are dropped with the old state, the next
// fetch starts at the new start offset, the state epoch goes up, and it survives a restart.
func TestResetShareStateMovesTheStartOffset(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 10)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep}), topicA, 0, acquired{0, 9, 1})
	before, err := e.store.Read(context.Background(), keyFor(group, topicA, 0), -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.ResetShareState(context.Background(), group, topicA, 0, 0, 6); err != nil {
		t.Fatal(err)
	}
	st, err := e.store.Read(context.Background(), keyFor(group, topicA, 0), -1)
	if err != nil || st.StartOffset != 6 || st.StateEpoch <= before.StateEpoch || len(st.Batches) != 0 {
		t.Fatalf("state after reset %+v (before: epoch %d), err %v", st, before.StateEpoch, err)
	}
	spso, lag, err := e.m.Offsets(context.Background(), group, topicA, 0)
	if err != nil || spso != 6 || lag != 4 {
		t.Fatalf("offsets after reset: %d %d %v", spso, lag, err)
	}
	// The records held by m1 are forgotten: m2 gets 6-9 at delivery count 1.
	e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}}), topicA, 0, acquired{6, 9, 1})
	// m1's acks for the old records change nothing: they are before the start offset now.
	e.ack(ackReq{member: "m1", epoch: ep + 1, acks: acks{0: {ackBatch(0, 9, typeAccept)}}})
	if spso, lag, _ := e.m.Offsets(context.Background(), group, topicA, 0); spso != 6 || lag != 4 {
		t.Fatalf("offsets after stale acks: %d %d", spso, lag)
	}
	e.restart()
	e.wantAcquired(e.fetch(fetchReq{member: "m3", epoch: 0, parts: []int32{0}}), topicA, 0, acquired{6, 9, 1})

	// -1 applies share.auto.offset.reset (latest here); below -1 is refused.
	if err := e.m.ResetShareState(context.Background(), group, topicA, 0, 0, -1); err != nil {
		t.Fatal(err)
	}
	if spso, _, _ := e.m.Offsets(context.Background(), group, topicA, 0); spso != 10 {
		t.Fatalf("reset to latest: spso %d", spso)
	}
	if err := e.m.ResetShareState(context.Background(), group, topicA, 0, 0, -2); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("start offset -2: %v", err)
	}
	if err := e.m.ResetShareState(context.Background(), group, topicA, 9, 0, 0); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("missing partition: %v", err)
	}
}

func TestDeleteShareStateDropsTheLivePartition(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 5)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep}), topicA, 0, acquired{0, 4, 1})
	if err := e.m.DeleteShareState(context.Background(), group, topicA, 0); err != nil {
		t.Fatal(err)
	}
	if d := e.m.Describe(group); len(d) != 0 {
		t.Fatalf("live after delete: %+v", d)
	}
	if spso, lag, err := e.m.Offsets(context.Background(), group, topicA, 0); err != nil || spso != -1 || lag != -1 {
		t.Fatalf("offsets after delete: %d %d %v", spso, lag, err)
	}
	// Initialized again (as the group coordinator does on the next assignment), it starts
	// from share.auto.offset.reset, here earliest.
	e.groups[group] = GroupConfig{AutoOffsetReset: "earliest"}
	e.init(group, topicA, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}}), topicA, 0, acquired{0, 4, 1})
}

func TestDropAllForgetsSessionsAndLocks(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 5)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep}), topicA, 0, acquired{0, 4, 1})
	e.m.DropAll()
	r := e.fetch(fetchReq{member: "m1", epoch: ep + 1})
	wantCode(t, "fetch in a dropped session", r.ErrorCode, kerr.ShareSessionNotFound)
	// The acquired records come back from the store as after a restart.
	e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}}), topicA, 0, acquired{0, 4, 1})
}
