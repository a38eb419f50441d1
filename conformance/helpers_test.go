package conformance

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/testbroker"
)

const (
	// pollDeadline bounds every poll for a state the broker reaches asynchronously (a
	// share partition initialized and assigned, a closed connection's session dropped).
	pollDeadline = 15 * time.Second
	// ioDeadline bounds every raw read and write, so a broker bug fails the test instead
	// of hanging it. No outcome depends on it.
	ioDeadline = 20 * time.Second
	// fetchWaitMs is the MaxWaitMs of the share fetches (Kafka's tests use 5000): a fetch
	// that should return records returns as soon as they are acquired.
	fetchWaitMs = 5000
)

// Wire versions: the newest Kafka 4.4 accepts (what the Java share consumer sends).
const (
	vShareGroupHeartbeat int16 = 1
	vShareGroupDescribe  int16 = 1
	vShareFetch          int16 = 2
	vShareAcknowledge    int16 = 2
)

// Acknowledge types (kip-932 2.7).
const (
	ackAccept  int8 = 1
	ackRelease int8 = 2
	ackReject  int8 = 3
)

// baseConfig is every test's broker config: assignments are computed at once (no
// group.share.assignment.interval.ms batching), so a heartbeat after the share state is
// initialized brings the assignment.
var baseConfig = map[string]string{
	"group.share.assignment.interval.ms": "0",
}

// env is one broker and a franz-go client for the admin work and the producing.
type env struct {
	t   *testing.T
	tb  *testbroker.Broker
	cl  *kgo.Client
	adm *kadm.Client
}

// newEnv starts a broker with baseConfig plus cfg.
func newEnv(t *testing.T, cfg map[string]string) *env {
	t.Helper()
	all := map[string]string{}
	for _, m := range []map[string]string{baseConfig, cfg} {
		for k, v := range m {
			all[k] = v
		}
	}
	tb := testbroker.Start(t, testbroker.WithConfig(all))
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.RequestRetries(20),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &env{t: t, tb: tb, cl: cl, adm: kadm.NewClient(cl)}
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), pollDeadline)
	e.t.Cleanup(cancel)
	return ctx
}

// createTopic creates a topic and returns its id.
func (e *env) createTopic(name string, partitions int32) [16]byte {
	e.t.Helper()
	resp, err := e.adm.CreateTopic(e.ctx(), partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		e.t.Fatalf("create topic %s: %v", name, err)
	}
	return resp.ID
}

// produce appends n records to one partition, each in its own batch (one synchronous
// acks=all produce per record, as Kafka's tests do), and returns once they are durable
// and so visible to share fetches.
func (e *env) produce(topic string, partition int32, n int) {
	e.t.Helper()
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: partition, Key: []byte("key"), Value: []byte(fmt.Sprintf("value-%d", i))}
		if err := e.cl.ProduceSync(e.ctx(), r).FirstErr(); err != nil {
			e.t.Fatalf("produce to %s/%d: %v", topic, partition, err)
		}
	}
}

// setGroupConfig sets a dynamic group config (IncrementalAlterConfigs, resource GROUP).
func (e *env) setGroupConfig(group, name, value string) {
	e.t.Helper()
	if err := testbroker.SetGroupConfigs(e.ctx(), e.cl, group, name, value); err != nil {
		e.t.Fatalf("group config %s=%s: %v", name, value, err)
	}
}

// dial opens a raw connection to the broker.
func (e *env) dial() *wireConn {
	e.t.Helper()
	return dial(e.t, e.tb.Addr)
}

// wireConn is one raw Kafka connection: requests are framed with kmsg and written to the
// socket, responses read and decoded, one at a time.
type wireConn struct {
	t    testing.TB
	nc   net.Conn
	br   *bufio.Reader
	f    *kmsg.RequestFormatter
	corr int32
}

func dial(t testing.TB, addr string) *wireConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &wireConn{t: t, nc: nc, br: bufio.NewReader(nc), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("conformance"))}
}

// close drops the TCP connection.
func (c *wireConn) close() { c.nc.Close() }

// roundTrip sends req at the version it carries and returns the decoded response.
func (c *wireConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	c.corr++
	_ = c.nc.SetDeadline(time.Now().Add(ioDeadline))
	if _, err := c.nc.Write(c.f.AppendRequest(nil, req, c.corr)); err != nil {
		c.t.Fatalf("write %T: %v", req, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		c.t.Fatalf("read %T response: %v", req, err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.br, buf); err != nil {
		c.t.Fatalf("read %T response: %v", req, err)
	}
	if len(buf) < 4 || int32(binary.BigEndian.Uint32(buf)) != c.corr {
		c.t.Fatalf("%T: response frame does not carry correlation id %d", req, c.corr)
	}
	body := buf[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if req.Key() != 18 && resp.IsFlexible() {
		if len(body) == 0 || body[0] != 0 {
			c.t.Fatalf("%T: flexible response header without an empty tag section", req)
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode %T: %v", resp, err)
	}
	return resp
}

// newMemberID returns a random member id in UUID form (36 characters, the most
// KafkaApis.isMemberIdValid accepts).
func newMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// heartbeat sends one ShareGroupHeartbeat; topics non-nil sets SubscribedTopicNames.
func (c *wireConn) heartbeat(group, member string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	c.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = vShareGroupHeartbeat
	req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
	req.SubscribedTopicNames = topics
	return c.roundTrip(req).(*kmsg.ShareGroupHeartbeatResponse)
}

// describe sends one ShareGroupDescribe.
func (c *wireConn) describe(includeOps bool, groups ...string) *kmsg.ShareGroupDescribeResponse {
	c.t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.Version = vShareGroupDescribe
	req.GroupIDs, req.IncludeAuthorizedOperations = groups, includeOps
	return c.roundTrip(req).(*kmsg.ShareGroupDescribeResponse)
}

// assignment is a heartbeat's assignment as topic id -> sorted partitions; nil when the
// response carries none.
type assignment map[[16]byte][]int32

func assignmentOf(r *kmsg.ShareGroupHeartbeatResponse) assignment {
	if r.Assignment == nil {
		return nil
	}
	a := assignment{}
	for _, tp := range r.Assignment.TopicPartitions {
		a[tp.TopicID] = append(a[tp.TopicID], tp.Partitions...)
	}
	for id := range a {
		slices.Sort(a[id])
	}
	return a
}

func (a assignment) equal(b assignment) bool { return reflect.DeepEqual(a, b) }

// partitions returns the union of the assignment's partitions of one topic.
func (a assignment) partitions(topicID [16]byte) []int32 { return a[topicID] }

// joinUntilAssigned joins member to group (epoch 0, subscribed to topics) and heartbeats
// until its assignment is want; it returns the last response.
func (c *wireConn) joinUntilAssigned(group, member string, topics []string, want assignment) *kmsg.ShareGroupHeartbeatResponse {
	c.t.Helper()
	r := c.join(group, member, topics)
	if assignmentOf(r).equal(want) {
		return r
	}
	return c.heartbeatUntil(group, member, r.MemberEpoch, "assignment "+fmt.Sprint(want), func(r *kmsg.ShareGroupHeartbeatResponse) bool {
		return assignmentOf(r).equal(want)
	})
}

// join sends epoch-0 heartbeats until one succeeds (the share-group coordinator may still
// be loading) and returns it.
func (c *wireConn) join(group, member string, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	c.t.Helper()
	var r *kmsg.ShareGroupHeartbeatResponse
	eventually(c.t, "join "+group, func() (bool, string) {
		r = c.heartbeat(group, member, 0, topics)
		return r.ErrorCode == 0, fmt.Sprint(kerr.ErrorForCode(r.ErrorCode))
	})
	return r
}

// heartbeatUntil heartbeats (keeping the newest member epoch) until done accepts a
// successful response, and returns it.
func (c *wireConn) heartbeatUntil(group, member string, epoch int32, what string, done func(*kmsg.ShareGroupHeartbeatResponse) bool) *kmsg.ShareGroupHeartbeatResponse {
	c.t.Helper()
	var r *kmsg.ShareGroupHeartbeatResponse
	eventually(c.t, what, func() (bool, string) {
		r = c.heartbeat(group, member, epoch, nil)
		if r.ErrorCode != 0 {
			c.t.Fatalf("heartbeat of %s at epoch %d: %v", member, epoch, kerr.ErrorForCode(r.ErrorCode))
		}
		epoch = r.MemberEpoch
		return done(r), fmt.Sprintf("epoch %d assignment %v", r.MemberEpoch, assignmentOf(r))
	})
	return r
}

// tip is one topic-id partition.
type tip struct {
	id [16]byte
	p  int32
}

// fetchReq describes one ShareFetch (v2). Zero MaxRecords and BatchSize become 500 (what
// Kafka's tests send); MaxWaitMs 0 becomes fetchWaitMs (use -1 for no wait).
type fetchReq struct {
	group, member string
	epoch         int32
	parts         []tip // partitions to fetch (added to the session)
	acks          map[tip][]ackRange
	forget        []tip
	maxWaitMs     int32
	minBytes      int32
	maxRecords    int32
	batchSize     int32
}

// ackRange is one acknowledgement batch with a single type for the whole range.
type ackRange struct {
	first, last int64
	typ         int8
}

func (r fetchReq) build() *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = vShareFetch
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &r.group, &r.member, r.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = r.maxWaitMs, r.minBytes, 1<<31-1
	req.MaxRecords, req.BatchSize = r.maxRecords, r.batchSize
	switch {
	case r.maxWaitMs == 0:
		req.MaxWaitMillis = fetchWaitMs
	case r.maxWaitMs < 0:
		req.MaxWaitMillis = 0
	}
	if req.MaxRecords == 0 {
		req.MaxRecords = 500
	}
	if req.BatchSize == 0 {
		req.BatchSize = 500
	}
	parts := slices.Clone(r.parts)
	for t := range r.acks {
		if !slices.Contains(parts, t) {
			parts = append(parts, t)
		}
	}
	for _, t := range parts {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = t.p
		for _, a := range r.acks[t] {
			b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, []int8{a.typ}
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
		}
		i := slices.IndexFunc(req.Topics, func(rt kmsg.ShareFetchRequestTopic) bool { return rt.TopicID == t.id })
		if i < 0 {
			rt := kmsg.NewShareFetchRequestTopic()
			rt.TopicID = t.id
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	for _, t := range r.forget {
		ft := kmsg.NewShareFetchRequestForgottenTopicsData()
		ft.TopicID, ft.Partitions = t.id, []int32{t.p}
		req.ForgottenTopicsData = append(req.ForgottenTopicsData, ft)
	}
	return req
}

func (c *wireConn) shareFetch(r fetchReq) *kmsg.ShareFetchResponse {
	c.t.Helper()
	return c.roundTrip(r.build()).(*kmsg.ShareFetchResponse)
}

// shareAck sends one ShareAcknowledge (v2) carrying acks.
func (c *wireConn) shareAck(group, member string, epoch int32, acks map[tip][]ackRange) *kmsg.ShareAcknowledgeResponse {
	c.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version = vShareAcknowledge
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, epoch
	// The same topics and batches a ShareFetch would piggyback.
	for _, ft := range (fetchReq{acks: acks}).build().Topics {
		at := kmsg.NewShareAcknowledgeRequestTopic()
		at.TopicID = ft.TopicID
		for _, fp := range ft.Partitions {
			ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
			ap.Partition = fp.Partition
			for _, b := range fp.AcknowledgementBatches {
				ap.AcknowledgementBatches = append(ap.AcknowledgementBatches, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
					FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, AcknowledgeTypes: b.AcknowledgeTypes,
				})
			}
			at.Partitions = append(at.Partitions, ap)
		}
		req.Topics = append(req.Topics, at)
	}
	return c.roundTrip(req).(*kmsg.ShareAcknowledgeResponse)
}

// acq is one expected AcquiredRecords entry.
type acq struct {
	first, last int64
	count       int16
}

func acquiredOf(rp *kmsg.ShareFetchResponseTopicPartition) []acq {
	out := []acq{}
	if rp == nil {
		return out
	}
	for _, a := range rp.AcquiredRecords {
		out = append(out, acq{a.FirstOffset, a.LastOffset, a.DeliveryCount})
	}
	return out
}

// fetchPart returns the ShareFetch response's entry for t, or nil.
func fetchPart(r *kmsg.ShareFetchResponse, t tip) *kmsg.ShareFetchResponseTopicPartition {
	return findPart(r.Topics, t,
		func(x *kmsg.ShareFetchResponseTopic) ([16]byte, []kmsg.ShareFetchResponseTopicPartition) {
			return x.TopicID, x.Partitions
		},
		func(p *kmsg.ShareFetchResponseTopicPartition) int32 { return p.Partition })
}

// ackPart returns the ShareAcknowledge response's entry for t, or nil.
func ackPart(r *kmsg.ShareAcknowledgeResponse, t tip) *kmsg.ShareAcknowledgeResponseTopicPartition {
	return findPart(r.Topics, t,
		func(x *kmsg.ShareAcknowledgeResponseTopic) ([16]byte, []kmsg.ShareAcknowledgeResponseTopicPartition) {
			return x.TopicID, x.Partitions
		},
		func(p *kmsg.ShareAcknowledgeResponseTopicPartition) int32 { return p.Partition })
}

// findPart finds partition t in a response's topics.
func findPart[T, P any](topics []T, t tip, split func(*T) ([16]byte, []P), index func(*P) int32) *P {
	for i := range topics {
		id, parts := split(&topics[i])
		if id != t.id {
			continue
		}
		for j := range parts {
			if index(&parts[j]) == t.p {
				return &parts[j]
			}
		}
	}
	return nil
}

// countParts counts the partition entries of a ShareFetch response.
func countParts(r *kmsg.ShareFetchResponse) int {
	n := 0
	for _, t := range r.Topics {
		n += len(t.Partitions)
	}
	return n
}

// wantCode fails unless code is want (nil: NONE).
func wantCode(t testing.TB, what string, code int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if code != w {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(code), kerr.ErrorForCode(w))
	}
}

// wantRejected checks a share request refused at the top level the way Kafka's
// getErrorResponse answers: the error, AcquisitionLockTimeoutMs 0 and no topics.
func wantRejected(t testing.TB, what string, code int16, lockMs int32, topics int, want *kerr.Error) {
	t.Helper()
	wantCode(t, what, code, want)
	if lockMs != 0 || topics != 0 {
		t.Fatalf("%s: AcquisitionLockTimeoutMs %d and %d topics, want 0 and none", what, lockMs, topics)
	}
}

// wantFetchOK checks a successful ShareFetch's top level: NONE and the lock timeout.
func wantFetchOK(t testing.TB, r *kmsg.ShareFetchResponse, lockMs int32) {
	t.Helper()
	wantCode(t, "share fetch", r.ErrorCode, nil)
	if r.AcquisitionLockTimeoutMillis != lockMs {
		t.Fatalf("AcquisitionLockTimeoutMs = %d, want %d", r.AcquisitionLockTimeoutMillis, lockMs)
	}
}

// wantAcquired checks that the response is the only partition entry of a successful
// fetch (NONE, NONE for acknowledgements) and acquired exactly want, and that the records
// sent cover the acquired offsets.
func wantAcquired(t testing.TB, r *kmsg.ShareFetchResponse, part tip, want ...acq) {
	t.Helper()
	rp := fetchPart(r, part)
	if rp == nil {
		t.Fatalf("no entry for partition %d in the share fetch response (%d entries)", part.p, countParts(r))
	}
	wantCode(t, fmt.Sprintf("partition %d", part.p), rp.ErrorCode, nil)
	wantCode(t, fmt.Sprintf("partition %d acknowledge", part.p), rp.AcknowledgeErrorCode, nil)
	if got := acquiredOf(rp); !reflect.DeepEqual(got, append([]acq{}, want...)) {
		t.Fatalf("partition %d AcquiredRecords = %v, want %v", part.p, got, want)
	}
	offsets := recordOffsets(t, rp.Records)
	for _, a := range want {
		for o := a.first; o <= a.last; o++ {
			if !offsets[o] {
				t.Fatalf("partition %d: acquired offset %d is not in the records sent", part.p, o)
			}
		}
	}
}

// recordOffsets decodes the record batches of a fetch response and returns the offsets
// they hold.
func recordOffsets(t testing.TB, b []byte) map[int64]bool {
	t.Helper()
	out := map[int64]bool{}
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("truncated record batch header")
		}
		n := 12 + int(binary.BigEndian.Uint32(b[8:12]))
		if n > len(b) {
			t.Fatalf("truncated record batch")
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:n]); err != nil {
			t.Fatalf("decode record batch: %v", err)
		}
		for i := int64(0); i < int64(rb.LastOffsetDelta)+1; i++ {
			out[rb.FirstOffset+i] = true
		}
		b = b[n:]
	}
	return out
}

// eventually polls cond until it holds or pollDeadline passes; cond's string says what it
// saw, for the failure message.
func eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	err := await.Until(pollDeadline, 20*time.Millisecond, func() error {
		if ok, seen := cond(); !ok {
			return errors.New(seen)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: not reached within %v (last: %s)", what, pollDeadline, err)
	}
}
