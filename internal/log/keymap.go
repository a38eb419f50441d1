package log

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
)

// KeyMap is compaction's map from record key to the latest offset of that key, bounded in
// memory as Kafka's cleaner offset map is (SkimpyOffsetMap, sized by
// log.cleaner.dedupe.buffer.size): it stores a 16-byte hash of each key (SHA-256,
// truncated; Kafka uses MD5's 16 bytes) and its offset in a fixed table of 24-byte slots,
// filled to at most keyMapLoadFactor. When the keys of the range being cleaned do not fit,
// Compact cleans in several passes, each as far as the map reaches.
//
// A broker has one, shared by the compactions of every log: Compact holds it for its
// duration, so compactions using the same KeyMap run one at a time and memory stays
// within the bound whatever the number of logs. The table is allocated on first use,
// only as large as the largest range compacted so far needs (never above the bound), and
// kept for later compactions.
type KeyMap struct {
	mu       sync.Mutex
	maxSlots int
	table    []keySlot // the backing table, len = largest size used so far
	slots    []keySlot // this pass's table: a prefix of table
	used     int       // slots filled in this pass
	passes   int       // passes of the last Compact (for tests and logs)
}

// keySlot is one entry: a key's hash and offset+1 (0: empty slot).
type keySlot struct {
	hash      [keyHashBytes]byte
	offsetPl1 int64
}

const (
	keyHashBytes     = 16
	keySlotBytes     = keyHashBytes + 8
	keyMapLoadFactor = 0.9 // Kafka's log.cleaner.io.buffer.load.factor default
	// MinKeyMapBytes is the smallest KeyMap: two slots, so every pass maps at least one
	// key and compaction always progresses. (The broker config's floor is Kafka's, 1 MiB.)
	MinKeyMapBytes = 2 * keySlotBytes
	// DefaultKeyMapBytes is Kafka's default log.cleaner.dedupe.buffer.size (128 MiB).
	DefaultKeyMapBytes = 128 << 20
)

// NewKeyMap returns a key map holding at most maxBytes of keys (see KeyMap).
func NewKeyMap(maxBytes int64) (*KeyMap, error) {
	if maxBytes < MinKeyMapBytes {
		return nil, fmt.Errorf("log: key map of %d bytes: at least %d needed", maxBytes, MinKeyMapBytes)
	}
	return &KeyMap{maxSlots: int(maxBytes / keySlotBytes)}, nil
}

// MaxBytes is the bound the map's table stays within.
func (m *KeyMap) MaxBytes() int64 { return int64(m.maxSlots) * keySlotBytes }

// Passes is the number of passes the last Compact with this map took (0 when it had
// nothing to clean).
func (m *KeyMap) Passes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.passes
}

// TableBytes is the memory the map's table holds now.
func (m *KeyMap) TableBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(cap(m.table)) * keySlotBytes
}

// reset empties the map for a pass over a range of at most records keyed records, sizing
// this pass's table to hold them all if the bound allows.
func (m *KeyMap) reset(records int64) {
	n := m.maxSlots
	if want := int64(float64(records)/keyMapLoadFactor) + 2; want < int64(n) {
		n = int(want)
	}
	if n > len(m.table) {
		m.table, m.slots = nil, nil // let the old table go before the new one is allocated
		m.table = make([]keySlot, n)
	} else {
		clear(m.table[:n])
	}
	m.slots, m.used = m.table[:n], 0
}

// full reports whether the map takes no new key (existing keys may still be updated).
func (m *KeyMap) full() bool { return m.used >= max(1, int(float64(len(m.slots))*keyMapLoadFactor)) }

func hashKey(key []byte) (h [keyHashBytes]byte) {
	sum := sha256.Sum256(key)
	copy(h[:], sum[:keyHashBytes])
	return h
}

// find returns the slot of hash h, or the empty slot where it would go (linear probing
// from a position taken from the hash; the table always has an empty slot).
func (m *KeyMap) find(h [keyHashBytes]byte) *keySlot {
	i := binary.LittleEndian.Uint64(h[:8]) % uint64(len(m.slots))
	for {
		s := &m.slots[i]
		if s.offsetPl1 == 0 || s.hash == h {
			return s
		}
		if i++; i == uint64(len(m.slots)) {
			i = 0
		}
	}
}

// put records offset as key's latest. It reports false, storing nothing, when key is new
// and the map is full.
func (m *KeyMap) put(key []byte, offset int64) bool {
	h := hashKey(key)
	s := m.find(h)
	if s.offsetPl1 == 0 {
		if m.full() {
			return false
		}
		s.hash = h
		m.used++
	}
	s.offsetPl1 = offset + 1
	return true
}

// get returns key's latest offset in the map, or -1.
func (m *KeyMap) get(key []byte) int64 { return m.find(hashKey(key)).offsetPl1 - 1 }
