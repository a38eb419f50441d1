package share

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Share sessions (kip-932 2.11; Kafka's ShareSessionCache, SharePartitionManager.newContext
// and acknowledgeSessionUpdate). A session is keyed by (group, member id) on this broker,
// holds the partitions the member fetches here, an epoch and the connection that created
// it. The epoch rules:
//
//   - ShareFetch epoch 0 opens a session (INVALID_REQUEST if it carries acks); an existing
//     session for the key is dropped WITHOUT releasing its records: ownership is by member
//     id, so the member can still acknowledge them. SHARE_SESSION_LIMIT_REACHED when the
//     cache is full.
//   - ShareFetch epoch > 0 must match the session's epoch (else
//     INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND); partitions are
//     added and forgotten, and the epoch advances (wrapping from MaxInt32 to 1).
//   - ShareAcknowledge follows the same rules, except that epoch 0 is
//     INVALID_SHARE_SESSION_EPOCH; it advances the epoch too.
//   - Epoch -1 (either RPC) needs an existing session; acks are applied, nothing is
//     fetched, then the session is removed and the member's records are released.
//   - The close of the connection that created a session removes and releases it as
//     epoch -1 does. A session re-created on another connection is not affected.
//   - A member leaving the share group does not end its sessions (Manager.MemberRemoved):
//     as in Kafka 4.4, the session lives until one of the two closes above, so the
//     acknowledgements a client sends with epoch -1 after its leave heartbeat apply.
//     Sessions stay bounded by the cache's size; a departed member's session is removed
//     when its client closes it or its connection closes.

const (
	initialEpoch = 0
	finalEpoch   = -1
)

// nextEpoch is Kafka's ShareRequestMetadata.nextEpoch.
func nextEpoch(e int32) int32 {
	if e < 0 {
		return finalEpoch
	}
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

type sessionKey struct{ group, member string }

// tp is one topic-partition of a session.
type tp struct {
	topicID   [16]byte
	partition int32
}

type session struct {
	key    sessionKey
	epoch  int32
	connID uint64
	parts  []tp // in the order they were added
	// dirty partitions must appear in the next response even without records: newly
	// added, or answered with an error last time (Kafka's requiresUpdateInResponse).
	dirty map[tp]bool
	// stalls counts the consecutive ShareFetch answers cut short because the member's own
	// records held a partition at the record-lock limit (stallWait); acknowledgements and
	// any other answer reset it.
	stalls int
}

// has reports whether t is in the session; dirty holds every partition of the session.
func (s *session) has(t tp) bool {
	_, ok := s.dirty[t]
	return ok
}

func (s *session) add(t tp) {
	if s.has(t) {
		return
	}
	s.parts = append(s.parts, t)
	s.dirty[t] = true
}

func (s *session) forget(t tp) {
	for i, x := range s.parts {
		if x == t {
			s.parts = append(s.parts[:i], s.parts[i+1:]...)
			break
		}
	}
	delete(s.dirty, t)
}

// sessionCache holds the share sessions; guarded by Manager.mu.
type sessionCache struct {
	max      int
	sessions map[sessionKey]*session
}

func newSessionCache(max int) sessionCache {
	return sessionCache{max: max, sessions: make(map[sessionKey]*session)}
}

// fetchContext resolves a ShareFetch's session (Kafka's newContext). For epoch 0 it
// creates the session with the request's partitions; for epoch > 0 it updates the
// session's partitions and advances its epoch; for -1 it only checks that the session
// exists. It returns the session as it is after the request (a copy of the partition
// list, safe to use without the lock) and the session's epoch before the request.
func (c *sessionCache) fetchContext(key sessionKey, epoch int32, connID uint64, hasAcks bool, add, forget []tp) (parts []tp, dirty map[tp]bool, err *kerr.Error) {
	switch {
	case epoch == finalEpoch:
		s := c.sessions[key]
		if s == nil {
			return nil, nil, kerr.ShareSessionNotFound
		}
		return nil, nil, nil
	case epoch == initialEpoch:
		if hasAcks {
			return nil, nil, kerr.InvalidRequest
		}
		delete(c.sessions, key) // records are kept: ownership is by member id
		if len(c.sessions) >= c.max {
			return nil, nil, kerr.ShareSessionLimitReached
		}
		s := &session{key: key, epoch: nextEpoch(initialEpoch), connID: connID, dirty: make(map[tp]bool)}
		for _, t := range add {
			s.add(t)
		}
		c.sessions[key] = s
		return s.snapshot()
	default:
		s := c.sessions[key]
		if s == nil {
			return nil, nil, kerr.ShareSessionNotFound
		}
		if s.epoch != epoch {
			return nil, nil, kerr.InvalidShareSessionEpoch
		}
		for _, t := range add {
			s.add(t)
		}
		for _, t := range forget {
			s.forget(t)
		}
		s.epoch = nextEpoch(s.epoch)
		return s.snapshot()
	}
}

func (s *session) snapshot() ([]tp, map[tp]bool, *kerr.Error) {
	parts := append([]tp(nil), s.parts...)
	dirty := make(map[tp]bool, len(s.dirty))
	for t, d := range s.dirty {
		if d {
			dirty[t] = true
		}
	}
	return parts, dirty, nil
}

// stallCount returns the session's consecutive answers cut short (session.stalls).
func (c *sessionCache) stallCount(key sessionKey) int {
	if s := c.sessions[key]; s != nil {
		return s.stalls
	}
	return 0
}

// responded records which partitions a response carried: a partition answered without
// an error no longer needs to be sent; one answered with an error must be sent again. It
// counts the answer as a stall (cut short, nothing acquired) or resets the count.
func (c *sessionCache) responded(key sessionKey, sent map[tp]bool, stalled bool) {
	s := c.sessions[key]
	if s == nil {
		return
	}
	if stalled {
		s.stalls++
	} else {
		s.stalls = 0
	}
	for t, hadErr := range sent {
		if _, ok := s.dirty[t]; !ok && !hadErr {
			continue
		}
		if s.has(t) {
			s.dirty[t] = hadErr
		}
	}
}

// ackContext resolves a ShareAcknowledge's session (Kafka's acknowledgeSessionUpdate).
func (c *sessionCache) ackContext(key sessionKey, epoch int32) *kerr.Error {
	if epoch == initialEpoch {
		return kerr.InvalidShareSessionEpoch
	}
	s := c.sessions[key]
	if s == nil {
		return kerr.ShareSessionNotFound
	}
	if epoch == finalEpoch {
		return nil
	}
	if s.epoch != epoch {
		return kerr.InvalidShareSessionEpoch
	}
	s.epoch = nextEpoch(s.epoch)
	s.stalls = 0
	return nil
}

// remove deletes a session; it returns false if there was none.
func (c *sessionCache) remove(key sessionKey) bool {
	if _, ok := c.sessions[key]; !ok {
		return false
	}
	delete(c.sessions, key)
	return true
}

// byConn lists the sessions created by a connection.
func (c *sessionCache) byConn(connID uint64) []sessionKey {
	var keys []sessionKey
	for k, s := range c.sessions {
		if s.connID == connID {
			keys = append(keys, k)
		}
	}
	return keys
}
