package client

import (
	"encoding/binary"
	"math/rand/v2"
)

// Murmur2 is Kafka's murmur2 hash (Java's org.apache.kafka.common.utils.Utils.murmur2),
// returned as the same signed 32-bit value Java computes.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition is Kafka's default partition for a keyed record:
// (murmur2(key) & 0x7fffffff) % numPartitions, as in Java's BuiltInPartitioner.
func KeyPartition(key []byte, numPartitions int32) int32 {
	return (Murmur2(key) & 0x7fffffff) % numPartitions
}

// Partitioner chooses a record's partition. The producer calls it with its lock held, one
// call at a time, so implementations need no locking but must be fast and must not call
// back into the producer.
type Partitioner interface {
	// Partition returns a partition in [0, numPartitions) for r.
	Partition(r *Record, numPartitions int32) int32
	// OnNewBatch is called when the record Partition just placed on partition p would
	// open a new batch there; Partition is then asked once more for the same record. A
	// sticky partitioner moves on to another partition here (KIP-480), so a batch fills
	// up before the next partition is used.
	OnNewBatch(topic string, numPartitions, p int32)
}

// DefaultPartitioner returns Kafka's default partitioner: murmur2 of the key for keyed
// records (the same partition the Java client picks) and sticky partitioning for records
// without a key.
func DefaultPartitioner() Partitioner {
	return &stickyPartitioner{sticky: make(map[string]int32)}
}

type stickyPartitioner struct {
	sticky map[string]int32 // topic → current partition for unkeyed records
}

func (s *stickyPartitioner) Partition(r *Record, n int32) int32 {
	if r.Key != nil {
		return KeyPartition(r.Key, n)
	}
	p, ok := s.sticky[r.Topic]
	if !ok || p >= n {
		p = rand.Int32N(n)
		s.sticky[r.Topic] = p
	}
	return p
}

func (s *stickyPartitioner) OnNewBatch(topic string, n, prev int32) {
	if cur, ok := s.sticky[topic]; ok && cur != prev {
		return // already moved on
	}
	p := rand.Int32N(n)
	if n > 1 && p == prev {
		p = (p + 1 + rand.Int32N(n-1)) % n // any partition but prev, uniformly
	}
	s.sticky[topic] = p
}

// ManualPartitioner returns a partitioner that uses each record's Partition field as set by
// the caller.
func ManualPartitioner() Partitioner { return manualPartitioner{} }

type manualPartitioner struct{}

func (manualPartitioner) Partition(r *Record, _ int32) int32 { return r.Partition }
func (manualPartitioner) OnNewBatch(string, int32, int32)    {}
