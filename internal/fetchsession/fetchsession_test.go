package fetchsession

import (
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testclock"
)

// seqIDs hands out session ids 1, 2, 3... so tests are deterministic.
func seqIDs() func() int32 {
	var n int32
	return func() int32 { n++; return n }
}

type tp struct {
	topic string
	part  int32
}

// partState is what the fake broker knows of a partition.
type partState struct {
	hw, lso, logStart int64
	err               int16
	records           bool
}

// fataler is *testing.T or *rapid.T.
type fataler interface {
	Fatalf(format string, args ...any)
}

type harness struct {
	t     fataler
	clock *testclock.Clock
	cache *Cache
	state map[tp]*partState
	ids   map[string][16]byte
}

func newHarness(t fataler, slots int) *harness {
	h := &harness{t: t, clock: testclock.New(), state: map[tp]*partState{}, ids: map[string][16]byte{}}
	names := func(id [16]byte) (string, bool) {
		for n, i := range h.ids {
			if i == id {
				return n, true
			}
		}
		return "", false
	}
	h.cache = NewCache(slots, h.clock.Now, WithSessionIDs(seqIDs()), WithTopicNames(names))
	return h
}

func (h *harness) id(topic string) [16]byte {
	if id, ok := h.ids[topic]; ok {
		return id
	}
	var id [16]byte
	id[0] = byte(len(h.ids) + 1)
	id[15] = 0xee
	h.ids[topic] = id
	return id
}

func (h *harness) st(topic string, part int32) *partState {
	k := tp{topic, part}
	if h.state[k] == nil {
		h.state[k] = &partState{hw: 0, lso: 0, logStart: 0}
	}
	return h.state[k]
}

// request builds a fetch request of the given version.
func (h *harness) request(version int16, sessionID, epoch int32, parts []tp, forget []tp) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.SessionID, req.SessionEpoch = sessionID, epoch
	byTopic := map[string]int{}
	for _, p := range parts {
		i, ok := byTopic[p.topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			if version >= 13 {
				t.TopicID = h.id(p.topic)
			} else {
				t.Topic = p.topic
			}
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[p.topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.part
		rp.PartitionMaxBytes = 1 << 20
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	for _, p := range forget {
		ft := kmsg.NewFetchRequestForgottenTopic()
		if version >= 13 {
			ft.TopicID = h.id(p.topic)
		} else {
			ft.Topic = p.topic
		}
		ft.Partitions = []int32{p.part}
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// serve plays the broker: Begin, answer every partition from state, Finish. It returns the
// response and the partitions the broker was asked to read.
func (h *harness) serve(req *kmsg.FetchRequest) (*kmsg.FetchResponse, []PartitionFetch) {
	ctx, code := h.cache.Begin(req, 7)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	parts := ctx.Partitions()
	if code != 0 && len(parts) != 0 {
		h.t.Fatalf("error context has partitions")
	}
	for _, f := range parts {
		name := f.Key.Topic
		st := h.st(name, f.Key.Partition)
		var ti = -1
		for i := range resp.Topics {
			if resp.Topics[i].Topic == name {
				ti = i
			}
		}
		if ti < 0 {
			t := kmsg.NewFetchResponseTopic()
			t.Topic = name
			if ctx.UsesTopicIDs() {
				t.TopicID = f.Key.TopicID
			}
			resp.Topics = append(resp.Topics, t)
			ti = len(resp.Topics) - 1
		}
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition = f.Key.Partition
		p.HighWatermark, p.LastStableOffset, p.LogStartOffset, p.ErrorCode = st.hw, st.lso, st.logStart, st.err
		if st.records {
			p.RecordBatches = []byte{1}
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, p)
	}
	ctx.Finish(resp)
	if resp.ErrorCode != code {
		h.t.Fatalf("Finish error %d, Begin said %d", resp.ErrorCode, code)
	}
	return resp, parts
}

func respParts(resp *kmsg.FetchResponse) []tp {
	var out []tp
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, tp{t.Topic, p.Partition})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].part < out[j].part
	})
	return out
}

func eqParts(t *testing.T, what string, got, want []tp) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
}

func fetchKeys(fs []PartitionFetch) []tp {
	var out []tp
	for _, f := range fs {
		out = append(out, tp{f.Key.Topic, f.Key.Partition})
	}
	return out
}

var a0, a1, b0 = tp{"a", 0}, tp{"a", 1}, tp{"b", 0}

// KIP-227: a full fetch creates a session; an incremental fetch with no changes returns an
// empty partition list.
func TestFullThenIncrementalNoChanges(t *testing.T) {
	for _, v := range []int16{12, 13, 17} {
		h := newHarness(t, 10)
		resp, _ := h.serve(h.request(v, 0, 0, []tp{a0, a1}, nil))
		if resp.SessionID != 1 || resp.ErrorCode != 0 {
			t.Fatalf("v%d: session %d err %d", v, resp.SessionID, resp.ErrorCode)
		}
		eqParts(t, "full", respParts(resp), []tp{a0, a1})
		resp, asked := h.serve(h.request(v, 1, 1, nil, nil))
		eqParts(t, "broker reads the session's partitions", fetchKeys(asked), []tp{a0, a1})
		if resp.SessionID != 1 || len(resp.Topics) != 0 {
			t.Fatalf("v%d: incremental without changes: %+v", v, resp)
		}
		// A high watermark change is sent once.
		h.st("a", 1).hw = 5
		resp, _ = h.serve(h.request(v, 1, 2, nil, nil))
		eqParts(t, "hw change", respParts(resp), []tp{a1})
		resp, _ = h.serve(h.request(v, 1, 3, nil, nil))
		eqParts(t, "hw sent", respParts(resp), nil)
	}
}

func TestIncrementalSendsChanges(t *testing.T) {
	h := newHarness(t, 10)
	h.serve(h.request(12, 0, 0, []tp{a0, a1, b0}, nil))
	h.st("a", 0).records = true
	h.st("b", 0).logStart = 3
	h.st("a", 1).lso = 2
	resp, _ := h.serve(h.request(12, 1, 1, nil, nil))
	eqParts(t, "records, log start, lso", respParts(resp), []tp{a0, a1, b0})
	h.st("b", 0).logStart = 3
	h.st("a", 1).lso = 2
	resp, _ = h.serve(h.request(12, 1, 2, nil, nil))
	eqParts(t, "records always sent", respParts(resp), []tp{a0})
	// Partitions that returned records move to the back of the fetch order.
	_, asked := h.serve(h.request(12, 1, 3, nil, nil))
	eqParts(t, "order", fetchKeys(asked), []tp{a1, b0, a0})
}

func TestErrorsAreResentAfterClearing(t *testing.T) {
	h := newHarness(t, 10)
	h.serve(h.request(12, 0, 0, []tp{a0}, nil))
	h.st("a", 0).err = kerr.NotLeaderForPartition.Code
	resp, _ := h.serve(h.request(12, 1, 1, nil, nil))
	eqParts(t, "error", respParts(resp), []tp{a0})
	h.st("a", 0).err = 0
	resp, _ = h.serve(h.request(12, 1, 2, nil, nil))
	eqParts(t, "cleared error resends", respParts(resp), []tp{a0})
	resp, _ = h.serve(h.request(12, 1, 3, nil, nil))
	eqParts(t, "then quiet", respParts(resp), nil)
}

// KIP-227: incremental requests add partitions and ForgottenTopics remove them.
func TestAddAndForgetPartitions(t *testing.T) {
	for _, v := range []int16{12, 13} {
		h := newHarness(t, 10)
		h.serve(h.request(v, 0, 0, []tp{a0}, nil))
		resp, asked := h.serve(h.request(v, 1, 1, []tp{b0}, nil))
		eqParts(t, "added partition is read", fetchKeys(asked), []tp{a0, b0})
		eqParts(t, "added partition is new to the client", respParts(resp), []tp{b0})
		resp, asked = h.serve(h.request(v, 1, 2, nil, []tp{a0}))
		eqParts(t, "forgotten", fetchKeys(asked), []tp{b0})
		if resp.SessionID != 1 {
			t.Fatal("session lost")
		}
		// Forgetting the last partition closes the session; that request is served
		// sessionless.
		resp, _ = h.serve(h.request(v, 1, 3, nil, []tp{b0}))
		if resp.SessionID != 0 || resp.ErrorCode != 0 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		resp, _ = h.serve(h.request(v, 1, 4, nil, nil))
		if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("v%d: closed session still there", v)
		}
	}
}

// KIP-227: a request with the wrong epoch is answered INVALID_FETCH_SESSION_EPOCH and
// leaves the session usable at the right epoch.
func TestWrongEpoch(t *testing.T) {
	h := newHarness(t, 10)
	h.serve(h.request(12, 0, 0, []tp{a0}, nil))
	for _, e := range []int32{2, 5, -7} {
		resp, _ := h.serve(h.request(12, 1, e, nil, nil))
		if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || resp.SessionID != 0 || resp.Topics != nil {
			t.Fatalf("epoch %d: %+v", e, resp)
		}
	}
	resp, _ := h.serve(h.request(12, 1, 1, nil, nil))
	if resp.ErrorCode != 0 || resp.SessionID != 1 {
		t.Fatalf("right epoch: %+v", resp)
	}
}

// A request begun while another of the same session is in flight wins; the older one is
// answered INVALID_FETCH_SESSION_EPOCH at Finish.
func TestDuplicateInFlight(t *testing.T) {
	h := newHarness(t, 10)
	h.serve(h.request(12, 0, 0, []tp{a0}, nil))
	first, _ := h.cache.Begin(h.request(12, 1, 1, nil, nil), 7)
	h.serve(h.request(12, 1, 2, nil, nil))
	resp := kmsg.NewPtrFetchResponse()
	first.Finish(resp)
	if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || resp.SessionID != 1 {
		t.Fatalf("%+v", resp)
	}
}

// KIP-227: an unknown session id is FETCH_SESSION_ID_NOT_FOUND.
func TestUnknownSession(t *testing.T) {
	h := newHarness(t, 10)
	resp, _ := h.serve(h.request(12, 42, 1, []tp{a0}, nil))
	if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || resp.SessionID != 0 {
		t.Fatalf("%+v", resp)
	}
	h.serve(h.request(12, 0, 0, []tp{a0}, nil))
	if !h.cache.Remove(1) || h.cache.Remove(1) {
		t.Fatal("Remove")
	}
	resp, _ = h.serve(h.request(12, 1, 1, nil, nil))
	if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("%+v", resp)
	}
}

func TestTopicIDVersionMismatch(t *testing.T) {
	h := newHarness(t, 10)
	h.serve(h.request(13, 0, 0, []tp{a0}, nil))
	resp, _ := h.serve(h.request(12, 1, 1, nil, nil))
	if resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("%+v", resp)
	}
	h.serve(h.request(12, 0, 0, []tp{a0}, nil)) // session 2 by name
	resp, _ = h.serve(h.request(13, 2, 1, nil, nil))
	if resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("%+v", resp)
	}
}

// v13+: an unknown topic id gives an empty Topic; once metadata knows it, later requests
// resolve the name.
func TestUnknownTopicIDResolvedLater(t *testing.T) {
	h := newHarness(t, 10)
	req := h.request(13, 0, 0, []tp{a0}, nil)
	id := h.ids["a"]
	delete(h.ids, "a")
	ctx, _ := h.cache.Begin(req, 1)
	if ps := ctx.Partitions(); ps[0].Key.Topic != "" || ps[0].Key.TopicID != id {
		t.Fatalf("%+v", ps)
	}
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.TopicID = id
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.ErrorCode = kerr.UnknownTopicID.Code
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	ctx.Finish(resp)
	h.ids["a"] = id
	ctx, code := h.cache.Begin(h.request(13, resp.SessionID, 1, nil, nil), 1)
	if code != 0 || ctx.Partitions()[0].Key.Topic != "a" {
		t.Fatalf("code %d %+v", code, ctx.Partitions())
	}
}

// KIP-227: epoch -1 is a sessionless full fetch; a session id given with it is closed.
func TestSessionless(t *testing.T) {
	h := newHarness(t, 10)
	h.serve(h.request(12, 0, 0, []tp{a0}, nil))
	resp, asked := h.serve(h.request(12, 1, -1, []tp{a1}, nil))
	if resp.SessionID != 0 || resp.ErrorCode != 0 {
		t.Fatalf("%+v", resp)
	}
	eqParts(t, "sessionless reads the request", fetchKeys(asked), []tp{a1})
	eqParts(t, "sessionless answers everything", respParts(resp), []tp{a1})
	if h.cache.Stats().Sessions != 0 {
		t.Fatal("epoch -1 must close the named session")
	}
	// Before v7 there are no sessions at all.
	req := h.request(6, 0, 0, []tp{a0}, nil)
	if resp, _ := h.serve(req); resp.SessionID != 0 || h.cache.Stats().Sessions != 0 {
		t.Fatal("v6 created a session")
	}
}

// A full fetch naming an existing session closes it and opens a new one.
func TestFullFetchReplacesSession(t *testing.T) {
	h := newHarness(t, 10)
	h.serve(h.request(12, 0, 0, []tp{a0}, nil))
	resp, _ := h.serve(h.request(12, 1, 0, []tp{a0, b0}, nil))
	if resp.SessionID != 2 || h.cache.Stats().Sessions != 1 || h.cache.Stats().PartitionsCached != 2 {
		t.Fatalf("%+v %+v", resp, h.cache.Stats())
	}
}

// KIP-227 eviction: with every slot used, a new session may only evict an idle session or
// an older one with fewer partitions.
func TestEvictionUnderSlotPressure(t *testing.T) {
	h := newHarness(t, 2)
	h.serve(h.request(12, 0, 0, []tp{a0}, nil))     // session 1: 1 partition
	h.serve(h.request(12, 0, 0, []tp{a0, a1}, nil)) // session 2: 2 partitions
	resp, _ := h.serve(h.request(12, 0, 0, []tp{a0, a1, b0}, nil))
	if resp.SessionID != 0 {
		t.Fatal("young sessions must not be evicted")
	}
	// Keep both sessions in use past the eviction age so they become evictable.
	h.clock.Advance(DefaultEvictionAge + time.Millisecond)
	h.serve(h.request(12, 1, 1, nil, nil))
	h.serve(h.request(12, 2, 1, nil, nil))
	resp, _ = h.serve(h.request(12, 0, 0, []tp{b0}, nil))
	if resp.SessionID != 0 {
		t.Fatal("a session with 1 partition must not evict one with as many")
	}
	resp, _ = h.serve(h.request(12, 0, 0, []tp{a0, b0}, nil))
	if resp.SessionID != 3 {
		t.Fatalf("2 partitions must evict the 1-partition session, got %d", resp.SessionID)
	}
	if r, _ := h.serve(h.request(12, 1, 2, nil, nil)); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatal("session 1 should be gone")
	}
	if st := h.cache.Stats(); st.Sessions != 2 || st.Evictions != 1 || st.PartitionsCached != 4 {
		t.Fatalf("%+v", st)
	}
	// An idle session (unused longer than the eviction age) goes first, whatever its size.
	h.clock.Advance(time.Minute)
	h.serve(h.request(12, 2, 2, nil, nil)) // session 2 in use
	h.clock.Advance(DefaultEvictionAge)
	resp, _ = h.serve(h.request(12, 0, 0, []tp{a0}, nil))
	if resp.SessionID != 4 {
		t.Fatalf("stale session 3 should make room, got %d", resp.SessionID)
	}
	if r, _ := h.serve(h.request(12, 3, 1, nil, nil)); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatal("session 3 should be gone")
	}
}

func TestZeroSlotsDisablesSessions(t *testing.T) {
	h := newHarness(t, 0)
	if resp, _ := h.serve(h.request(12, 0, 0, []tp{a0}, nil)); resp.SessionID != 0 {
		t.Fatal("session created with 0 slots")
	}
}

func TestEpochWraps(t *testing.T) {
	if nextEpoch(1<<31-1) != 1 || nextEpoch(-1) != -1 || nextEpoch(0) != 1 {
		t.Fatal("nextEpoch")
	}
}

func TestRemoveConn(t *testing.T) {
	h := newHarness(t, 10)
	h.serve(h.request(12, 0, 0, []tp{a0}, nil))
	if h.cache.RemoveConn(8) != 0 || h.cache.RemoveConn(7) != 1 || h.cache.Stats().Sessions != 0 {
		t.Fatal("RemoveConn")
	}
}

func TestThrottled(t *testing.T) {
	h := newHarness(t, 10)
	ctx, _ := h.cache.Begin(h.request(12, 0, 0, []tp{a0}, nil), 1)
	resp := kmsg.NewPtrFetchResponse()
	ctx.Throttled(resp)
	if resp.SessionID != 0 || h.cache.Stats().Sessions != 0 {
		t.Fatal("throttled full fetch must not create a session")
	}
}
