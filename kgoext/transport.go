package kgoext

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds what kgoext needs from a *kgo.Client used as transport: topic metadata
// (leaders, topic ids) and a coordinator cache. kgo keeps both internally but exports
// neither, so they are asked for with kmsg requests through the client, which picks a
// broker, dials and retries connection failures.

// topicMeta is one topic's id and partition leaders (-1: none).
type topicMeta struct {
	id      [16]byte
	leaders []int32
}

// metaCache holds the metadata of the topics kgoext works on. Fields under mu.
type metaCache struct {
	cl     *kgo.Client
	mu     sync.Mutex
	topics map[string]topicMeta
	names  map[[16]byte]string
}

func newMetaCache(cl *kgo.Client) *metaCache {
	return &metaCache{cl: cl, topics: map[string]topicMeta{}, names: map[[16]byte]string{}}
}

// refresh asks for the metadata of topics (kgo's cached answer when fresh is false and it
// is younger than MetadataMinAge) and stores it.
func (m *metaCache) refresh(ctx context.Context, topics []string, fresh bool) error {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	var resp *kmsg.MetadataResponse
	var err error
	if fresh {
		var r kmsg.Response
		r, err = m.cl.Request(ctx, req)
		if err == nil {
			resp = r.(*kmsg.MetadataResponse)
		}
	} else {
		resp, err = m.cl.RequestCachedMetadata(ctx, req, 0)
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			delete(m.topics, *t.Topic)
			continue
		}
		tm := topicMeta{id: t.TopicID, leaders: make([]int32, len(t.Partitions))}
		for i := range tm.leaders {
			tm.leaders[i] = -1
		}
		for _, p := range t.Partitions {
			if p.Partition >= 0 && int(p.Partition) < len(tm.leaders) && kerr.ErrorForCode(p.ErrorCode) == nil {
				tm.leaders[p.Partition] = p.Leader
			}
		}
		m.topics[*t.Topic] = tm
		if t.TopicID != [16]byte{} {
			m.names[t.TopicID] = *t.Topic
		}
	}
	return nil
}

// leader is the cached leader of tp, -1 when unknown.
func (m *metaCache) leader(tp TopicPartition) int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	tm, ok := m.topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(tm.leaders) {
		return -1
	}
	return tm.leaders[tp.Partition]
}

// topic returns the cached metadata of topic.
func (m *metaCache) topic(topic string) (topicMeta, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	tm, ok := m.topics[topic]
	return tm, ok
}

// name is the cached name of topic id.
func (m *metaCache) name(id [16]byte) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.names[id]
	return n, ok
}

// idsAndNames snapshots topic name → id and id → name.
func (m *metaCache) idsAndNames() (map[string][16]byte, map[[16]byte]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make(map[string][16]byte, len(m.names))
	names := make(map[[16]byte]string, len(m.names))
	for id, n := range m.names {
		ids[n], names[id] = id, n
	}
	return ids, names
}

// coordinator caches the coordinator of one group or transactional id. kgo routes
// ShareGroupHeartbeat to the group coordinator itself, but forgets a stale coordinator
// only for the leave (epoch -1): a NOT_COORDINATOR answer to a join or heartbeat would keep
// going to the old broker. And an EndTxn kgo routes is sent at the version kgo picks,
// while EndTransaction must pin it. Finding the coordinator here, and forgetting it on
// NOT_COORDINATOR or a dead connection, follows it when it moves.
type coordinator struct {
	cl    *kgo.Client
	ctype int8 // coordinatorGroup or coordinatorTxn
	key   string
	mu    sync.Mutex
	node  int32 // -1: unknown
}

// FindCoordinator key types.
const (
	coordinatorGroup int8 = 0
	coordinatorTxn   int8 = 1
)

func newCoordinator(cl *kgo.Client, ctype int8, key string) *coordinator {
	return &coordinator{cl: cl, ctype: ctype, key: key, node: -1}
}

// do sends req to the coordinator, finding it first if needed. A transport error or an
// answer of NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE (checked by the caller through
// coordinatorMoved) makes the next call look it up again.
func (c *coordinator) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.mu.Lock()
	node := c.node
	c.mu.Unlock()
	if node < 0 {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = c.key
		fc.CoordinatorKeys = []string{c.key}
		fc.CoordinatorType = c.ctype
		resp, err := fc.RequestWith(ctx, c.cl)
		if err != nil {
			return nil, err
		}
		code, n := resp.ErrorCode, resp.NodeID
		if len(resp.Coordinators) > 0 {
			code, n = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID
		}
		if err := kerr.ErrorForCode(code); err != nil {
			return nil, fmt.Errorf("kgoext: finding the coordinator of %q (type %d): %w", c.key, c.ctype, err)
		}
		node = n
		c.mu.Lock()
		c.node = node
		c.mu.Unlock()
	}
	resp, err := c.cl.Broker(int(node)).Request(ctx, req)
	if err != nil {
		c.invalidate()
	}
	return resp, err
}

func (c *coordinator) invalidate() {
	c.mu.Lock()
	c.node = -1
	c.mu.Unlock()
}

func coordinatorMoved(err error) bool {
	return errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable)
}

// kerrWithMessage is the kerr error of code (nil for 0), with the broker's message.
func kerrWithMessage(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
