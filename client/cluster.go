package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults shared by every client type.
const (
	defaultDialTimeout    = 10 * time.Second
	defaultRequestTimeout = 30 * time.Second
	defaultRetryBackoff   = 100 * time.Millisecond
	// requestAttempts bounds how often a request is tried on a fresh connection after a
	// connection failure, before the error is returned.
	requestAttempts = 3
)

// ErrNoBrokers is returned when no seed broker is configured.
var ErrNoBrokers = errors.New("client: no brokers configured")

// errUnknownBroker means metadata named a broker id we have no address for (retriable:
// the next metadata refresh normally has it).
var errUnknownBroker = errors.New("client: unknown broker id")

// ErrClosed is returned by a Producer, Consumer or Admin after Close.
var ErrClosed = errors.New("client: closed")

// NetConfig holds connection settings shared by every client type. The zero value of each
// field selects its default.
type NetConfig struct {
	// ClientID is sent in every request header.
	ClientID string
	// DialTimeout bounds establishing a connection, ApiVersions included. Default 10s.
	DialTimeout time.Duration
	// RequestTimeout bounds waiting for one response, on top of any wait the request
	// itself asks the broker for (a fetch's max wait, a produce's timeout). Default 30s.
	RequestTimeout time.Duration
	// RetryBackoff is the pause before retrying a failed request. Default 100ms.
	RetryBackoff time.Duration
	// MaxResponseBytes bounds one response frame. Default 256 MiB.
	MaxResponseBytes int32
}

// netConfig is NetConfig with defaults applied, plus the seed brokers.
type netConfig struct {
	seeds            []string
	clientID         string
	dialer           *net.Dialer
	requestTimeout   time.Duration
	retryBackoff     time.Duration
	maxResponseBytes int32
}

func newNetConfig(brokers []string, nc NetConfig) (*netConfig, error) {
	if len(brokers) == 0 {
		return nil, ErrNoBrokers
	}
	cfg := &netConfig{
		seeds:            append([]string(nil), brokers...),
		clientID:         nc.ClientID,
		dialer:           &net.Dialer{Timeout: nc.DialTimeout, KeepAlive: 30 * time.Second},
		requestTimeout:   nc.RequestTimeout,
		retryBackoff:     nc.RetryBackoff,
		maxResponseBytes: nc.MaxResponseBytes,
	}
	if cfg.clientID == "" {
		cfg.clientID = "exactq-go"
	}
	if cfg.dialer.Timeout <= 0 {
		cfg.dialer.Timeout = defaultDialTimeout
	}
	if cfg.requestTimeout <= 0 {
		cfg.requestTimeout = defaultRequestTimeout
	}
	if cfg.retryBackoff <= 0 {
		cfg.retryBackoff = defaultRetryBackoff
	}
	if cfg.maxResponseBytes <= 0 {
		cfg.maxResponseBytes = defaultMaxResponseBytes
	}
	return cfg, nil
}

// BrokerInfo is one broker as Metadata describes it.
type BrokerInfo struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   string
}

// Addr is host:port.
func (b BrokerInfo) Addr() string { return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) }

// topicMeta is one topic from the last Metadata answer that included it. It is replaced
// whole on refresh, never modified, so a reader may keep the pointer without a lock.
type topicMeta struct {
	name       string
	id         [16]byte
	internal   bool
	err        error // topic-level error; partitions is empty when set
	partitions []partitionMeta
}

// partitionMeta is one partition of a topicMeta; partitions[i].id == i.
type partitionMeta struct {
	id          int32
	leader      int32 // -1 when there is none
	leaderEpoch int32
	replicas    []int32
	isr         []int32
	offline     []int32
	err         error
}

// cluster is the connection pool and metadata cache one Producer, Consumer or Admin owns.
// Connections are keyed by address, so a seed connection is reused once Metadata names
// the broker behind it; brokers maps broker ids to addresses for multi-broker clusters.
type cluster struct {
	cfg *netConfig

	mu         sync.Mutex
	conns      map[string]*connSlot // by address
	brokers    map[int32]BrokerInfo // from the last Metadata
	controller int32                // -1 when unknown
	clusterID  string
	topics     map[string]*topicMeta
	nextSeed   int // rotates anyConn's starting point
	closed     bool
}

// connSlot holds one address's connection; mu is held while dialing so there is at most
// one dial per address at a time.
type connSlot struct {
	mu sync.Mutex
	c  *conn
}

func newCluster(cfg *netConfig) *cluster {
	return &cluster{
		cfg:        cfg,
		conns:      make(map[string]*connSlot),
		brokers:    make(map[int32]BrokerInfo),
		controller: -1,
		topics:     make(map[string]*topicMeta),
	}
}

// connTo returns a live connection to addr, dialing when there is none.
func (cl *cluster) connTo(ctx context.Context, addr string) (*conn, error) {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil, ErrClosed
	}
	slot := cl.conns[addr]
	if slot == nil {
		slot = new(connSlot)
		cl.conns[addr] = slot
	}
	cl.mu.Unlock()

	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.c != nil && !slot.c.closed() {
		return slot.c, nil
	}
	c, err := dialConn(ctx, cl.cfg, addr)
	if err != nil {
		return nil, err
	}
	cl.mu.Lock()
	closed := cl.closed
	cl.mu.Unlock()
	if closed {
		c.close(ErrClosed)
		return nil, ErrClosed
	}
	slot.c = c
	return c, nil
}

// brokerConn returns a connection to broker id.
func (cl *cluster) brokerConn(ctx context.Context, id int32) (*conn, error) {
	cl.mu.Lock()
	b, ok := cl.brokers[id]
	cl.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %d", errUnknownBroker, id)
	}
	return cl.connTo(ctx, b.Addr())
}

// anyConn returns a connection to some broker: known brokers first, then seeds, starting
// at a rotating index so load and failures spread.
func (cl *cluster) anyConn(ctx context.Context) (*conn, error) {
	cl.mu.Lock()
	addrs := make([]string, 0, len(cl.brokers)+len(cl.cfg.seeds))
	ids := make([]int32, 0, len(cl.brokers))
	for id := range cl.brokers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		addrs = append(addrs, cl.brokers[id].Addr())
	}
	addrs = append(addrs, cl.cfg.seeds...)
	start := cl.nextSeed
	cl.nextSeed++
	cl.mu.Unlock()

	var firstErr error
	for i := range addrs {
		c, err := cl.connTo(ctx, addrs[(start+i)%len(addrs)])
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			break
		}
	}
	return nil, firstErr
}

// target names where a request goes.
type target struct {
	broker int32 // used when kind == toBroker
	kind   int8
}

const (
	toAny int8 = iota
	toBroker
	toController
)

func anyBroker() target        { return target{kind: toAny} }
func broker(id int32) target   { return target{kind: toBroker, broker: id} }
func controllerBroker() target { return target{kind: toController} }

func (cl *cluster) resolve(ctx context.Context, t target) (*conn, error) {
	switch t.kind {
	case toBroker:
		return cl.brokerConn(ctx, t.broker)
	case toController:
		cl.mu.Lock()
		id := cl.controller
		cl.mu.Unlock()
		if id < 0 {
			if _, err := cl.refreshMetadata(ctx, nil); err != nil {
				return nil, err
			}
			cl.mu.Lock()
			id = cl.controller
			cl.mu.Unlock()
			if id < 0 {
				return nil, fmt.Errorf("client: no controller in metadata: %w", kerr.NotController)
			}
		}
		return cl.brokerConn(ctx, id)
	default:
		return cl.anyConn(ctx)
	}
}

// do sends req to t and returns the response. It retries on a fresh connection after a
// connection failure (requestAttempts in all), and bounds each attempt by RequestTimeout
// plus the request's own timeout.
func (cl *cluster) do(ctx context.Context, t target, req kmsg.Request) (kmsg.Response, error) {
	return cl.doWith(ctx, t, req, reqOpts{maxVersion: -1})
}

// reqOpts adjusts one request: a version cap (transactions v1 pin EndTxn, TxnOffsetCommit
// and Produce below the versions that mean "transactions v2") and extra time for requests
// the broker may hold (JoinGroup and SyncGroup wait for the rebalance).
type reqOpts struct {
	maxVersion int16 // < 0: no cap
	extra      time.Duration
}

// doWith is do with options.
func (cl *cluster) doWith(ctx context.Context, t target, req kmsg.Request, o reqOpts) (kmsg.Response, error) {
	var lastErr error
	for attempt := 0; attempt < requestAttempts; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, cl.cfg.retryBackoff); err != nil {
				return nil, lastErr
			}
		}
		c, err := cl.resolve(ctx, t)
		if err == nil {
			var resp kmsg.Response
			resp, err = cl.doOnWith(ctx, c, req, o)
			if err == nil {
				return resp, nil
			}
		}
		lastErr = err
		if !errors.Is(err, ErrConnClosed) && !isDialError(err) && !errors.Is(err, errUnknownBroker) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, lastErr
}

// doOn sends req on c with the request timeout applied.
func (cl *cluster) doOn(ctx context.Context, c *conn, req kmsg.Request) (kmsg.Response, error) {
	return cl.doOnWith(ctx, c, req, reqOpts{maxVersion: -1})
}

func (cl *cluster) doOnWith(ctx context.Context, c *conn, req kmsg.Request, o reqOpts) (kmsg.Response, error) {
	timeout := cl.cfg.requestTimeout + o.extra
	if tr, ok := req.(kmsg.TimeoutRequest); ok && tr.Timeout() > 0 {
		timeout += time.Duration(tr.Timeout()) * time.Millisecond
	}
	if fr, ok := req.(*kmsg.FetchRequest); ok {
		timeout += time.Duration(fr.MaxWaitMillis) * time.Millisecond
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.doMax(rctx, req, o.maxVersion)
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// refreshMetadata asks for metadata about topics (nil: brokers only; use allTopics for
// every topic) and updates the cache. It returns the raw response for callers that need
// more than the cache keeps.
func (cl *cluster) refreshMetadata(ctx context.Context, topics []string) (*kmsg.MetadataResponse, error) {
	return cl.metadata(ctx, topics, false)
}

func (cl *cluster) metadata(ctx context.Context, topics []string, all bool) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	if !all {
		req.Topics = make([]kmsg.MetadataRequestTopic, 0, len(topics))
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := cl.do(ctx, anyBroker(), req)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.MetadataResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return nil, fmt.Errorf("client: metadata: %w", err)
	}
	cl.apply(r)
	return r, nil
}

// apply stores a Metadata response in the cache.
func (cl *cluster) apply(r *kmsg.MetadataResponse) {
	brokers := make(map[int32]BrokerInfo, len(r.Brokers))
	for _, b := range r.Brokers {
		bi := BrokerInfo{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			bi.Rack = *b.Rack
		}
		brokers[b.NodeID] = bi
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if len(brokers) > 0 {
		cl.brokers = brokers
	}
	cl.controller = r.ControllerID
	if r.ClusterID != nil {
		cl.clusterID = *r.ClusterID
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.Topic == nil {
			continue
		}
		cl.topics[*t.Topic] = topicFromMetadata(t)
	}
}

func topicFromMetadata(t *kmsg.MetadataResponseTopic) *topicMeta {
	tm := &topicMeta{name: *t.Topic, id: t.TopicID, internal: t.IsInternal, err: kerr.ErrorForCode(t.ErrorCode)}
	if tm.err != nil {
		return tm
	}
	n := int32(0)
	for _, p := range t.Partitions {
		n = max(n, p.Partition+1)
	}
	tm.partitions = make([]partitionMeta, n)
	for i := range tm.partitions {
		tm.partitions[i] = partitionMeta{id: int32(i), leader: -1, leaderEpoch: -1, err: kerr.LeaderNotAvailable}
	}
	for _, p := range t.Partitions {
		if p.Partition < 0 {
			continue
		}
		tm.partitions[p.Partition] = partitionMeta{
			id:          p.Partition,
			leader:      p.Leader,
			leaderEpoch: p.LeaderEpoch,
			replicas:    p.Replicas,
			isr:         p.ISR,
			offline:     p.OfflineReplicas,
			err:         kerr.ErrorForCode(p.ErrorCode),
		}
	}
	return tm
}

// topic returns the cached metadata of topic, or nil.
func (cl *cluster) topic(name string) *topicMeta {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.topics[name]
}

// forget drops a topic from the cache (after it was deleted).
func (cl *cluster) forget(name string) {
	cl.mu.Lock()
	delete(cl.topics, name)
	cl.mu.Unlock()
}

// leader returns the cached leader of a partition, or -1.
func (cl *cluster) leader(topic string, partition int32) int32 {
	tm := cl.topic(topic)
	if tm == nil || partition < 0 || int(partition) >= len(tm.partitions) {
		return -1
	}
	p := tm.partitions[partition]
	if p.err != nil && !errors.Is(p.err, kerr.ReplicaNotAvailable) {
		return -1
	}
	return p.leader
}

// close closes every connection; later requests fail with ErrClosed.
func (cl *cluster) close() {
	cl.mu.Lock()
	cl.closed = true
	slots := make([]*connSlot, 0, len(cl.conns))
	for _, s := range cl.conns {
		slots = append(slots, s)
	}
	cl.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		if s.c != nil {
			s.c.close(ErrClosed)
		}
		s.mu.Unlock()
	}
}

// sleepCtx waits d or until ctx is done, returning ctx.Err() in the latter case.
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

// brokerKnown reports whether metadata named broker id.
func (cl *cluster) brokerKnown(id int32) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	_, ok := cl.brokers[id]
	return ok
}
