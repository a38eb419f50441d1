package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// seqPeer scripts a single-node cluster for producer tests: Metadata for one topic,
// InitProducerId, and Produce with Kafka's per-partition sequence checks (duplicate, out
// of order, epoch bump to sequence 0), so tests can check that retries produce each
// record exactly once and in order. Faults are injected per produce request number.
type seqPeer struct {
	*peer
	topic   string
	nparts  int32
	topicID [16]byte // in Metadata answers when set

	mu        sync.Mutex
	parts     map[int32]*seqPart
	nProduce  int
	nInit     int
	epochSeen map[int16]bool
	// fault returns, for the n-th produce request (1-based), an error code to answer
	// for every partition without appending (0: none), and whether to close the
	// connection instead of answering after appending.
	fault func(n int) (code int16, dropAfterAppend bool)
	noAck bool
}

type seqPart struct {
	epoch   int16
	next    int32
	values  [][]byte
	batches []seqBatch // appended batches, for duplicate detection
}

type seqBatch struct {
	epoch      int16
	seq, count int32
	base       int64
}

func newSeqPeer(t *testing.T, nparts int32) *seqPeer {
	sp := &seqPeer{topic: "t", nparts: nparts, parts: map[int32]*seqPart{}, epochSeen: map[int16]bool{}}
	for i := int32(0); i < nparts; i++ {
		sp.parts[i] = &seqPart{epoch: -1}
	}
	sp.peer = newPeer(t, func(p *peer) { p.handle = sp.handle })
	return sp
}

func (sp *seqPeer) handle(pc *peerConn, req *peerReq) kmsg.Response {
	switch r := req.body.(type) {
	case *kmsg.MetadataRequest:
		return sp.metadata(r)
	case *kmsg.InitProducerIDRequest:
		sp.mu.Lock()
		sp.nInit++
		sp.mu.Unlock()
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = 7, 0
		return resp
	case *kmsg.ProduceRequest:
		return sp.produce(pc, r)
	}
	sp.t.Errorf("unexpected request %s", kmsg.NameForKey(req.key))
	return nil
}

func (sp *seqPeer) metadata(r *kmsg.MetadataRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	host, port, _ := net.SplitHostPort(sp.addr)
	p, _ := strconv.Atoi(port)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, host, int32(p)
	resp.Brokers = append(resp.Brokers, b)
	resp.ControllerID = 1
	for _, rt := range r.Topics {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = rt.Topic
		if rt.Topic == nil || *rt.Topic != sp.topic {
			t.ErrorCode = kerr.UnknownTopicOrPartition.Code
		} else {
			t.TopicID = sp.topicID
			for i := int32(0); i < sp.nparts; i++ {
				mp := kmsg.NewMetadataResponseTopicPartition()
				mp.Partition, mp.Leader, mp.Replicas, mp.ISR = i, 1, []int32{1}, []int32{1}
				t.Partitions = append(t.Partitions, mp)
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func (sp *seqPeer) produce(pc *peerConn, r *kmsg.ProduceRequest) kmsg.Response {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.nProduce++
	var code int16
	drop := false
	if sp.fault != nil {
		code, drop = sp.fault(sp.nProduce)
	}
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.BaseOffset = -1
			if code != 0 {
				rp.ErrorCode = code
			} else {
				rp.ErrorCode, rp.BaseOffset = sp.append(p.Partition, p.Records)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if drop {
		_ = pc.nc.Close()
		return nil
	}
	if r.Acks == 0 {
		return nil
	}
	return resp
}

// append applies Kafka's idempotent producer checks to one batch.
func (sp *seqPeer) append(partition int32, raw []byte) (int16, int64) {
	h, err := batch.Parse(raw)
	if err != nil {
		return kerr.CorruptMessage.Code, -1
	}
	recs, err := batch.Records(raw)
	if err != nil {
		return kerr.CorruptMessage.Code, -1
	}
	sp.epochSeen[h.ProducerEpoch] = true
	part := sp.parts[partition]
	if h.ProducerID >= 0 {
		switch {
		case h.ProducerEpoch < part.epoch:
			return kerr.InvalidProducerEpoch.Code, -1
		case h.ProducerEpoch > part.epoch:
			if h.FirstSequence != 0 {
				return kerr.OutOfOrderSequenceNumber.Code, -1
			}
			part.epoch, part.next = h.ProducerEpoch, 0
		default:
			for _, b := range part.batches {
				if b.epoch == h.ProducerEpoch && b.seq == h.FirstSequence && b.count == h.NumRecords {
					return kerr.DuplicateSequenceNumber.Code, -1
				}
			}
			if h.FirstSequence != part.next {
				return kerr.OutOfOrderSequenceNumber.Code, -1
			}
		}
		part.next += h.NumRecords
	}
	base := int64(len(part.values))
	part.batches = append(part.batches, seqBatch{h.ProducerEpoch, h.FirstSequence, h.NumRecords, base})
	for _, r := range recs {
		part.values = append(part.values, r.Value)
	}
	return 0, base
}

// produceAll produces n records round-robin over the partitions (manual partitioner) and
// returns, per partition, the values in produce order and the callback results in
// callback order.
type produced struct {
	mu      sync.Mutex
	want    map[int32][][]byte
	got     map[int32][][]byte // callback order
	offsets map[int32][]int64
	errs    []error
}

func produceAll(t *testing.T, p *Producer, nparts int32, n int) *produced {
	t.Helper()
	res := &produced{want: map[int32][][]byte{}, got: map[int32][][]byte{}, offsets: map[int32][]int64{}}
	for i := 0; i < n; i++ {
		part := int32(i) % nparts
		v := []byte(fmt.Sprintf("v%05d", i))
		res.want[part] = append(res.want[part], v)
		p.Produce(context.Background(), &Record{Topic: "t", Partition: part, Value: v}, func(r *Record, err error) {
			res.mu.Lock()
			defer res.mu.Unlock()
			if err != nil {
				res.errs = append(res.errs, err)
				return
			}
			res.got[r.Partition] = append(res.got[r.Partition], r.Value)
			res.offsets[r.Partition] = append(res.offsets[r.Partition], r.Offset)
		})
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return res
}

func (sp *seqPeer) checkLog(t *testing.T, res *produced) {
	t.Helper()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for part, want := range res.want {
		if got := sp.parts[part].values; !equalValues(got, want) {
			t.Errorf("partition %d log has %d records, want %d in produce order exactly once:\n got %q\nwant %q",
				part, len(got), len(want), got, want)
		}
		if got := res.got[part]; !equalValues(got, want) {
			t.Errorf("partition %d callbacks out of order or missing", part)
		}
	}
}

func equalValues(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func newTestProducer(t *testing.T, addr string, mod func(*ProducerConfig)) *Producer {
	t.Helper()
	cfg := ProducerConfig{
		Brokers:       []string{addr},
		Net:           NetConfig{RetryBackoff: 1},
		BatchMaxBytes: 120, // a few records per batch: many batches, many in flight
		Partitioner:   ManualPartitioner(),
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestProducerRetriesKeepOrderAndDeduplicate(t *testing.T) {
	sp := newSeqPeer(t, 3)
	sp.fault = func(n int) (int16, bool) {
		switch n {
		case 1:
			return kerr.NotLeaderForPartition.Code, false
		case 4, 9:
			return 0, true // appended, but the answer is lost with the connection
		case 6:
			return kerr.RequestTimedOut.Code, false
		}
		return 0, false
	}
	p := newTestProducer(t, sp.addr, nil)
	res := produceAll(t, p, 3, 600)
	if len(res.errs) > 0 {
		t.Fatalf("errors: %v", res.errs)
	}
	sp.checkLog(t, res)
	// Offsets are those of the log, except for duplicates (-1).
	for part, offs := range res.offsets {
		for i, o := range offs {
			if o != -1 && o != int64(i) {
				t.Fatalf("partition %d record %d: offset %d", part, i, o)
			}
		}
	}
}

func TestProducerOutOfOrderAtHeadBumpsEpoch(t *testing.T) {
	sp := newSeqPeer(t, 2)
	sp.fault = func(n int) (int16, bool) {
		if n == 3 {
			return kerr.OutOfOrderSequenceNumber.Code, false // a real gap, as far as the client can tell
		}
		return 0, false
	}
	p := newTestProducer(t, sp.addr, nil)
	res := produceAll(t, p, 2, 300)
	if len(res.errs) > 0 {
		t.Fatalf("errors: %v", res.errs)
	}
	sp.checkLog(t, res)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.epochSeen[1] || sp.nInit != 1 {
		t.Fatalf("epochs seen %v, InitProducerId calls %d: want a local bump to epoch 1", sp.epochSeen, sp.nInit)
	}
}

func TestProducerUnknownProducerIDBumpsEpoch(t *testing.T) {
	sp := newSeqPeer(t, 1)
	sp.fault = func(n int) (int16, bool) {
		if n == 2 {
			return kerr.UnknownProducerID.Code, false
		}
		return 0, false
	}
	p := newTestProducer(t, sp.addr, nil)
	res := produceAll(t, p, 1, 100)
	if len(res.errs) > 0 {
		t.Fatalf("errors: %v", res.errs)
	}
	sp.checkLog(t, res)
}

func TestProducerNonRetriableErrorFailsOnlyThatBatch(t *testing.T) {
	sp := newSeqPeer(t, 1)
	sp.fault = func(n int) (int16, bool) {
		if n == 1 {
			return kerr.MessageTooLarge.Code, false
		}
		return 0, false
	}
	p := newTestProducer(t, sp.addr, func(c *ProducerConfig) { c.MaxInFlight = 1 })
	var failed []error
	var mu sync.Mutex
	for i := 0; i < 20; i++ {
		p.Produce(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprintf("v%05d", i))}, func(r *Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
			}
		})
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	sp.mu.Lock()
	logged := len(sp.parts[0].values)
	sp.mu.Unlock()
	if len(failed) == 0 || len(failed)+logged != 20 {
		t.Fatalf("%d failed + %d written, want 20 with some failed", len(failed), logged)
	}
	for _, err := range failed {
		if !errors.Is(err, kerr.MessageTooLarge) {
			t.Fatalf("error %v is not MESSAGE_TOO_LARGE", err)
		}
	}
}

func TestProducerGivesUpAfterRetries(t *testing.T) {
	sp := newSeqPeer(t, 1)
	sp.fault = func(int) (int16, bool) { return kerr.NotLeaderForPartition.Code, false }
	p := newTestProducer(t, sp.addr, func(c *ProducerConfig) { c.Retries = 2 })
	err := p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("x")})
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("err %v, want NOT_LEADER_OR_FOLLOWER after retries", err)
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.nProduce != 3 {
		t.Fatalf("%d produce attempts, want 3 (1 + 2 retries)", sp.nProduce)
	}
}

func TestProducerAcksNone(t *testing.T) {
	sp := newSeqPeer(t, 2)
	p := newTestProducer(t, sp.addr, func(c *ProducerConfig) { c.Acks = AcksNone })
	res := produceAll(t, p, 2, 200)
	if len(res.errs) > 0 {
		t.Fatalf("errors: %v", res.errs)
	}
	for _, offs := range res.offsets {
		for _, o := range offs {
			if o != -1 {
				t.Fatalf("acks=0 record has offset %d", o)
			}
		}
	}
	// The peer may still be reading the last request when Flush returns (there is no
	// answer to wait for); Close waits for nothing either, so only check the prefix.
	p.Close()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.nInit != 0 {
		t.Fatal("acks=0 producer asked for a producer id")
	}
}

func TestProducerUnknownTopicFails(t *testing.T) {
	sp := newSeqPeer(t, 1)
	p := newTestProducer(t, sp.addr, nil)
	err := p.ProduceSync(context.Background(), &Record{Topic: "nope", Value: []byte("x")})
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("err %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	err = p.ProduceSync(context.Background(), &Record{Topic: "t", Partition: 5, Value: []byte("x")})
	if !errors.Is(err, ErrInvalidPartition) {
		t.Fatalf("err %v, want ErrInvalidPartition", err)
	}
}

func TestProducerClosed(t *testing.T) {
	sp := newSeqPeer(t, 1)
	p := newTestProducer(t, sp.addr, nil)
	if err := p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("x")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
