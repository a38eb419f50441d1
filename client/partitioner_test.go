package client

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Vectors from Apache Kafka's UtilsTest.testMurmur2
// (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
func TestMurmur2KafkaVectors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := Murmur2([]byte(tc.in)); got != tc.want {
			t.Errorf("Murmur2(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestKeyPartitionMatchesFranzGo checks keyed partitioning against franz-go's
// Kafka-compatible StickyKeyPartitioner, an independent implementation, over keys of every
// length remainder and several partition counts.
func TestKeyPartitionMatchesFranzGo(t *testing.T) {
	for _, n := range []int{1, 3, 7, 16, 100, 1000} {
		kp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		for i := 0; i < 2000; i++ {
			key := []byte(fmt.Sprintf("key-%d-%s", i, "xyz"[:i%4]))
			want := kp.Partition(&kgo.Record{Key: key}, n)
			if got := KeyPartition(key, int32(n)); int(got) != want {
				t.Fatalf("KeyPartition(%q, %d) = %d, franz-go says %d", key, n, got, want)
			}
		}
	}
	// The empty (non-nil) key is hashed too, like Java.
	if got := KeyPartition([]byte{}, 10); got != (Murmur2(nil)&0x7fffffff)%10 {
		t.Fatalf("empty key: %d", got)
	}
}

func TestDefaultPartitionerKeyedIsStable(t *testing.T) {
	p := DefaultPartitioner()
	r := &Record{Topic: "test", Key: []byte("key")}
	first := p.Partition(r, 3)
	for i := 0; i < 100; i++ {
		p.OnNewBatch("test", 3, first) // must not affect keyed records
		if got := p.Partition(r, 3); got != first {
			t.Fatalf("same key gave partition %d then %d", first, got)
		}
	}
}

func TestDefaultPartitionerStickyForNullKeys(t *testing.T) {
	p := DefaultPartitioner()
	r := &Record{Topic: "test"}
	first := p.Partition(r, 5)
	for i := 0; i < 100; i++ {
		if got := p.Partition(r, 5); got != first {
			t.Fatalf("sticky partition changed without a new batch: %d then %d", first, got)
		}
	}
	// A new batch moves to another partition, never the same one.
	seen := map[int32]bool{}
	cur := first
	for i := 0; i < 200; i++ {
		p.OnNewBatch("test", 5, cur)
		next := p.Partition(r, 5)
		if next == cur {
			t.Fatalf("OnNewBatch kept partition %d", cur)
		}
		seen[next] = true
		cur = next
	}
	if len(seen) != 5 {
		t.Fatalf("sticky partitioner visited %v of 5 partitions", seen)
	}
	// OnNewBatch for a partition that is not the sticky one changes nothing.
	p.OnNewBatch("test", 5, (cur+1)%5)
	if got := p.Partition(r, 5); got != cur {
		t.Fatalf("OnNewBatch for another partition moved sticky %d to %d", cur, got)
	}
	// One partition: always 0.
	p.OnNewBatch("one", 1, 0)
	if got := p.Partition(&Record{Topic: "one"}, 1); got != 0 {
		t.Fatalf("single partition: %d", got)
	}
}
