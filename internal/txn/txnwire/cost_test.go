package txnwire

import (
	"errors"
	"testing"

	"github.com/exactq/exactq/internal/decodecost"
	"github.com/exactq/exactq/internal/decodecost/costtest"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readFromAlloc is what ReadFrom allocates decoding body at version into a fresh request.
func readFromAlloc(version int16, body []byte) (int64, error) {
	return costtest.AllocBytes(func() *InitProducerIDRequest {
		r := NewInitProducerIDRequest()
		r.Version = version
		return r
	}, func(r *InitProducerIDRequest) error { return r.ReadFrom(body) })
}

// checkCost asserts DecodeCost's contract on body at version: it fails exactly where
// ReadFrom fails, and ReadFrom allocates no more than it says.
func checkCost(t *testing.T, version int16, body []byte) (bound, measured int64) {
	t.Helper()
	req := NewInitProducerIDRequest()
	req.Version = version
	bound, err := decodecost.CheckRequest(req, body)
	measured, readErr := readFromAlloc(version, body)
	if (err == nil) != (readErr == nil) {
		t.Fatalf("v%d: DecodeCost error %v, ReadFrom error %v", version, err, readErr)
	}
	if err == nil && measured > bound+costtest.SlackBytes {
		t.Fatalf("v%d: ReadFrom allocated %d bytes, DecodeCost %d", version, measured, bound)
	}
	return bound, measured
}

// v6Body is a v6 request with tagCount unknown tags of tagBytes each.
func v6Body(tagCount, tagBytes int) []byte {
	r := NewInitProducerIDRequest()
	r.Version = 6
	r.TransactionalID = kmsg.StringPtr("tx")
	b := r.AppendTo(nil)
	b = kbin.AppendUvarint(b[:len(b)-1], uint32(tagCount))
	for i := range tagCount {
		b = kbin.AppendUvarint(b, uint32(i))
		b = kbin.AppendUvarint(b, uint32(tagBytes))
		b = append(b, make([]byte, tagBytes)...)
	}
	return b
}

// TestDecodeCostBoundsReadFrom: every version, with and without unknown tags, and every
// prefix: DecodeCost (through decodecost.CheckRequest) fails where ReadFrom fails and
// bounds what it allocates; it allocates nothing itself.
func TestDecodeCostBoundsReadFrom(t *testing.T) {
	for v := int16(0); v <= MaxInitProducerIDVersion; v++ {
		r := NewInitProducerIDRequest()
		r.Version = v
		r.TransactionalID = kmsg.StringPtr("transactional-id")
		if v >= 2 {
			r.UnknownTags.Set(7, []byte("seven"))
		}
		body := r.AppendTo(nil)
		for n := range len(body) + 1 {
			checkCost(t, v, body[:n])
		}
		req := NewInitProducerIDRequest()
		req.Version = v
		if n := testing.AllocsPerRun(10, func() { decodecost.CheckRequest(req, body) }); n != 0 {
			t.Fatalf("v%d: DecodeCost allocates %v times", v, n)
		}
	}
}

// TestUnknownTagFlood: 300k empty unknown tags (2-3 bytes each) cost ReadFrom a map of
// ~30x the body; DecodeCost says so before decoding. A tag count of 100M before a few
// bytes is refused, and ReadFrom stops at the bytes it has.
func TestUnknownTagFlood(t *testing.T) {
	flood := v6Body(300_000, 0)
	bound, measured := checkCost(t, 6, flood)
	t.Logf("300k empty tags: body %d bytes, ReadFrom allocates %d (%.1fx), DecodeCost %d", len(flood), measured, float64(measured)/float64(len(flood)), bound)

	noTags := v6Body(0, 0)
	lying := append(kbin.AppendUvarint(noTags[:len(noTags)-1], 100_000_000), 1, 0, 2, 0)
	req := NewInitProducerIDRequest()
	req.Version = 6
	if _, err := req.DecodeCost(lying); !errors.Is(err, decodecost.ErrTruncated) {
		t.Fatalf("100M tags: DecodeCost %v, want ErrTruncated", err)
	}
	if measured, err := readFromAlloc(6, lying); err == nil || measured > 2048 {
		t.Fatalf("100M tags: ReadFrom allocated %d, error %v", measured, err)
	}
}
