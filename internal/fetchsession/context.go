package fetchsession

import (
	"container/list"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionKey names a partition. TopicID is set from fetch v13 on, Topic before v13; for
// v13+ Topic is the resolved name, or "" when the id is unknown (answer UNKNOWN_TOPIC_ID).
type PartitionKey struct {
	TopicID   [16]byte
	Topic     string
	Partition int32
}

// PartitionFetch is what to fetch for one partition, from the request or, for partitions
// an incremental request did not mention, from the session.
type PartitionFetch struct {
	Key                PartitionKey
	FetchOffset        int64
	LogStartOffset     int64 // the follower's log start offset; -1 from consumers
	MaxBytes           int32
	CurrentLeaderEpoch int32 // -1 = not given
	LastFetchedEpoch   int32 // -1 = not given
}

type mode uint8

const (
	modeError mode = iota
	modeSessionless
	modeFull
	modeIncremental
)

// Context is one fetch request resolved against the cache. It is used by one goroutine:
// Partitions, then exactly one of Finish or Throttled.
type Context struct {
	c        *Cache
	mode     mode
	errCode  int16
	usesIDs  bool
	priv     bool
	connID   uint64
	parts    []PartitionFetch
	session  *session // incremental
	expected int32    // incremental: the session epoch Finish expects (nextEpoch(request epoch))
	done     bool
}

// Begin resolves a fetch request against the cache. A non-zero code is a session error
// for the whole response (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
// FETCH_SESSION_TOPIC_ID_ERROR); the context then has no partitions and Finish writes the
// error response.
func (c *Cache) Begin(req *kmsg.FetchRequest, connID uint64) (*Context, int16) {
	version := req.GetVersion()
	usesIDs := version >= 13
	priv := req.ReplicaID >= 0
	if version >= 15 {
		priv = req.ReplicaState.ID >= 0
	}
	ctx := &Context{c: c, usesIDs: usesIDs, priv: priv, connID: connID}

	c.mu.Lock()
	defer c.mu.Unlock()
	fetches := c.requestPartitions(req, usesIDs)

	sessionID, epoch := req.SessionID, req.SessionEpoch
	if version < 7 {
		sessionID, epoch = 0, -1
	}
	if epoch == 0 || epoch == -1 { // full fetch
		if sessionID != 0 {
			if s := c.sessions[sessionID]; s != nil {
				c.remove(s) // any session named in a full fetch is closed
			}
		}
		ctx.mode = modeFull
		if epoch == -1 {
			ctx.mode = modeSessionless
		}
		ctx.parts = fetches
		return ctx, 0
	}

	s := c.sessions[sessionID]
	switch {
	case s == nil:
		return ctx.fail(errSessionIDNotFound)
	case s.epoch != epoch:
		return ctx.fail(errInvalidEpoch)
	case s.usesIDs != usesIDs:
		return ctx.fail(errTopicIDError)
	}
	for _, f := range fetches {
		k := keyOf(f.Key, s.usesIDs)
		if e, ok := s.index[k]; ok {
			cp := e.Value.(*cachedPartition)
			name := cp.fetch.Key.Topic
			cp.fetch = f
			if cp.fetch.Key.Topic == "" {
				cp.fetch.Key.Topic = name
			}
			continue
		}
		s.index[k] = s.order.PushBack(&cachedPartition{fetch: f, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1})
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := pkey{partition: p}
			if s.usesIDs {
				k.id = ft.TopicID
			} else {
				k.name = ft.Topic
			}
			if e, ok := s.index[k]; ok {
				s.order.Remove(e)
				delete(s.index, k)
			}
		}
	}
	if s.order.Len() == 0 {
		// Kafka closes an emptied session and serves the request sessionless.
		c.remove(s)
		ctx.mode = modeSessionless
		ctx.parts = fetches
		return ctx, 0
	}
	c.touch(s, c.now().UnixMilli())
	s.connID = connID
	s.epoch = nextEpoch(s.epoch)
	ctx.mode = modeIncremental
	ctx.session = s
	ctx.expected = s.epoch
	for e := s.order.Front(); e != nil; e = e.Next() {
		cp := e.Value.(*cachedPartition)
		if s.usesIDs && cp.fetch.Key.Topic == "" {
			cp.fetch.Key.Topic, _ = c.topicName(cp.fetch.Key.TopicID)
		}
		ctx.parts = append(ctx.parts, cp.fetch)
	}
	return ctx, 0
}

func (ctx *Context) fail(code int16) (*Context, int16) {
	ctx.mode = modeError
	ctx.errCode = code
	return ctx, code
}

// requestPartitions lists the request's partitions in request order; a partition given
// twice keeps its first position and its last parameters (Kafka's LinkedHashMap).
func (c *Cache) requestPartitions(req *kmsg.FetchRequest, usesIDs bool) []PartitionFetch {
	var out []PartitionFetch
	pos := map[pkey]int{}
	for _, t := range req.Topics {
		name := t.Topic
		var id [16]byte
		if usesIDs {
			id = t.TopicID
			name, _ = c.topicName(id)
		}
		for _, p := range t.Partitions {
			f := PartitionFetch{
				Key:                PartitionKey{TopicID: id, Topic: name, Partition: p.Partition},
				FetchOffset:        p.FetchOffset,
				LogStartOffset:     p.LogStartOffset,
				MaxBytes:           p.PartitionMaxBytes,
				CurrentLeaderEpoch: p.CurrentLeaderEpoch,
				LastFetchedEpoch:   p.LastFetchedEpoch,
			}
			k := keyOf(f.Key, usesIDs)
			if i, ok := pos[k]; ok {
				out[i] = f
				continue
			}
			pos[k] = len(out)
			out = append(out, f)
		}
	}
	return out
}

// Partitions lists what the broker must fetch, in order: the request's partitions for a
// full or sessionless fetch, every session partition for an incremental one. The slice
// belongs to the caller.
func (ctx *Context) Partitions() []PartitionFetch { return append([]PartitionFetch(nil), ctx.parts...) }

// UsesTopicIDs reports whether response topics are keyed by TopicID (fetch v13+).
func (ctx *Context) UsesTopicIDs() bool { return ctx.usesIDs }

// Incremental reports whether this is an incremental fetch of an existing session.
func (ctx *Context) Incremental() bool { return ctx.mode == modeIncremental }

// Finish completes the response. resp must hold the broker's result for the context's
// partitions (records, watermarks, errors). Finish sets ErrorCode and SessionID; for an
// incremental fetch it drops the partitions (and then empty topics) the client need not
// see and records what was sent; for a full fetch it tries to cache a new session.
//
// A partition "has records" when len(RecordBatches) > 0; a broker that attaches records
// some other way uses FinishFunc.
func (ctx *Context) Finish(resp *kmsg.FetchResponse) { ctx.FinishFunc(resp, nil) }

// FinishFunc is Finish with the broker's own test for "this partition carries records".
func (ctx *Context) FinishFunc(resp *kmsg.FetchResponse, hasRecords func(*kmsg.FetchResponseTopic, *kmsg.FetchResponseTopicPartition) bool) {
	mustNotBeNil(resp)
	if ctx.done {
		panic("fetchsession: Finish called twice")
	}
	ctx.done = true
	if hasRecords == nil {
		hasRecords = func(_ *kmsg.FetchResponseTopic, p *kmsg.FetchResponseTopicPartition) bool {
			return len(p.RecordBatches) > 0
		}
	}
	resp.ErrorCode = 0
	resp.SessionID = 0
	switch ctx.mode {
	case modeError:
		resp.ErrorCode = ctx.errCode
		resp.Topics = nil
	case modeSessionless:
	case modeFull:
		ctx.finishFull(resp)
	case modeIncremental:
		ctx.finishIncremental(resp, hasRecords)
	}
}

// Throttled completes a response that was throttled for quota reasons and carries no
// partitions: it never creates a session and does not touch the session's sent state
// (Kafka's getThrottledResponse).
func (ctx *Context) Throttled(resp *kmsg.FetchResponse) {
	mustNotBeNil(resp)
	if ctx.done {
		panic("fetchsession: Finish called twice")
	}
	ctx.done = true
	resp.Topics = nil
	resp.ErrorCode, resp.SessionID = 0, 0
	switch ctx.mode {
	case modeError:
		resp.ErrorCode = ctx.errCode
	case modeIncremental:
		ctx.c.mu.Lock()
		defer ctx.c.mu.Unlock()
		resp.SessionID = ctx.session.id
		if ctx.session.epoch != ctx.expected {
			resp.ErrorCode = errInvalidEpoch
		}
	}
}

func (ctx *Context) respKey(t *kmsg.FetchResponseTopic, p *kmsg.FetchResponseTopicPartition) pkey {
	if ctx.usesIDs {
		return pkey{id: t.TopicID, partition: p.Partition}
	}
	return pkey{name: t.Topic, partition: p.Partition}
}

func (ctx *Context) finishFull(resp *kmsg.FetchResponse) {
	req := make(map[pkey]PartitionFetch, len(ctx.parts))
	for _, f := range ctx.parts {
		req[keyOf(f.Key, ctx.usesIDs)] = f
	}
	var parts []*cachedPartition
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			f, ok := req[ctx.respKey(t, p)]
			if !ok {
				continue // not requested: nothing to cache
			}
			cp := &cachedPartition{fetch: f, highWatermark: p.HighWatermark, lastStableOffset: p.LastStableOffset, logStartOffset: p.LogStartOffset}
			if p.ErrorCode != 0 {
				cp.highWatermark = -1
			}
			parts = append(parts, cp)
		}
	}
	c := ctx.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.maybeCreate(c.now().UnixMilli(), ctx.priv, ctx.usesIDs, ctx.connID, parts); s != nil {
		resp.SessionID = s.id
	}
}

func (ctx *Context) finishIncremental(resp *kmsg.FetchResponse, hasRecords func(*kmsg.FetchResponseTopic, *kmsg.FetchResponseTopicPartition) bool) {
	c, s := ctx.c, ctx.session
	c.mu.Lock()
	defer c.mu.Unlock()
	resp.SessionID = s.id
	if s.epoch != ctx.expected {
		// Another request of this session began after ours: a duplicate or reordered
		// request. Kafka answers it this way without touching the session.
		resp.ErrorCode = errInvalidEpoch
		resp.Topics = nil
		return
	}
	sentRecords := map[*list.Element]bool{}
	topics := resp.Topics[:0]
	for ti := range resp.Topics {
		t := resp.Topics[ti]
		kept := t.Partitions[:0]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			e, ok := s.index[ctx.respKey(&t, p)]
			if !ok {
				continue
			}
			cp := e.Value.(*cachedPartition)
			records := hasRecords(&t, p)
			if !cp.mustRespond(p, records) {
				continue
			}
			if records {
				sentRecords[e] = true
			}
			kept = append(kept, *p)
		}
		if len(kept) > 0 {
			t.Partitions = kept
			topics = append(topics, t)
		}
	}
	resp.Topics = topics
	// Partitions that returned records go to the back, keeping their session order, so the
	// next fetch starts with the others (Kafka moves them while walking its response, which
	// it builds in session order; doing it in session order here makes the result not
	// depend on how the broker grouped its response by topic).
	var moved []*list.Element
	for e := s.order.Front(); e != nil && len(moved) < len(sentRecords); e = e.Next() {
		if sentRecords[e] {
			moved = append(moved, e)
		}
	}
	for _, e := range moved {
		s.order.MoveToBack(e)
	}
}

// mustRespond is CachedPartition.maybeUpdateResponseData with updates on, plus the last
// stable offset.
func (cp *cachedPartition) mustRespond(p *kmsg.FetchResponseTopicPartition, records bool) bool {
	must := records
	if cp.highWatermark != p.HighWatermark {
		must = true
		cp.highWatermark = p.HighWatermark
	}
	if cp.logStartOffset != p.LogStartOffset {
		must = true
		cp.logStartOffset = p.LogStartOffset
	}
	if cp.lastStableOffset != p.LastStableOffset {
		must = true
		cp.lastStableOffset = p.LastStableOffset
	}
	if p.PreferredReadReplica != -1 {
		must = true
	}
	if p.ErrorCode != 0 {
		cp.highWatermark = -1 // resend once the error clears
		must = true
	}
	if p.DivergingEpoch.Epoch >= 0 {
		must = true
	}
	return must
}
