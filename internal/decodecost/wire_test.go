package decodecost

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/decodecost/costtest"
	"github.com/exactq/exactq/wire"
)

// wireRequests are empty wire requests of each kind at version, as the server decodes
// into them.
func wireRequests(version int16) []kmsg.Request {
	all := []kmsg.Request{&wire.InitProducerIDRequest{Version: version}}
	if version == 0 {
		all = append(all, &wire.TxnShareAcknowledgeRequest{}, &wire.TxnShareAcknowledgeRequest{APIKey: 98}, &wire.RaftMessageRequest{})
	}
	return all
}

// checkWireCost asserts CheckRequest's contract for a wire request on body: it fails
// exactly where ReadFrom fails, and ReadFrom allocates no more than it says.
func checkWireCost(t *testing.T, fresh func() kmsg.Request, body []byte) (bound, measured int64) {
	t.Helper()
	req := fresh()
	bound, err := CheckRequest(req, body)
	measured, readErr := costtest.AllocBytes(fresh, func(r kmsg.Request) error { return r.ReadFrom(body) })
	if (err == nil) != (readErr == nil) {
		t.Fatalf("%T v%d: CheckRequest error %v, ReadFrom error %v (body %x)", req, req.GetVersion(), err, readErr, body)
	}
	if err == nil && measured > bound+costtest.SlackBytes {
		t.Fatalf("%T v%d: ReadFrom allocated %d bytes, CheckRequest %d", req, req.GetVersion(), measured, bound)
	}
	return bound, measured
}

func randomTxnShareAck(rng *rand.Rand) *wire.TxnShareAcknowledgeRequest {
	str := func() string { return string(make([]byte, rng.IntN(30))) }
	r := &wire.TxnShareAcknowledgeRequest{GroupID: str(), MemberID: str(), ProducerID: rng.Int64(), MemberEpoch: rng.Int32()}
	if rng.IntN(2) == 0 {
		r.TransactionalID = kmsg.StringPtr(str())
	}
	r.Topics = make([]wire.TxnShareAcknowledgeRequestTopic, rng.IntN(6))
	for i := range r.Topics {
		r.Topics[i].Partitions = make([]wire.TxnShareAcknowledgeRequestTopicPartition, rng.IntN(6))
		for j := range r.Topics[i].Partitions {
			p := &r.Topics[i].Partitions[j]
			p.AcknowledgementBatches = make([]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch, rng.IntN(6))
			for k := range p.AcknowledgementBatches {
				p.AcknowledgementBatches[k].AcknowledgeTypes = make([]int8, rng.IntN(40))
			}
		}
	}
	return r
}

func randomRaftMessage(rng *rand.Rand) *wire.RaftMessageRequest {
	r := &wire.RaftMessageRequest{ClusterID: string(make([]byte, rng.IntN(30))), SenderNodeID: rng.Int32(), DestinationRaftID: rng.Int64()}
	r.Messages = make([][]byte, rng.IntN(20))
	for i := range r.Messages {
		r.Messages[i] = make([]byte, rng.IntN(300))
	}
	return r
}

// TestWireIsBounded: the server serves a wire request only if CheckRequest bounds it by
// its own walker (a TxnShareAcknowledge at a moved key included); kmsg's are not.
func TestWireIsBounded(t *testing.T) {
	for _, req := range wireRequests(0) {
		if !Bounds(req) {
			t.Errorf("%T (key %d): not bounded", req, req.Key())
		}
	}
	if Bounds(kmsg.NewPtrInitProducerIDRequest()) {
		t.Error("kmsg's InitProducerIDRequest is bounded by a wire walker")
	}
	if _, err := CheckRequest(&wire.InitProducerIDRequest{Version: 7}, nil); !errors.Is(err, ErrUnknownRequest) {
		t.Errorf("InitProducerId v7: %v, want ErrUnknownRequest", err)
	}
}

// checkRandomWireCost runs checkWireCost on 200 random bodies and three prefixes of each,
// checks CheckRequest allocates nothing, and that the bound is within 1.5x of what ReadFrom
// allocated over them all.
func checkRandomWireCost(t *testing.T, fresh func() kmsg.Request, random func() []byte) {
	t.Helper()
	var sumBound, sumMeasured int64
	for range 200 {
		body := random()
		bound, measured := checkWireCost(t, fresh, body)
		sumBound += bound
		sumMeasured += measured
		for _, n := range []int{len(body) / 3, len(body) / 2, len(body) - 1} {
			checkWireCost(t, fresh, body[:n])
		}
		req := fresh()
		if n := testing.AllocsPerRun(10, func() { CheckRequest(req, body) }); n != 0 {
			t.Fatalf("%T: CheckRequest allocates %v times", req, n)
		}
	}
	if ratio := float64(sumBound) / float64(sumMeasured); ratio > 1.5 {
		t.Fatalf("%T: bound %.2fx what ReadFrom allocates", fresh(), ratio)
	}
}

// TestWireCostBoundsReadFrom: random TxnShareAcknowledge and RaftMessage requests, InitProducerId at every
// version with and without unknown tags, and every prefix of them: CheckRequest fails where
// ReadFrom fails, bounds what it allocates, and allocates nothing itself.
func TestWireCostBoundsReadFrom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	checkRandomWireCost(t, func() kmsg.Request { return new(wire.TxnShareAcknowledgeRequest) },
		func() []byte { return randomTxnShareAck(rng).AppendTo(nil) })
	checkRandomWireCost(t, func() kmsg.Request { return new(wire.RaftMessageRequest) },
		func() []byte { return randomRaftMessage(rng).AppendTo(nil) })

	for v := range (*wire.InitProducerIDRequest)(nil).MaxVersion() + 1 {
		r := wire.NewPtrInitProducerIDRequest()
		r.Version = v
		r.TransactionalID = kmsg.StringPtr("transactional-id")
		if v >= 2 {
			r.UnknownTags.Set(7, []byte("seven"))
		}
		body := r.AppendTo(nil)
		fresh := func() kmsg.Request { return &wire.InitProducerIDRequest{Version: v} }
		for n := range len(body) + 1 {
			checkWireCost(t, fresh, body[:n])
		}
		req := fresh()
		if n := testing.AllocsPerRun(10, func() { CheckRequest(req, body) }); n != 0 {
			t.Fatalf("v%d: CheckRequest allocates %v times", v, n)
		}
	}
}

// TestWireHostileCounts: counts claiming 100M topics, partitions or batches before a few
// bytes are refused by CheckRequest, and ReadFrom fails without allocating from the count;
// 200k real, minimal partitions (6 bytes each, ~50 in memory) are bounded. InitProducerId
// v6: 300k empty unknown tags (a map of ~30x the body) are bounded, 100M claimed are
// refused.
func TestWireHostileCounts(t *testing.T) {
	fresh := func() kmsg.Request { return new(wire.TxnShareAcknowledgeRequest) }
	head := (&wire.TxnShareAcknowledgeRequest{GroupID: "g", MemberID: "m"}).AppendTo(nil)
	head = head[:len(head)-2] // drop the empty topics array and the tag section
	few := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	topic := append(kbin.AppendCompactArrayLen(head, 1), make([]byte, 16)...)
	partition := kbin.AppendInt32(kbin.AppendCompactArrayLen(topic, 1), 0)
	for name, body := range map[string][]byte{
		"topics":     append(kbin.AppendCompactArrayLen(head, 100_000_000), few...),
		"partitions": append(kbin.AppendCompactArrayLen(topic, 100_000_000), few...),
		"batches":    append(kbin.AppendCompactArrayLen(partition, 100_000_000), few...),
	} {
		if _, err := CheckRequest(fresh(), body); !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: CheckRequest %v, want ErrTruncated", name, err)
		}
		measured, err := costtest.AllocBytes(fresh, func(r kmsg.Request) error { return r.ReadFrom(body) })
		if err == nil || measured > 1024 {
			t.Errorf("%s: ReadFrom allocated %d bytes, error %v", name, measured, err)
		}
	}
	const n = 200_000
	many := kbin.AppendCompactArrayLen(topic, n)
	for range n {
		many = append(kbin.AppendInt32(many, 0), 1, 0) // index, empty batches, no tags
	}
	many = append(many, 0, 0) // topic and request tags
	bound, measured := checkWireCost(t, fresh, many)
	t.Logf("200k minimal partitions: body %d bytes, ReadFrom allocates %d, CheckRequest %d", len(many), measured, bound)

	v6 := func() kmsg.Request { return &wire.InitProducerIDRequest{Version: 6} }
	tagged := func(tagCount int) []byte {
		r := wire.NewPtrInitProducerIDRequest()
		r.Version = 6
		r.TransactionalID = kmsg.StringPtr("tx")
		b := r.AppendTo(nil)
		b = kbin.AppendUvarint(b[:len(b)-1], uint32(tagCount))
		for i := range tagCount {
			b = kbin.AppendUvarint(kbin.AppendUvarint(b, uint32(i)), 0)
		}
		return b
	}
	flood := tagged(300_000)
	bound, measured = checkWireCost(t, v6, flood)
	t.Logf("300k empty tags: body %d bytes, ReadFrom allocates %d (%.1fx), CheckRequest %d", len(flood), measured, float64(measured)/float64(len(flood)), bound)
	noTags := tagged(0)
	lying := append(kbin.AppendUvarint(noTags[:len(noTags)-1], 100_000_000), 1, 0, 2, 0)
	if _, err := CheckRequest(v6(), lying); !errors.Is(err, ErrTruncated) {
		t.Fatalf("100M tags: CheckRequest %v, want ErrTruncated", err)
	}
	if measured, err := costtest.AllocBytes(v6, func(r kmsg.Request) error { return r.ReadFrom(lying) }); err == nil || measured > 2048 {
		t.Fatalf("100M tags: ReadFrom allocated %d, error %v", measured, err)
	}
}

// FuzzWireCheck: on any body, CheckRequest of a wire request never panics, fails exactly
// where ReadFrom fails, and bounds what ReadFrom allocates.
func FuzzWireCheck(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 4 {
		f.Add(uint8(1), uint8(0), randomTxnShareAck(rng).AppendTo(nil))
		f.Add(uint8(2), uint8(0), randomRaftMessage(rng).AppendTo(nil))
	}
	for v := range (*wire.InitProducerIDRequest)(nil).MaxVersion() + 1 {
		r := wire.NewPtrInitProducerIDRequest()
		r.Version, r.TransactionalID = v, kmsg.StringPtr("tx")
		f.Add(uint8(0), uint8(v), r.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, kind, versionByte uint8, body []byte) {
		fresh := func() kmsg.Request {
			switch kind % 3 {
			case 1:
				return new(wire.TxnShareAcknowledgeRequest)
			case 2:
				return new(wire.RaftMessageRequest)
			}
			return &wire.InitProducerIDRequest{Version: int16(versionByte) % 7}
		}
		checkWireCost(t, fresh, body)
	})
}
