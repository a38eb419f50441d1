package client

import "math"

// fetchSession is the client half of one KIP-227 incremental fetch session with one broker.
//
// The first fetch is full (session id 0, epoch 0) and asks the broker to create a session.
// Later fetches carry the session id and the next epoch and list only partitions that are
// new or whose fetch offset changed since the broker last saw them; partitions no longer
// wanted go in ForgottenTopics. Any error (a transport failure, FETCH_SESSION_ID_NOT_FOUND,
// INVALID_FETCH_SESSION_EPOCH, or a response that cannot be matched) resets to a full
// fetch. A broker that answers session id 0 does not want sessions: every fetch stays
// full. With sessions disabled the client sends epoch -1, Kafka's "no session" marker.
type fetchSession struct {
	disabled bool
	id       int32
	epoch    int32
	// sent is what the broker's session holds: partition → the fetch offset we last sent.
	sent map[TopicPartition]int64
}

// fetchPlan is one fetch request's session fields and partitions.
type fetchPlan struct {
	sessionID, epoch int32
	full             bool
	include          map[TopicPartition]int64 // partitions in the request, with offsets
	forget           []TopicPartition
}

// plan builds the next request for the partitions we want and their fetch offsets.
func (s *fetchSession) plan(want map[TopicPartition]int64) fetchPlan {
	if s.disabled {
		return fetchPlan{sessionID: 0, epoch: -1, full: true, include: want}
	}
	if s.id == 0 {
		return fetchPlan{sessionID: 0, epoch: 0, full: true, include: want}
	}
	p := fetchPlan{sessionID: s.id, epoch: s.epoch, include: make(map[TopicPartition]int64)}
	for tp, off := range want {
		if prev, ok := s.sent[tp]; !ok || prev != off {
			p.include[tp] = off
		}
	}
	for tp := range s.sent {
		if _, ok := want[tp]; !ok {
			p.forget = append(p.forget, tp)
		}
	}
	return p
}

// succeeded records a successful response to plan p carrying sessionID.
func (s *fetchSession) succeeded(p fetchPlan, sessionID int32) {
	if s.disabled {
		return
	}
	if p.full {
		if sessionID == 0 {
			s.reset() // the broker declined a session
			return
		}
		s.id, s.epoch = sessionID, 1
		s.sent = make(map[TopicPartition]int64, len(p.include))
		for tp, off := range p.include {
			s.sent[tp] = off
		}
		return
	}
	if sessionID != s.id {
		s.reset()
		return
	}
	s.epoch = nextSessionEpoch(s.epoch)
	for tp, off := range p.include {
		s.sent[tp] = off
	}
	for _, tp := range p.forget {
		delete(s.sent, tp)
	}
}

// reset makes the next fetch full and session-creating.
func (s *fetchSession) reset() {
	s.id, s.epoch, s.sent = 0, 0, nil
}

// nextSessionEpoch increments an epoch, wrapping to 1 (0 is reserved for "create").
func nextSessionEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}
