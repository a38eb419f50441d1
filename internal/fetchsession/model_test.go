package fetchsession

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"pgregory.net/rapid"
)

// The naive model: sessions as plain slices, every rule spelled out once, no eviction
// (the cache under test has more slots than the model can ever create).

type modelPart struct {
	key               tp
	hw, lso, logStart int64
}

type modelSession struct {
	epoch   int32
	usesIDs bool
	parts   []modelPart
}

type model struct {
	sessions map[int32]*modelSession
}

func (m *modelSession) find(k tp) int {
	for i, p := range m.parts {
		if p.key == k {
			return i
		}
	}
	return -1
}

// expectation is what the model predicts for one fetch.
type expectation struct {
	code       int16
	read       []tp // what the broker is asked to read, in order
	resp       []tp // sorted
	newSession bool // a full fetch that must create a session
	keepID     int32
}

// dedupe returns parts in the order the harness's request carries them: grouped by topic in
// order of first appearance, each partition once.
func dedupe(parts []tp) []tp {
	var topics []string
	byTopic := map[string][]tp{}
	for _, p := range parts {
		if _, ok := byTopic[p.topic]; !ok {
			topics = append(topics, p.topic)
		}
		byTopic[p.topic] = append(byTopic[p.topic], p)
	}
	parts = nil
	for _, t := range topics {
		parts = append(parts, byTopic[t]...)
	}
	var out []tp
	seen := map[tp]bool{}
	for _, p := range parts {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func sortTP(l []tp) []tp {
	out := append([]tp(nil), l...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].part < out[j].part
	})
	return out
}

func (m *model) fetch(h *harness, version int16, sid, epoch int32, parts, forget []tp) expectation {
	parts = dedupe(parts)
	full := version < 7 || epoch == 0 || epoch == -1
	if full {
		if version >= 7 && sid != 0 {
			delete(m.sessions, sid)
		}
		return expectation{read: parts, resp: sortTP(parts), newSession: version >= 7 && epoch == 0}
	}
	s := m.sessions[sid]
	switch {
	case s == nil:
		return expectation{code: kerr.FetchSessionIDNotFound.Code}
	case s.epoch != epoch:
		return expectation{code: kerr.InvalidFetchSessionEpoch.Code}
	case s.usesIDs != (version >= 13):
		return expectation{code: kerr.FetchSessionTopicIDError.Code}
	}
	for _, p := range parts {
		if s.find(p) < 0 {
			s.parts = append(s.parts, modelPart{key: p, hw: -1, lso: -1, logStart: -1})
		}
	}
	for _, f := range forget {
		if i := s.find(f); i >= 0 {
			s.parts = append(s.parts[:i:i], s.parts[i+1:]...)
		}
	}
	if len(s.parts) == 0 {
		delete(m.sessions, sid)
		return expectation{read: parts, resp: sortTP(parts)}
	}
	s.epoch = nextEpoch(s.epoch)
	var read, resp []tp
	var moved []modelPart
	var stay []modelPart
	for _, p := range s.parts {
		read = append(read, p.key)
		st := h.st(p.key.topic, p.key.part)
		must := st.records || st.err != 0 || p.hw != st.hw || p.lso != st.lso || p.logStart != st.logStart
		p.hw, p.lso, p.logStart = st.hw, st.lso, st.logStart
		if st.err != 0 {
			p.hw = -1
		}
		if must {
			resp = append(resp, p.key)
		}
		if st.records {
			moved = append(moved, p)
		} else {
			stay = append(stay, p)
		}
	}
	s.parts = append(stay, moved...)
	return expectation{read: read, resp: sortTP(resp), keepID: sid}
}

// recordFull stores the session a full fetch created in the model.
func (m *model) recordFull(h *harness, id int32, version int16, parts []tp) {
	s := &modelSession{epoch: 1, usesIDs: version >= 13}
	for _, p := range dedupe(parts) {
		st := h.st(p.topic, p.part)
		mp := modelPart{key: p, hw: st.hw, lso: st.lso, logStart: st.logStart}
		if st.err != 0 {
			mp.hw = -1
		}
		s.parts = append(s.parts, mp)
	}
	m.sessions[id] = s
}

var universe = []tp{{"a", 0}, {"a", 1}, {"a", 2}, {"b", 0}, {"b", 1}}

func genParts(t *rapid.T, label string) []tp {
	return rapid.SliceOfN(rapid.SampledFrom(universe), 0, 6).Draw(t, label)
}

func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t, 1000)
		m := &model{sessions: map[int32]*modelSession{}}
		for step := 0; step < 60; step++ {
			// The log moves on.
			for _, p := range universe {
				st := h.st(p.topic, p.part)
				st.records = rapid.Bool().Draw(t, "records")
				switch rapid.IntRange(0, 5).Draw(t, "change") {
				case 0:
					st.hw++
				case 1:
					st.logStart++
				case 2:
					st.lso++
				case 3:
					st.err = rapid.SampledFrom([]int16{0, 0, kerr.NotLeaderForPartition.Code}).Draw(t, "err")
				}
			}
			version := rapid.SampledFrom([]int16{6, 12, 13, 17}).Draw(t, "version")
			var ids []int32
			for id := range m.sessions {
				ids = append(ids, id)
			}
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			sid := int32(0)
			if len(ids) > 0 && rapid.IntRange(0, 4).Draw(t, "pick") > 0 {
				sid = rapid.SampledFrom(ids).Draw(t, "sid")
			} else if rapid.Bool().Draw(t, "bogus") {
				sid = rapid.Int32Range(1, 5000).Draw(t, "bogusID")
			}
			epoch := rapid.SampledFrom([]int32{0, -1, 1}).Draw(t, "epochKind")
			if epoch == 1 && m.sessions[sid] != nil {
				epoch = m.sessions[sid].epoch
				if rapid.IntRange(0, 9).Draw(t, "wrongEpoch") == 0 {
					epoch += rapid.Int32Range(1, 3).Draw(t, "delta")
				}
			}
			if rapid.IntRange(0, 19).Draw(t, "remove") == 0 && sid != 0 {
				h.cache.Remove(sid)
				delete(m.sessions, sid)
			}
			parts, forget := genParts(t, "parts"), genParts(t, "forget")
			if epoch == 0 || epoch == -1 || version < 7 {
				forget = nil
			}
			want := m.fetch(h, version, sid, epoch, parts, forget)
			req := h.request(version, sid, epoch, parts, forget)
			resp, read := h.serve(req)
			where := fmt.Sprintf("step %d v%d sid %d epoch %d", step, version, sid, epoch)
			if resp.ErrorCode != want.code {
				t.Fatalf("%s: code %d, want %d", where, resp.ErrorCode, want.code)
			}
			if got := fetchKeys(read); fmt.Sprint(got) != fmt.Sprint(want.read) {
				t.Fatalf("%s: read %v, want %v", where, got, want.read)
			}
			if got := respParts(resp); fmt.Sprint(got) != fmt.Sprint(want.resp) {
				t.Fatalf("%s: response %v, want %v", where, got, want.resp)
			}
			switch {
			case want.newSession:
				if resp.SessionID <= 0 || m.sessions[resp.SessionID] != nil {
					t.Fatalf("%s: new session id %d", where, resp.SessionID)
				}
				m.recordFull(h, resp.SessionID, version, parts)
			case want.code != 0:
				if resp.SessionID != 0 {
					t.Fatalf("%s: error with session id %d", where, resp.SessionID)
				}
			default:
				if resp.SessionID != want.keepID {
					t.Fatalf("%s: session id %d, want %d", where, resp.SessionID, want.keepID)
				}
			}
			st := h.cache.Stats()
			total := 0
			for _, s := range m.sessions {
				total += len(s.parts)
			}
			if st.Sessions != len(m.sessions) || st.PartitionsCached != total {
				t.Fatalf("%s: stats %+v, model %d sessions %d partitions", where, st, len(m.sessions), total)
			}
		}
	})
}

// kgoClient follows franz-go's kgo fetch-session logic (pkg/kgo/source.go, fetchSession):
// start at id 0 epoch 0; after a response with SessionID > 0 bump the epoch; reset to epoch 0
// on FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH; give up on sessions (epoch
// -1) when the first full fetch gets no session. Its view of each partition is whatever the
// last response that mentioned it said.
type kgoClient struct {
	id, epoch int32
	killed    bool
	inSession map[tp]bool
	view      map[tp]partState
}

func TestKgoClientsSeeEveryChange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		slots := rapid.IntRange(0, 3).Draw(t, "slots")
		h := newHarness(t, slots)
		clients := make([]*kgoClient, rapid.IntRange(1, 5).Draw(t, "clients"))
		for i := range clients {
			clients[i] = &kgoClient{inSession: map[tp]bool{}, view: map[tp]partState{}}
		}
		for step := 0; step < 80; step++ {
			for _, p := range universe {
				st := h.st(p.topic, p.part)
				st.records = rapid.IntRange(0, 3).Draw(t, "records") == 0
				if rapid.IntRange(0, 2).Draw(t, "hw") == 0 {
					st.hw++
					st.lso = st.hw
				}
			}
			h.clock.Advance(time.Duration(rapid.IntRange(0, 90).Draw(t, "secs")) * time.Second)
			c := clients[rapid.IntRange(0, len(clients)-1).Draw(t, "client")]
			var want []tp
			for _, p := range universe {
				if p.part < 2 || c == clients[0] {
					want = append(want, p)
				}
			}
			// kgo sends only partitions new to the session (fetch offsets do not move here).
			var send []tp
			for _, p := range want {
				if c.killed || c.epoch == 0 || !c.inSession[p] {
					send = append(send, p)
				}
			}
			epoch := c.epoch
			if c.killed {
				epoch = -1
			}
			resp, _ := h.serve(h.request(17, c.id, epoch, send, nil))
			switch resp.ErrorCode {
			case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code:
				c.epoch, c.inSession = 0, map[tp]bool{}
				continue
			case 0:
			default:
				t.Fatalf("unexpected error %d", resp.ErrorCode)
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					c.view[tp{rt.Topic, rp.Partition}] = partState{hw: rp.HighWatermark, lso: rp.LastStableOffset, logStart: rp.LogStartOffset}
				}
			}
			if resp.SessionID <= 0 {
				if !c.killed && c.epoch == 0 {
					c.killed = true
				}
				c.inSession = map[tp]bool{}
			} else {
				if resp.SessionID != c.id {
					c.epoch = 0
				}
				c.id = resp.SessionID
				c.epoch = nextEpoch(c.epoch)
				for _, p := range send {
					c.inSession[p] = true
				}
			}
			// Whatever path was taken, the client now knows every partition's state.
			for _, p := range want {
				st := *h.st(p.topic, p.part)
				if got := c.view[p]; got.hw != st.hw || got.lso != st.lso || got.logStart != st.logStart {
					t.Fatalf("step %d: client view of %v is %+v, broker has %+v", step, p, got, st)
				}
			}
			if s := h.cache.Stats(); s.Sessions > slots {
				t.Fatalf("%d sessions in %d slots", s.Sessions, slots)
			}
		}
	})
}
