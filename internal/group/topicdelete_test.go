package group

import (
	"errors"
	"sync"
	"testing"
)

// topicTable is the broker's topic registry as the coordinator sees it: names to ids,
// changed by a test's deletions and re-creations.
type topicTable struct {
	mu  sync.Mutex
	ids map[string][16]byte
}

func (tt *topicTable) id(name string) ([16]byte, bool) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	id, ok := tt.ids[name]
	return id, ok
}

func (tt *topicTable) set(name string, id byte) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if id == 0 {
		delete(tt.ids, name)
		return
	}
	tt.ids[name] = [16]byte{id}
}

func newTopicEnv(t *testing.T) (*env, *topicTable) {
	tt := &topicTable{ids: map[string][16]byte{"t": {1}, "other": {2}}}
	e := newEnv(t, func(c *Config) {
		c.TopicID = tt.id
		c.TopicExists = func(topic string, _ int32) bool { _, ok := tt.id(topic); return ok }
	})
	return e, tt
}

// DeleteTopicOffsets removes the committed and pending offsets of the deleted topic from
// every group, durably, and leaves other topics' offsets alone (onTopicsDeleted).
func TestDeleteTopicOffsets(t *testing.T) {
	e, tt := newTopicEnv(t)
	for _, g := range []string{"a", "b", "c", "d"} {
		if code := e.commit(g, "", -1, "t", 0, 5); code != 0 {
			t.Fatal(code)
		}
		if code := e.commit(g, "", -1, "other", 0, 6); code != 0 {
			t.Fatal(code)
		}
	}
	m := e.stableOne("txn")
	if code := e.txnCommit("txn", m, 1, 77, "t", 1, 9); code != 0 {
		t.Fatal(code)
	}
	e.settle()
	tt.set("t", 0)
	if err := e.c.DeleteTopicOffsets(t.Context(), "t", [16]byte{1}); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, g := range []string{"a", "b", "c", "d"} {
			if off, _ := e.fetch(g, "t", 0, false); off != -1 {
				t.Fatalf("%s: group %s still has offset %d of the deleted topic", when, g, off)
			}
			if off, _ := e.fetch(g, "other", 0, false); off != 6 {
				t.Fatalf("%s: group %s lost its offset of another topic: %d", when, g, off)
			}
		}
		if _, code := e.fetch("txn", "t", 1, true); code != 0 {
			t.Fatalf("%s: the deleted topic's pending transactional offset is still pending: %d", when, code)
		}
	}
	check("after deletion")
	e.restart()
	check("after restart")
}

// A topic deleted and re-created under the same name: the deletion of the old one does
// not touch offsets committed for the new one, and the old offsets do not come back.
func TestDeleteTopicOffsetsKeepsRecreatedTopic(t *testing.T) {
	e, tt := newTopicEnv(t)
	if code := e.commit("g", "", -1, "t", 0, 5); code != 0 {
		t.Fatal(code)
	}
	e.settle()
	tt.set("t", 3) // deleted and re-created with id 3; the deletion hook has not run yet
	if off, _ := e.fetch("g", "t", 0, false); off != 5 {
		t.Fatalf("fetch before the hook: %d", off)
	}
	if code := e.commit("h", "", -1, "t", 0, 8); code != 0 {
		t.Fatal(code)
	}
	if err := e.c.DeleteTopicOffsets(t.Context(), "t", [16]byte{1}); err != nil {
		t.Fatal(err)
	}
	if off, _ := e.fetch("g", "t", 0, false); off != -1 {
		t.Fatalf("old topic's offset: %d", off)
	}
	if off, _ := e.fetch("h", "t", 0, false); off != 8 {
		t.Fatalf("new topic's offset: %d", off)
	}
}

// Offsets whose topic is gone, or whose topic was re-created (another id), without their
// tombstones in the log (a crash after the topic's record was removed) are tombstoned at
// load, durably, before the coordinator serves.
func TestLoadTombstonesOffsetsOfDeletedTopics(t *testing.T) {
	e, tt := newTopicEnv(t)
	tt.set("gone", 4)
	tt.set("reborn", 5)
	tt.set("kept", 6)
	for _, g := range []string{"gone", "reborn", "kept"} {
		if code := e.commit("g", "", -1, g, 0, 7); code != 0 {
			t.Fatal(code)
		}
	}
	e.settle()
	tt.set("gone", 0)
	tt.set("reborn", 9)
	e.restart()
	if off, _ := e.fetch("g", "gone", 0, false); off != -1 {
		t.Fatalf("offset of a deleted topic after load: %d", off)
	}
	if off, _ := e.fetch("g", "reborn", 0, false); off != -1 {
		t.Fatalf("offset of a re-created topic's predecessor after load: %d", off)
	}
	if off, _ := e.fetch("g", "kept", 0, false); off != 7 {
		t.Fatalf("offset of a live topic after load: %d", off)
	}
	// The tombstones are in the log: a load that no longer knows topic ids (nothing is
	// outlived) still does not find the old offsets.
	e.cfg.TopicID, e.cfg.TopicExists = nil, nil
	e.restart()
	if off, _ := e.fetch("g", "reborn", 0, false); off != -1 {
		t.Fatalf("load-time tombstone was not written: %d", off)
	}
	if off, _ := e.fetch("g", "kept", 0, false); off != 7 {
		t.Fatalf("live offset after second load: %d", off)
	}
}

// A load whose tombstones cannot be written (a full disk) still starts and does not serve
// the outlived offsets; the next load writes the tombstones.
func TestLoadTombstonesFailedWriteRetriedNextLoad(t *testing.T) {
	e, tt := newTopicEnv(t)
	if code := e.commit("g", "", -1, "t", 0, 7); code != 0 {
		t.Fatal(code)
	}
	e.settle()
	tt.set("t", 9) // deleted and re-created while the tombstones were lost
	p := e.c.PartitionFor("g")
	e.logs[p].FailAppend = errors.New("no space left on device")
	e.restart()
	if off, _ := e.fetch("g", "t", 0, false); off != -1 {
		t.Fatalf("outlived offset served after a load whose tombstones failed: %d", off)
	}
	e.restart() // the disk has room again
	e.cfg.TopicID, e.cfg.TopicExists = nil, nil
	e.restart()
	if off, _ := e.fetch("g", "t", 0, false); off != -1 {
		t.Fatalf("tombstone not written by the load after the failure: %d", off)
	}
}
