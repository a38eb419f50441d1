package decodecost

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/exactq/exactq/internal/decodecost/costtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const measureSlackBytes = costtest.SlackBytes

var tagsType = reflect.TypeOf(kmsg.Tags{})

// filler builds random kmsg values by reflection: every field a random value, arrays nil
// or of 0 to 5 elements (fewer deep down), nullables nil or not, and now and then unknown
// tags (keys from 100 up, clear of every known tag).
type filler struct {
	rng *rand.Rand
}

func (f *filler) fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(f.rng.IntN(2) == 1)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.rng.Uint64()))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(f.rng.Uint64())
	case reflect.Float64:
		v.SetFloat(f.rng.Float64())
	case reflect.String:
		v.SetString(string(f.bytes(40)))
	case reflect.Array: // [16]byte uuids
		for i := range v.Len() {
			f.fill(v.Index(i), depth)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if f.rng.IntN(4) > 0 {
				v.SetBytes(f.bytes(40))
			}
			return
		}
		if f.rng.IntN(6) == 0 {
			return // nil: a null nullable array, else an empty one
		}
		n := f.rng.IntN(6)
		if depth > 2 {
			n = f.rng.IntN(3)
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Pointer:
		if f.rng.IntN(3) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth)
		v.Set(p)
	case reflect.Struct:
		if v.Type() == tagsType {
			f.fillTags(v.Addr().Interface().(*kmsg.Tags))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i), depth)
			}
		}
	default:
		panic("filler: unhandled kind " + v.Kind().String())
	}
}

func (f *filler) bytes(maxLen int) []byte {
	b := make([]byte, f.rng.IntN(maxLen+1))
	for i := range b {
		b[i] = byte(f.rng.Uint32())
	}
	return b
}

func (f *filler) fillTags(t *kmsg.Tags) {
	if f.rng.IntN(4) != 0 {
		return
	}
	for range 1 + f.rng.IntN(3) {
		t.Set(100+uint32(f.rng.IntN(300)), f.bytes(10))
	}
}

// randomRequest is a random request of key at version, encoded by kmsg.
func randomRequest(rng *rand.Rand, key, version int16) []byte {
	req := kmsg.RequestForKey(key)
	(&filler{rng: rng}).fill(reflect.ValueOf(req).Elem(), 0)
	req.SetVersion(version)
	return req.AppendTo(nil)
}

// readFromAlloc is the heap bytes (*kmsg.XRequest).ReadFrom allocates decoding body into
// a fresh request, with its error.
func readFromAlloc(key, version int16, body []byte) (int64, error) {
	return costtest.AllocBytes(func() kmsg.Request {
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		return req
	}, func(req kmsg.Request) error { return req.ReadFrom(body) })
}

// requestVersions is every (key, version) kmsg decodes, from kmsg itself.
func requestVersions() [][2]int16 {
	var out [][2]int16
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			out = append(out, [2]int16{key, v})
		}
	}
	return out
}

// TestRoundTripAllRequests: for every request key and version kmsg supports, random
// requests encoded by kmsg are accepted, walked to their last byte, and kmsg's ReadFrom
// allocates no more than Check says (and not absurdly less).
func TestRoundTripAllRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 2))
	samples := 12
	if testing.Short() {
		samples = 3
	}
	var ratios []float64
	var sumBound, sumMeasured int64
	for _, kv := range requestVersions() {
		key, version := kv[0], kv[1]
		for range samples {
			body := randomRequest(rng, key, version)
			bound, err := Check(key, version, body)
			if err != nil {
				t.Fatalf("%s v%d: Check of a kmsg encoding: %v", kmsg.NameForKey(key), version, err)
			}
			r := reader{src: body}
			walkRequest(&r, key, version)
			if len(r.src) != 0 {
				t.Fatalf("%s v%d: walk left %d of %d bytes unread", kmsg.NameForKey(key), version, len(r.src), len(body))
			}
			measured, err := readFromAlloc(key, version, body)
			if err != nil {
				t.Fatalf("%s v%d: kmsg ReadFrom of its own encoding: %v", kmsg.NameForKey(key), version, err)
			}
			if measured > bound+measureSlackBytes {
				t.Fatalf("%s v%d: ReadFrom allocated %d bytes, Check bound %d (body %d bytes)", kmsg.NameForKey(key), version, measured, bound, len(body))
			}
			sumBound += bound
			sumMeasured += measured
			if measured >= 1024 {
				ratios = append(ratios, float64(bound)/float64(measured))
			}
		}
	}
	sort.Float64s(ratios)
	total := float64(sumBound) / float64(sumMeasured)
	t.Logf("bound/measured: total %.3f over %d requests; of those allocating >= 1 KiB (%d): median %.3f, p99 %.3f, max %.3f",
		total, len(requestVersions())*samples, len(ratios), ratios[len(ratios)/2], ratios[len(ratios)*99/100], ratios[len(ratios)-1])
	// Not absurdly above: the bound rounds each string to 16 bytes and maps to their
	// worst growth step, but is otherwise kmsg's own allocations.
	if total > 1.5 || ratios[len(ratios)-1] > 3 {
		t.Fatalf("bound too loose: total %.3f, max %.3f", total, ratios[len(ratios)-1])
	}
}

// TestUnknownRequest: keys and versions kmsg does not decode are ErrUnknownRequest.
func TestUnknownRequest(t *testing.T) {
	for _, kv := range [][2]int16{{-1, 0}, {kmsg.MaxKey + 1, 0}, {0, -1}, {0, kmsg.NewPtrProduceRequest().MaxVersion() + 1}, {3, 1000}} {
		if _, err := Check(kv[0], kv[1], nil); !errors.Is(err, ErrUnknownRequest) {
			t.Errorf("Check(%d, %d): %v, want ErrUnknownRequest", kv[0], kv[1], err)
		}
	}
}
