package decodecost

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/exactq/exactq/internal/decodecost/costtest"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const hugeCount = 100_000_000

// few is what follows a lying count: a handful of bytes, nowhere near 100M elements.
var few = []byte{0, 0, 0, 1, 0, 0, 0, 2}

func compactString(dst []byte, s string) []byte { return kbin.AppendCompactString(dst, s) }

// hostileBodies are requests whose first array count (or an inner one) claims 100M
// elements, followed by a few bytes.
func hostileBodies() map[string]struct {
	key, version int16
	body         []byte
} {
	type b = struct {
		key, version int16
		body         []byte
	}
	out := make(map[string]b)
	// Produce v3 (classic): transactional id null, acks, timeout, topics count.
	p := kbin.AppendInt16(nil, -1)
	p = kbin.AppendInt16(p, -1)
	p = kbin.AppendInt32(p, 30000)
	out["Produce v3 topics"] = b{0, 3, append(kbin.AppendArrayLen(p, hugeCount), few...)}
	// Produce v9 (flexible), and one topic whose partition count lies.
	p = []byte{0} // null compact transactional id
	p = kbin.AppendInt16(p, -1)
	p = kbin.AppendInt32(p, 30000)
	out["Produce v9 topics"] = b{0, 9, append(kbin.AppendCompactArrayLen(p, hugeCount), few...)}
	inner := compactString(kbin.AppendCompactArrayLen(p, 1), "t")
	out["Produce v9 partitions"] = b{0, 9, append(kbin.AppendCompactArrayLen(inner, hugeCount), few...)}
	// Metadata v12: topics (nullable compact array).
	out["Metadata v12 topics"] = b{3, 12, append(kbin.AppendCompactArrayLen(nil, hugeCount), few...)}
	out["Metadata v1 topics"] = b{3, 1, append(kbin.AppendArrayLen(nil, hugeCount), few...)}
	// OffsetCommit v8: group, generation, member, instance id (null), topics.
	oc := compactString(nil, "g")
	oc = kbin.AppendInt32(oc, 1)
	oc = compactString(oc, "m")
	oc = append(oc, 0)
	out["OffsetCommit v8 topics"] = b{8, 8, append(kbin.AppendCompactArrayLen(oc, hugeCount), few...)}
	// CreateTopics v5: topics; and one topic with a lying configs count.
	out["CreateTopics v5 topics"] = b{19, 5, append(kbin.AppendCompactArrayLen(nil, hugeCount), few...)}
	ct := compactString(kbin.AppendCompactArrayLen(nil, 1), "t")
	ct = kbin.AppendInt32(ct, 1)
	ct = kbin.AppendInt16(ct, 1)
	ct = kbin.AppendCompactArrayLen(ct, 0) // replica assignment
	out["CreateTopics v5 configs"] = b{19, 5, append(kbin.AppendCompactArrayLen(ct, hugeCount), few...)}
	// DeleteTopics v1, ListOffsets v1, DescribeGroups v5, and an unknown-tag count.
	out["DeleteTopics v1 topics"] = b{20, 1, append(kbin.AppendArrayLen(nil, hugeCount), few...)}
	out["DescribeGroups v5 groups"] = b{15, 5, append(kbin.AppendCompactArrayLen(nil, hugeCount), few...)}
	out["ApiVersions v3 tags"] = b{18, 3, append(compactString(compactString(nil, "c"), "1"), append(kbin.AppendUvarint(nil, hugeCount), few...)...)}
	return out
}

// TestHostileCountsRefused: a count claiming 100M elements before a few bytes is refused
// by Check before anything is walked, allocating nothing (kmsg's ReadFrom refuses it too).
func TestHostileCountsRefused(t *testing.T) {
	for name, h := range hostileBodies() {
		alloc, err := Check(h.key, h.version, h.body)
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: Check = %d, %v; want ErrTruncated", name, alloc, err)
		}
		if n := testing.AllocsPerRun(100, func() { Check(h.key, h.version, h.body) }); n != 0 {
			t.Errorf("%s: Check allocates %v times", name, n)
		}
		if _, err := readFromAlloc(h.key, h.version, h.body); err == nil {
			t.Errorf("%s: kmsg accepts what Check refuses", name)
		}
	}
}

// TestCheckAllocatesNothing: walking valid requests of every key allocates nothing.
func TestCheckAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, kv := range requestVersions() {
		body := randomRequest(rng, kv[0], kv[1])
		if n := testing.AllocsPerRun(20, func() { Check(kv[0], kv[1], body) }); n != 0 {
			t.Fatalf("%s v%d: Check allocates %v times", kmsg.NameForKey(kv[0]), kv[1], n)
		}
	}
}

// amplifiers are valid requests that cost kmsg many times their size: many empty compact
// strings (1 byte on the wire, a 16-byte string header), many non-null empty nullable
// strings (1 byte, an 8-byte pointer and a 16-byte string header), small structs (a
// Produce topic: 3 bytes, 64 in memory; the worst element of any request is StopReplica's
// topic, 3 bytes and 80), and a flood of unknown tags (2 bytes, a map entry). Check accepts them; its bound must still
// hold, and it is what a server compares with its budget.
type amplifier struct {
	key, version int16
	body         []byte
	// looseness is how far above the measured the bound may be: 1.5, but 2 for maps,
	// whose cost steps up at each growth; the bound is the worst step (within 7% of it
	// there), so between steps it is up to twice what a map really took.
	looseness float64
}

func amplifiers() map[string]amplifier {
	type b = amplifier
	const n = 200_000
	out := make(map[string]b)
	groups := kbin.AppendCompactArrayLen(nil, n)
	for range n {
		groups = compactString(groups, "")
	}
	groups = append(groups, 0, 0) // include authorized operations, tags
	out["DescribeGroups v5 empty names"] = b{15, 5, groups, 1.5}

	md := kbin.AppendCompactArrayLen(nil, n)
	for range n {
		md = append(md, make([]byte, 16)...) // topic id
		md = kbin.AppendCompactNullableString(md, new(string))
		md = append(md, 0) // tags
	}
	md = append(md, 0, 0, 0) // allow auto create, include topic authorized ops, tags
	out["Metadata v12 empty nullable names"] = b{3, 12, md, 1.5}

	tags := compactString(compactString(nil, "c"), "1")
	tags = kbin.AppendUvarint(tags, n)
	for i := range n {
		tags = kbin.AppendUvarint(tags, uint32(i))
		tags = kbin.AppendUvarint(tags, 0)
	}
	out["ApiVersions v3 unknown tags"] = b{18, 3, tags, 2}

	// The attack: Produce topics of 3 wire bytes each (empty name, no partitions,
	// no tags), 64 bytes each in memory.
	produce := []byte{0} // null compact transactional id
	produce = kbin.AppendInt16(produce, -1)
	produce = kbin.AppendInt32(produce, 30000)
	produce = kbin.AppendCompactArrayLen(produce, n)
	for range n {
		produce = append(produce, 1, 1, 0)
	}
	produce = append(produce, 0)
	out["Produce v9 empty topics"] = b{0, 9, produce, 1.5}

	oc := compactString(nil, "g")
	oc = kbin.AppendInt32(oc, 1)
	oc = compactString(oc, "m")
	oc = append(oc, 0)
	oc = kbin.AppendCompactArrayLen(oc, 1)
	oc = compactString(oc, "t")
	oc = kbin.AppendCompactArrayLen(oc, n)
	for range n {
		oc = kbin.AppendInt32(oc, 0)  // partition
		oc = kbin.AppendInt64(oc, 0)  // offset
		oc = kbin.AppendInt32(oc, -1) // leader epoch
		oc = append(oc, 0, 0)         // null metadata, tags
	}
	oc = append(oc, 0, 0)
	out["OffsetCommit v8 small partitions"] = b{8, 8, oc, 1.5}
	return out
}

// TestAmplifiersBounded: for the worst valid shapes, ReadFrom allocates no more than Check
// says, and Check's figure is close (the server's budget check depends on both).
func TestAmplifiersBounded(t *testing.T) {
	for name, a := range amplifiers() {
		bound, err := Check(a.key, a.version, a.body)
		if err != nil {
			t.Fatalf("%s: Check: %v", name, err)
		}
		measured, err := readFromAlloc(a.key, a.version, a.body)
		if err != nil {
			t.Fatalf("%s: ReadFrom: %v", name, err)
		}
		t.Logf("%s: body %d bytes, ReadFrom allocates %d (%.1fx the body), bound %d (%.3fx measured)",
			name, len(a.body), measured, float64(measured)/float64(len(a.body)), bound, float64(bound)/float64(measured))
		if measured > bound+measureSlackBytes {
			t.Errorf("%s: ReadFrom allocated %d, bound %d", name, measured, bound)
		}
		if float64(bound) > a.looseness*float64(measured) {
			t.Errorf("%s: bound %d is loose against %d", name, bound, measured)
		}
	}
}

// TestHeapBytes checks heapBytes against the runtime for allocations with and without
// pointers, of every size to 1 KiB and around every size class and some large sizes.
func TestHeapBytes(t *testing.T) {
	measure := func(alloc func()) int64 {
		n, _ := costtest.AllocBytes(func() struct{} { return struct{}{} }, func(struct{}) error { alloc(); return nil })
		return n
	}
	var sizes []int // every size to 1 KiB, then around every size class and page
	for n := 1; n <= 1024; n++ {
		sizes = append(sizes, n)
	}
	for _, c := range append(sizeClasses[:], 40960, 1<<20, 3<<20) {
		for n := max(c-9, 1); n <= c+1; n++ {
			sizes = append(sizes, int(n))
		}
	}
	for _, n := range sizes {
		noscan := measure(func() { sinkBytes = make([]byte, n) })
		scan := measure(func() { sinkPointers = make([]*byte, (n+7)/8) })
		if noscan > heapBytes(int64(n)) || scan > heapBytes(int64((n+7)/8*8)) {
			t.Fatalf("n=%d: runtime allocated %d (bytes) / %d (pointers), heapBytes %d / %d", n, noscan, scan, heapBytes(int64(n)), heapBytes(int64((n+7)/8*8)))
		}
	}
}

var (
	sinkBytes    []byte
	sinkPointers []*byte
)

// TestTagMapBytes checks tagMapBytes against kmsg.Tags maps of n entries, n around every
// growth step of Go's maps.
func TestTagMapBytes(t *testing.T) {
	ns := []int{1, 2, 7, 8, 9, 15, 16, 17, 100}
	for step := 7; step <= 7<<16; step *= 2 {
		ns = append(ns, step, step+1, step+2)
	}
	for _, n := range ns {
		got, _ := costtest.AllocBytes(func() *kmsg.Tags { return new(kmsg.Tags) }, func(tags *kmsg.Tags) error {
			for i := range n {
				tags.Set(uint32(i), nil)
			}
			return nil
		})
		if got > tagMapBytes(int64(n)) {
			t.Fatalf("%d tags: map allocated %d, tagMapBytes %d", n, got, tagMapBytes(int64(n)))
		}
	}
}
