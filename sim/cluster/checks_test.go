package cluster

import (
	"bytes"
	"hash/fnv"
	"slices"
	"time"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3"
)

// electBound is how long a healed cluster (every node up and running, no cut) may go
// without a serving controller: a few election timeouts (1-2 s each with raft's
// randomisation), PreVote rounds and the new term's first entry.
const electBound = 8 * time.Second

// checker holds what the invariants compare across nodes and across time.
type checker struct {
	servedBy map[uint64]int32  // controller term -> the node that served it
	ledBy    map[uint64]int32  // raft term -> the node that was leader in it
	imageAt  map[uint64]uint64 // applied index -> the hash of the image there
	// entries are the answered proposals: index -> the entry's data. indexes is their
	// keys, sorted.
	entries map[uint64][]byte
	indexes []uint64
	blocks  [][2]int64 // producer-id blocks answered, [start, end)
	// epochs: per broker id, the last incarnation answered and the highest epoch
	// answered to any of its incarnations.
	lastInc  map[int32][16]byte
	maxEpoch map[int32]int64
	noLeader bool // the liveness violation was reported for this healthy period
	// lastServing is when a controller last served.
	lastServing time.Duration
	lastCheck   time.Duration
}

// nodeObs is what the checks saw of one node's life.
type nodeObs struct {
	last     *quorum.Applied
	verified uint64          // answered entries up to here were found in this life's log
	epochs   map[int32]int64 // the highest epoch per broker this life's images had
	nextPID  int64
}

func newChecker() checker {
	return checker{servedBy: map[uint64]int32{}, ledBy: map[uint64]int32{}, imageAt: map[uint64]uint64{},
		entries: map[uint64][]byte{}, lastInc: map[int32][16]byte{}, maxEpoch: map[int32]int64{}}
}

// serving: at most one controller per term.
func (c *checker) serving(w *world, n *simNode, term uint64) {
	if other, ok := c.servedBy[term]; ok && other != n.id {
		w.failf("two controllers in term %d: n%d and n%d", term, other, n.id)
	}
	c.servedBy[term] = n.id
}

// committed: an answered proposal's index holds its data, on every node that reaches it,
// in every later life.
func (c *checker) committed(w *world, n *simNode, index uint64, data []byte) {
	if old, ok := c.entries[index]; ok {
		if !bytes.Equal(old, data) {
			w.failf("n%d answered index %d for other data than an earlier answer", n.id, index)
		}
		return
	}
	c.entries[index] = data
	i, _ := slices.BinarySearch(c.indexes, index)
	c.indexes = slices.Insert(c.indexes, i, index)
	for _, m := range w.nodes {
		if m.up && m.obs.verified >= index {
			c.verifyEntry(w, m, index)
		}
	}
}

// verifyEntry checks that n's log holds the answered entry at index (unless compacted
// into a checkpoint: the image check covers those).
func (c *checker) verifyEntry(w *world, n *simNode, index uint64) {
	ms := n.store.Storage()
	first, _ := ms.FirstIndex()
	last, _ := ms.LastIndex()
	if index < first {
		return
	}
	if index > last {
		w.failf("n%d applied past %d but its log ends at %d", n.id, index, last)
		return
	}
	ents, err := ms.Entries(index, index+1, 1<<30)
	if err != nil || len(ents) != 1 {
		w.failf("n%d: reading entry %d: %v", n.id, index, err)
		return
	}
	if !bytes.Equal(ents[0].GetData(), c.entries[index]) {
		w.failf("n%d holds other data at index %d than the proposal answered there (term %d)", n.id, index, ents[0].GetTerm())
	}
}

// answered checks a controller's answer: registration epochs only grow, producer-id
// blocks never overlap.
func (c *checker) answered(w *world, r *rpc) {
	switch p := r.resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		if p.ErrorCode != 0 {
			return
		}
		id := brokerID(r.broker)
		last, seen := c.lastInc[id]
		switch {
		case seen && last == r.inc && p.BrokerEpoch < c.maxEpoch[id]:
			w.failf("b%d: incarnation %x answered epoch %d after %d", id, r.inc[:2], p.BrokerEpoch, c.maxEpoch[id])
		case seen && last != r.inc && p.BrokerEpoch <= c.maxEpoch[id]:
			w.failf("b%d: new incarnation %x answered epoch %d, not above %d", id, r.inc[:2], p.BrokerEpoch, c.maxEpoch[id])
		}
		c.lastInc[id], c.maxEpoch[id] = r.inc, max(c.maxEpoch[id], p.BrokerEpoch)
	case *kmsg.AllocateProducerIDsResponse:
		if p.ErrorCode != 0 {
			return
		}
		blk := [2]int64{p.ProducerIDStart, p.ProducerIDStart + int64(p.ProducerIDLen)}
		if p.ProducerIDLen <= 0 || blk[0] < 0 {
			w.failf("%s: an empty or negative block", r)
		}
		for _, o := range c.blocks {
			if blk[0] < o[1] && o[0] < blk[1] {
				w.failf("%s overlaps the block [%d,%d) answered before", r, o[0], o[1])
			}
		}
		c.blocks = append(c.blocks, blk)
		w.stats["pid.blocks"]++
	}
}

// afterStep checks every running node: its raft leadership, and each newly applied
// image against the others and against the rules.
func (c *checker) afterStep(w *world) {
	anyServing := false
	for _, n := range w.nodes {
		if !n.up {
			continue
		}
		st := n.loop.RaftStatus()
		if st.RaftState == raft.StateLeader {
			if other, ok := c.ledBy[st.GetTerm()]; ok && other != n.id {
				w.failf("two raft leaders in term %d: n%d and n%d", st.GetTerm(), other, n.id)
			}
			c.ledBy[st.GetTerm()] = n.id
		}
		if _, ok := n.loop.Serving(); ok {
			anyServing = true
		}
		if a := n.loop.Current(); a != n.obs.last {
			c.observe(w, n, a)
		}
	}
	// Liveness: a healed cluster elects a controller within the bound, of healing or of
	// losing its controller while healthy (a leader removing itself from the voters
	// steps down: the voter change is no fault).
	if anyServing {
		c.lastServing = w.now
	}
	switch since := max(w.healthySince, c.lastServing); {
	case w.healthySince < 0 || anyServing:
		c.noLeader = false
	case !c.noLeader && w.now-since > electBound:
		c.noLeader = true
		w.failf("no controller %v after the cluster healed (at %.3fs) or last had one (at %.3fs)", electBound,
			w.healthySince.Seconds(), c.lastServing.Seconds())
	}
}

func (c *checker) observe(w *world, n *simNode, a *quorum.Applied) {
	prev := n.obs.last
	n.obs.last = a
	if prev != nil && a.Index < prev.Index {
		w.failf("n%d's applied index went back from %d to %d", n.id, prev.Index, a.Index)
	}
	im := a.State.(*metadata.Image)
	data, err := metadata.Machine{}.Encode(im)
	if err != nil {
		w.failf("n%d: encoding its image at %d: %v", n.id, a.Index, err)
		return
	}
	h := fnv.New64a()
	h.Write(data)
	sum := h.Sum64()
	if old, ok := c.imageAt[a.Index]; ok && old != sum {
		w.failf("n%d's image at index %d differs from another node's (or an earlier life's)", n.id, a.Index)
	}
	c.imageAt[a.Index] = sum

	// A fenced (or unknown) broker leads no partition.
	for _, t := range im.TopicsByID {
		for i, p := range t.Partitions {
			if p.Leader < 0 {
				continue
			}
			if br := im.Brokers[p.Leader]; br == nil || br.Fenced {
				w.failf("n%d at %d: %s-%d is led by broker %d, which is fenced or not registered", n.id, a.Index, t.Name, i, p.Leader)
			}
		}
	}
	// Broker epochs and the next producer id only grow along one node's applied history.
	for id, br := range im.Brokers {
		if old := n.obs.epochs[id]; br.Epoch < old {
			w.failf("n%d at %d: broker %d's epoch went back from %d to %d", n.id, a.Index, id, old, br.Epoch)
		}
		n.obs.epochs[id] = max(n.obs.epochs[id], br.Epoch)
	}
	if im.ProducerIDs.Next < n.obs.nextPID {
		w.failf("n%d at %d: the next producer id went back from %d to %d", n.id, a.Index, n.obs.nextPID, im.ProducerIDs.Next)
	}
	n.obs.nextPID = im.ProducerIDs.Next

	// Answered entries up to the applied index are in this life's log.
	i, _ := slices.BinarySearch(c.indexes, n.obs.verified+1)
	for ; i < len(c.indexes) && c.indexes[i] <= a.Index; i++ {
		c.verifyEntry(w, n, c.indexes[i])
	}
	n.obs.verified = max(n.obs.verified, a.Index)
}
