package conformance

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-227 incremental fetch sessions over the wire: the session a consumer (kgo, Java)
// opens with a full fetch, the incremental fetches that carry only what changed, and the
// session errors. The session cache itself is tested in internal/fetchsession; this is the
// broker's use of it as a client sees it.

// vFetch is Kafka 4.4's newest Fetch without KIP-1166 node endpoints: topic ids, no names.
const vFetch int16 = 16

const sessionTopic = "fs"

// sessionPart is one partition of a fetch request: its fetch offset.
type sessionPart struct {
	partition int32
	offset    int64
}

// fetchSession sends one Fetch of sessionTopic with the session fields given; parts are
// the partitions the request lists (added, or changed in an incremental fetch), forget
// those it forgets.
func (c *wireConn) fetchSession(topicID [16]byte, sessionID, epoch int32, parts []sessionPart, forget ...int32) *kmsg.FetchResponse {
	c.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = vFetch
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 1<<20
	req.SessionID, req.SessionEpoch = sessionID, epoch
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = topicID
		for _, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.partition, p.offset, 1<<20
			rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.TopicID, ft.Partitions = topicID, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return c.roundTrip(req).(*kmsg.FetchResponse)
}

// fetchedOffsets returns, per partition the response lists, the offsets of the records it
// carries (possibly none: a partition listed for its high watermark alone).
func fetchedOffsets(t testing.TB, resp *kmsg.FetchResponse) map[int32][]int64 {
	t.Helper()
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	got := map[int32][]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("fetch partition %d: %v", rp.Partition, err)
			}
			offsets := []int64{}
			for o := range recordOffsets(t, rp.RecordBatches) {
				offsets = append(offsets, o)
			}
			slices.Sort(offsets)
			got[rp.Partition] = offsets
		}
	}
	return got
}

func wantFetched(t testing.TB, what string, resp *kmsg.FetchResponse, want map[int32][]int64) {
	t.Helper()
	got := fetchedOffsets(t, resp)
	if len(got) != len(want) {
		t.Fatalf("%s: partitions %v, want %v", what, got, want)
	}
	for p, w := range want {
		if g, ok := got[p]; !ok || !slices.Equal(g, w) {
			t.Fatalf("%s: partitions %v, want %v", what, got, want)
		}
	}
}

func offsets(from, to int64) []int64 {
	var o []int64
	for i := from; i < to; i++ {
		o = append(o, i)
	}
	return o
}

// TestIncrementalFetchSession: a full fetch (epoch 0) opens a session and returns every
// listed partition; an incremental fetch (epoch 1, no partitions) with nothing new lists
// no partition; after a produce to one partition, the next incremental fetch lists only
// that one, with the new records; a forgotten partition is not listed again although it
// has new records. A sessionless fetch (epoch -1) reads the same records with session id 0.
func TestIncrementalFetchSession(t *testing.T) {
	e := newEnv(t, nil)
	id := e.createTopic(sessionTopic, 3)
	for p := range int32(3) {
		e.produce(sessionTopic, p, 3)
	}
	c := e.dial()
	all := []sessionPart{{0, 0}, {1, 0}, {2, 0}}

	full := c.fetchSession(id, 0, 0, all)
	wantFetched(t, "full fetch", full, map[int32][]int64{0: offsets(0, 3), 1: offsets(0, 3), 2: offsets(0, 3)})
	sid := full.SessionID
	if sid == 0 {
		t.Fatal("a full fetch with epoch 0 got session id 0: no session was opened")
	}

	// The positions moved to 3: the incremental fetch says so, and nothing is new.
	moved := []sessionPart{{0, 3}, {1, 3}, {2, 3}}
	r := c.fetchSession(id, sid, 1, moved)
	wantFetched(t, "incremental fetch, nothing new", r, nil)
	if r.SessionID != sid {
		t.Fatalf("incremental fetch answered with session %d, want %d", r.SessionID, sid)
	}

	e.produce(sessionTopic, 1, 2)
	wantFetched(t, "incremental fetch after a produce to partition 1", c.fetchSession(id, sid, 2, nil), map[int32][]int64{1: offsets(3, 5)})

	// Partition 1's position moves to 5 and partition 2 leaves the session.
	e.produce(sessionTopic, 2, 1)
	wantFetched(t, "incremental fetch with partition 2 forgotten", c.fetchSession(id, sid, 3, []sessionPart{{1, 5}}, 2), nil)
	e.produce(sessionTopic, 0, 1)
	wantFetched(t, "incremental fetch after produces to 0 and 2", c.fetchSession(id, sid, 4, nil), map[int32][]int64{0: offsets(3, 4)})

	less := c.fetchSession(id, 0, -1, all)
	if less.SessionID != 0 {
		t.Fatalf("a sessionless fetch got session id %d, want 0", less.SessionID)
	}
	wantFetched(t, "sessionless fetch", less, map[int32][]int64{0: offsets(0, 4), 1: offsets(0, 5), 2: offsets(0, 4)})
}

// TestFetchSessionErrors: an incremental fetch with an epoch other than the session's next
// is INVALID_FETCH_SESSION_EPOCH and leaves the session usable at its epoch; an unknown
// session id is FETCH_SESSION_ID_NOT_FOUND; epoch -1 with the session's id closes it
// (Kafka: a full sessionless fetch), after which the id is not found. The session is not
// tied to its connection: a second connection carries it on.
func TestFetchSessionErrors(t *testing.T) {
	e := newEnv(t, nil)
	id := e.createTopic(sessionTopic, 1)
	e.produce(sessionTopic, 0, 2)
	c := e.dial()
	full := c.fetchSession(id, 0, 0, []sessionPart{{0, 0}})
	wantFetched(t, "full fetch", full, map[int32][]int64{0: offsets(0, 2)})
	sid := full.SessionID

	wantCode := func(what string, r *kmsg.FetchResponse, want *kerr.Error) {
		t.Helper()
		if err := kerr.ErrorForCode(r.ErrorCode); !errors.Is(err, want) || len(r.Topics) != 0 {
			t.Fatalf("%s: %v with %d topics, want %v and none", what, err, len(r.Topics), want)
		}
	}
	wantCode("epoch 5 of a session at epoch 1", c.fetchSession(id, sid, 5, nil), kerr.InvalidFetchSessionEpoch)
	wantCode("unknown session id", c.fetchSession(id, sid+1, 1, nil), kerr.FetchSessionIDNotFound)

	e.produce(sessionTopic, 0, 1)
	other := e.dial()
	wantFetched(t, "epoch 1 on another connection", other.fetchSession(id, sid, 1, []sessionPart{{0, 2}}), map[int32][]int64{0: offsets(2, 3)})

	closed := other.fetchSession(id, sid, -1, []sessionPart{{0, 0}})
	if closed.SessionID != 0 {
		t.Fatalf("closing fetch got session id %d, want 0", closed.SessionID)
	}
	wantFetched(t, "closing fetch", closed, map[int32][]int64{0: offsets(0, 3)})
	wantCode("the closed session", c.fetchSession(id, sid, 2, nil), kerr.FetchSessionIDNotFound)
}
