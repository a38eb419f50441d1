package fetchsession

import (
	"container/list"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultMaxSlots is max.incremental.fetch.session.cache.slots' default.
const DefaultMaxSlots = 1000

// DefaultEvictionAge is Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (KafkaBroker.scala).
const DefaultEvictionAge = 120 * time.Second

// Error codes the cache answers.
var (
	errSessionIDNotFound = kerr.FetchSessionIDNotFound.Code   // 70
	errInvalidEpoch      = kerr.InvalidFetchSessionEpoch.Code // 71
	errTopicIDError      = kerr.FetchSessionTopicIDError.Code // 106
)

// Option configures a Cache.
type Option func(*Cache)

// WithTopicNames sets how topic ids (fetch v13+) resolve to names. It is called under the
// cache's lock and must not call back into the cache. Without it every id is unresolved.
func WithTopicNames(f func(id [16]byte) (string, bool)) Option {
	return func(c *Cache) { c.topicName = f }
}

// WithSessionIDs replaces the random session id source (tests use it for determinism).
// Ids it returns that are ≤ 0 or in use are skipped.
func WithSessionIDs(f func() int32) Option { return func(c *Cache) { c.newID = f } }

// WithEvictionAge overrides DefaultEvictionAge.
func WithEvictionAge(d time.Duration) Option {
	return func(c *Cache) { c.evictionMs = d.Milliseconds() }
}

// Cache holds the broker's incremental fetch sessions.
type Cache struct {
	now        func() time.Time
	topicName  func([16]byte) (string, bool)
	newID      func() int32
	maxSlots   int
	evictionMs int64

	mu        sync.Mutex // guards everything below and every session's fields
	sessions  map[int32]*session
	numParts  int // sum of cachedSize over sessions (Kafka's NumIncrementalFetchPartitionsCached)
	evictions uint64
}

// NewCache returns a cache with room for maxSlots sessions (0 disables sessions) reading
// time from now.
func NewCache(maxSlots int, now func() time.Time, opts ...Option) *Cache {
	if maxSlots < 0 {
		panic("fetchsession: negative maxSlots")
	}
	c := &Cache{
		now:        now,
		topicName:  func([16]byte) (string, bool) { return "", false },
		newID:      func() int32 { return rand.Int32N(math.MaxInt32) },
		maxSlots:   maxSlots,
		evictionMs: DefaultEvictionAge.Milliseconds(),
		sessions:   map[int32]*session{},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Stats are the cache's gauges (Kafka's FetchSessionCache metrics).
type Stats struct {
	Sessions         int
	PartitionsCached int
	Evictions        uint64
}

// Stats returns the current gauges.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Sessions: len(c.sessions), PartitionsCached: c.numParts, Evictions: c.evictions}
}

// Remove closes a session; it reports whether the session existed.
func (c *Cache) Remove(sessionID int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[sessionID]
	if s == nil {
		return false
	}
	c.remove(s)
	return true
}

// RemoveConn closes the sessions last used on a connection and returns how many. Kafka keeps
// sessions across connections until they are evicted; calling this on connection close is
// an exactq choice that frees slots early. A client that reconnects and continues its
// session gets FETCH_SESSION_ID_NOT_FOUND and starts a new one with a full fetch (kgo does).
func (c *Cache) RemoveConn(connID uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.sessions {
		if s.connID == connID {
			c.remove(s)
			n++
		}
	}
	return n
}

// session is one cached fetch session. Its fields are guarded by Cache.mu.
type session struct {
	id         int32
	epoch      int32 // the epoch the next incremental request must carry
	privileged bool  // created by a follower
	usesIDs    bool  // created at fetch v13+
	createdMs  int64
	lastUsedMs int64
	connID     uint64
	// cachedSize is the partition count at the last touch, -1 when not in the cache; the
	// eviction order uses it, as Kafka's EvictableKey does.
	cachedSize int
	// evictableByAll: at the last touch the session was older than the eviction age.
	evictableByAll bool

	order *list.List // of *cachedPartition, in the session's fetch order
	index map[pkey]*list.Element
}

// pkey identifies a partition in a session: by topic id when the session uses ids, else by
// name.
type pkey struct {
	id        [16]byte
	name      string
	partition int32
}

type cachedPartition struct {
	fetch PartitionFetch
	// What the session last sent; -1 = nothing yet (forces the next response to include it).
	highWatermark    int64
	lastStableOffset int64
	logStartOffset   int64
}

func keyOf(k PartitionKey, usesIDs bool) pkey {
	if usesIDs {
		return pkey{id: k.TopicID, partition: k.Partition}
	}
	return pkey{name: k.Topic, partition: k.Partition}
}

func nextEpoch(e int32) int32 {
	switch {
	case e < 0:
		return -1
	case e == math.MaxInt32:
		return 1
	}
	return e + 1
}

// touch is FetchSessionCacheShard.touch: refresh last use, cached size and evictability.
func (c *Cache) touch(s *session, nowMs int64) {
	s.lastUsedMs = nowMs
	if s.cachedSize >= 0 {
		c.numParts -= s.cachedSize
	}
	s.cachedSize = s.order.Len()
	c.numParts += s.cachedSize
	s.evictableByAll = nowMs-s.createdMs > c.evictionMs
}

func (c *Cache) remove(s *session) {
	if c.sessions[s.id] != s {
		return
	}
	delete(c.sessions, s.id)
	c.numParts -= s.cachedSize
	s.cachedSize = -1
}

// evictableByPrivileged is Kafka's second eviction tree: consumers' sessions at any age,
// followers' sessions once old.
func (s *session) evictableByPrivileged() bool { return !s.privileged || s.evictableByAll }

// lessValuable orders Kafka's EvictableKey: unprivileged first, then fewer partitions, then
// lower id.
func lessValuable(aPriv bool, aSize int, aID int32, bPriv bool, bSize int, bID int32) bool {
	if aPriv != bPriv {
		return !aPriv
	}
	if aSize != bSize {
		return aSize < bSize
	}
	return aID < bID
}

// tryEvict is FetchSessionCacheShard.tryEvict. It scans all sessions: it runs only when a
// full fetch wants a session and every slot is taken, and slots are bounded (1000 by
// default), so a scan is cheaper to get right than Kafka's three ordered trees.
func (c *Cache) tryEvict(privileged bool, size int, nowMs int64) bool {
	var lru *session
	for _, s := range c.sessions {
		if lru == nil || s.lastUsedMs < lru.lastUsedMs || (s.lastUsedMs == lru.lastUsedMs && s.id < lru.id) {
			lru = s
		}
	}
	if lru == nil {
		return false
	}
	if nowMs-lru.lastUsedMs > c.evictionMs {
		c.remove(lru)
		c.evictions++
		return true
	}
	var victim *session
	for _, s := range c.sessions {
		ok := s.evictableByAll
		if privileged {
			ok = s.evictableByPrivileged()
		}
		if ok && (victim == nil || lessValuable(s.privileged, s.cachedSize, s.id, victim.privileged, victim.cachedSize, victim.id)) {
			victim = s
		}
	}
	// The new session's key has id 0, below every real id: it wins only when it is
	// strictly more valuable.
	if victim == nil || lessValuable(privileged, size, 0, victim.privileged, victim.cachedSize, victim.id) {
		return false
	}
	c.remove(victim)
	c.evictions++
	return true
}

// maybeCreate is FetchSessionCacheShard.maybeCreateSession; it returns nil when there is no
// room.
func (c *Cache) maybeCreate(nowMs int64, privileged, usesIDs bool, connID uint64, parts []*cachedPartition) *session {
	if len(c.sessions) >= c.maxSlots && !c.tryEvict(privileged, len(parts), nowMs) {
		return nil
	}
	if len(c.sessions) >= c.maxSlots {
		return nil // maxSlots == 0
	}
	s := &session{
		id:         c.freshID(),
		epoch:      nextEpoch(0),
		privileged: privileged,
		usesIDs:    usesIDs,
		createdMs:  nowMs,
		connID:     connID,
		cachedSize: -1,
		order:      list.New(),
		index:      make(map[pkey]*list.Element, len(parts)),
	}
	for _, p := range parts {
		k := keyOf(p.fetch.Key, usesIDs)
		if _, dup := s.index[k]; dup {
			continue
		}
		s.index[k] = s.order.PushBack(p)
	}
	c.sessions[s.id] = s
	c.touch(s, nowMs)
	return s
}

func (c *Cache) freshID() int32 {
	for {
		id := c.newID()
		if id > 0 && c.sessions[id] == nil {
			return id
		}
	}
}

// mustNotBeNil documents an invariant for readers and catches misuse early.
func mustNotBeNil(resp *kmsg.FetchResponse) {
	if resp == nil {
		panic("fetchsession: nil response")
	}
}
