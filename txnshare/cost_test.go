package txnshare

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/exactq/exactq/internal/decodecost"
	"github.com/exactq/exactq/internal/decodecost/costtest"
	"github.com/twmb/franz-go/pkg/kbin"
)

func randomRequest(rng *rand.Rand) *Request {
	str := func() string { return string(make([]byte, rng.IntN(30))) }
	r := &Request{GroupID: str(), MemberID: str(), ProducerID: rng.Int64(), MemberEpoch: rng.Int32()}
	if rng.IntN(2) == 0 {
		id := str()
		r.TransactionalID = &id
	}
	r.Topics = make([]Topic, rng.IntN(6))
	for i := range r.Topics {
		r.Topics[i].Partitions = make([]Partition, rng.IntN(6))
		for j := range r.Topics[i].Partitions {
			p := &r.Topics[i].Partitions[j]
			p.AcknowledgementBatches = make([]Batch, rng.IntN(6))
			for k := range p.AcknowledgementBatches {
				p.AcknowledgementBatches[k].AcknowledgeTypes = make([]int8, rng.IntN(40))
			}
		}
	}
	return r
}

// readFromAlloc is what ReadFrom allocates decoding body into a fresh Request.
func readFromAlloc(body []byte) (int64, error) {
	return costtest.AllocBytes(func() *Request { return new(Request) }, func(r *Request) error { return r.ReadFrom(body) })
}

// checkCost asserts DecodeCost's contract on body: it fails exactly where ReadFrom fails,
// and ReadFrom allocates no more than it says.
func checkCost(t *testing.T, body []byte) (bound, measured int64) {
	t.Helper()
	bound, err := (*Request)(nil).DecodeCost(body)
	measured, readErr := readFromAlloc(body)
	if (err == nil) != (readErr == nil) {
		t.Fatalf("DecodeCost error %v, ReadFrom error %v (body %x)", err, readErr, body)
	}
	if err == nil && measured > bound+costtest.SlackBytes {
		t.Fatalf("ReadFrom allocated %d bytes, DecodeCost %d", measured, bound)
	}
	return bound, measured
}

// TestDecodeCostBoundsReadFrom: random requests and every prefix of them: DecodeCost
// fails where ReadFrom fails, bounds what it allocates, and allocates nothing itself.
func TestDecodeCostBoundsReadFrom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var sumBound, sumMeasured int64
	for range 200 {
		body := randomRequest(rng).AppendTo(nil)
		bound, measured := checkCost(t, body)
		sumBound += bound
		sumMeasured += measured
		for _, n := range []int{len(body) / 3, len(body) / 2, len(body) - 1} {
			checkCost(t, body[:n])
		}
		if n := testing.AllocsPerRun(10, func() { (*Request)(nil).DecodeCost(body) }); n != 0 {
			t.Fatalf("DecodeCost allocates %v times", n)
		}
	}
	if ratio := float64(sumBound) / float64(sumMeasured); ratio > 1.5 {
		t.Fatalf("bound %.2fx what ReadFrom allocates", ratio)
	}
}

// TestHostileCounts: counts claiming 100M topics, partitions or batches before a few bytes
// are refused by DecodeCost, and ReadFrom fails without allocating from the count; 200k
// real, minimal partitions (6 bytes each, 32 in memory) are bounded by DecodeCost.
func TestHostileCounts(t *testing.T) {
	head := (&Request{GroupID: "g", MemberID: "m"}).AppendTo(nil)
	head = head[:len(head)-2] // drop the empty topics array and the tag section
	few := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	topic := append(kbin.AppendCompactArrayLen(head, 1), make([]byte, 16)...)
	partition := kbin.AppendInt32(kbin.AppendCompactArrayLen(topic, 1), 0)
	for name, body := range map[string][]byte{
		"topics":     append(kbin.AppendCompactArrayLen(head, 100_000_000), few...),
		"partitions": append(kbin.AppendCompactArrayLen(topic, 100_000_000), few...),
		"batches":    append(kbin.AppendCompactArrayLen(partition, 100_000_000), few...),
	} {
		if _, err := (*Request)(nil).DecodeCost(body); !errors.Is(err, decodecost.ErrTruncated) {
			t.Errorf("%s: DecodeCost %v, want ErrTruncated", name, err)
		}
		measured, err := readFromAlloc(body)
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
	bound, measured := checkCost(t, many)
	t.Logf("200k minimal partitions: body %d bytes, ReadFrom allocates %d, DecodeCost %d", len(many), measured, bound)
}
