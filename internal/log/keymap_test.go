package log

import (
	"fmt"
	"testing"

	"github.com/exactq/exactq/internal/testclock"
)

// TestCompactManyKeysWithinKeyMap (#11): a client writing many unique keys cannot make
// compaction hold a key map larger than log.cleaner.dedupe.buffer.size (before, the map
// held every distinct key in memory). With room for 90 keys, 2000 keys written twice
// (the second round overwriting the first) compact over many passes to exactly the
// latest record of every key, as with a map that holds them all.
func TestCompactManyKeysWithinKeyMap(t *testing.T) {
	const keysN, perBatch = 2000, 10
	small, err := NewKeyMap(100 * keySlotBytes)
	if err != nil {
		t.Fatal(err)
	}
	large, err := NewKeyMap(DefaultKeyMapBytes)
	if err != nil {
		t.Fatal(err)
	}
	var results [2][]keyed
	for i, keys := range []*KeyMap{small, large} {
		clk := testclock.New()
		l := openT(t, t.TempDir(), compactConfig(), clk)
		var all []keyed
		for round := range 2 {
			for k := 0; k < keysN; k += perBatch {
				var recs []rec
				for j := k; j < k+perBatch; j++ {
					recs = append(recs, kv(fmt.Sprintf("k%04d", j), fmt.Sprintf("r%d", round), clk.Ms()))
				}
				first, _ := appendT(t, l, makeBatch(recs, plain))
				for j, r := range recs {
					all = append(all, keyed{offset: first + int64(j), key: string(r.key), value: string(r.value)})
				}
			}
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		l.mu.RLock()
		activeBase := l.segs[len(l.segs)-1].base
		l.mu.RUnlock()
		if err := l.Compact(keys); err != nil {
			t.Fatal(err)
		}
		if keys.TableBytes() > keys.MaxBytes() {
			t.Fatalf("key map holds %d bytes, bound %d", keys.TableBytes(), keys.MaxBytes())
		}
		want := compacted(all, activeBase)
		got := records(t, l)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("key map of %d bytes: %d records after compaction, want %d", keys.MaxBytes(), len(got), len(want))
		}
		results[i] = got
		l.Close()
	}
	if small.Passes() < keysN/90 {
		t.Fatalf("%d passes with room for 90 keys out of %d", small.Passes(), keysN)
	}
	if large.Passes() != 1 || large.TableBytes() > 2*keysN*keySlotBytes*2 {
		t.Fatalf("large map: %d passes, %d bytes for %d keys", large.Passes(), large.TableBytes(), 2*keysN)
	}
	if fmt.Sprint(results[0]) != fmt.Sprint(results[1]) {
		t.Fatal("a small key map compacts to other records than a large one")
	}
	t.Logf("small map: %d passes, %d bytes; large map: %d bytes", small.Passes(), small.TableBytes(), large.TableBytes())
}

func TestNewKeyMapRefusesLessThanTwoSlots(t *testing.T) {
	if _, err := NewKeyMap(MinKeyMapBytes - 1); err == nil {
		t.Fatal("a key map without room for a key was accepted")
	}
}
