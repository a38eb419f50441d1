package broker

import (
	"context"
	"errors"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/node"
	"github.com/exactq/exactq/internal/cluster/quorum"
)

// The partition publisher (docs/architecture.md, "Placement and routing (part 1)") is the
// one writer of the broker's topic registry: a goroutine that follows the node's applied
// metadata images and makes the broker's local state match each one, whoever made the
// change (this broker's admin requests, or another node's controller). For each image it
// deletes the topics the image no longer has (their groups' offsets, their share state,
// their partition directories), opens the partition logs of new topics and partitions,
// and gives open partitions their topic's new configs; then it publishes the image's
// index, which admin answers wait for (wait).
//
// A partition whose log cannot be opened or created (a full disk, a permission, a file
// in its place) stays in the image and in the registry, offline: its slot in the topic's
// partitions is nil, requests for it are answered KAFKA_STORAGE_ERROR and Metadata reports
// it without a leader. The publisher tries to open it again with a growing backoff, and
// start-up tries again.
type publisher struct {
	b *Broker

	// Owned by the goroutine that applies (Open's first apply, then run).
	im      *metadata.Image // the image the registry matches
	started bool            // the first image (start-up's) is applied
	offline int             // partitions in the registry whose log is not open
	retryIn time.Duration   // the backoff of the next retry of offline partitions

	// cur is im for every goroutine (routing, Metadata): set before index is published.
	cur atomic.Pointer[metadata.Image]

	mu       sync.Mutex
	index    uint64        // guarded by mu: the index of im
	advanced chan struct{} // guarded by mu: closed (and replaced) when index grows

	// cleanup asks the goroutine to remove the partition directories its image does not
	// name (removeOrphanPartitionDirs): a cluster node's, once caught up (registration.go).
	cleanup chan struct{}

	stop chan struct{}
	done chan struct{}
}

// publisherBuffer is how many applied images may wait for the publisher; a publisher that
// lets it fill is dropped by the loop and resubscribes, comparing whole images.
const publisherBuffer = 256

// Retry backoff for offline partitions.
const (
	offlineRetryFirst = 500 * time.Millisecond
	offlineRetryMax   = 30 * time.Second
)

var errPublisherStopped = errors.New("broker: metadata publisher stopped")

func newPublisher(b *Broker) *publisher {
	pub := &publisher{b: b, im: metadata.Empty(), advanced: make(chan struct{}), retryIn: offlineRetryFirst,
		cleanup: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	pub.cur.Store(pub.im)
	return pub
}

// image is the image the registry matches.
func (pub *publisher) image() *metadata.Image { return pub.cur.Load() }

// start applies the node's current image, synchronously (the broker serves nothing
// before its partitions are open), and returns the subscription the goroutine follows.
func (pub *publisher) start() (opened []*partition, follow func()) {
	first, ch, cancel := pub.b.meta.Subscribe(publisherBuffer)
	u := node.UpdateOf(first)
	opened = pub.apply(u.Image, u.Index, nil)
	return opened, func() {
		go pub.run(ch, cancel)
	}
}

// run follows the node's images until stopped. A dropped subscription (the buffer filled,
// or the loop stopped on a storage error and the node started another) is taken up again
// from the node's current image, compared whole.
func (pub *publisher) run(ch <-chan *quorum.Applied, cancel func()) {
	defer close(pub.done)
	var retry <-chan time.Time
	for {
		if pub.offline > 0 && retry == nil {
			retry = time.After(pub.retryIn)
		}
		select {
		case <-pub.stop:
			cancel()
			return
		case <-retry:
			retry = nil
			pub.retryOffline()
		case <-pub.cleanup:
			// The directories of every partition pub.im names stay, open or offline.
			if err := removeOrphanPartitionDirs(pub.b.cfg.DataDir, topicsOf(pub.im)); err != nil {
				pub.b.logger.Error("removing orphan partition directories", "err", err)
			}
		case a, ok := <-ch:
			if !ok {
				cancel()
				select { // a stopped loop closes new subscriptions at once: let the node replace it
				case <-pub.stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				var first *quorum.Applied
				first, ch, cancel = pub.b.meta.Subscribe(publisherBuffer)
				if u := node.UpdateOf(first); u.Index > pub.index {
					pub.apply(u.Image, u.Index, nil)
				}
				continue
			}
			// A new loop replays its log from the files: images at or below the index
			// applied are older states (or the same), never applied again.
			if u := node.UpdateOf(a); u.Index > pub.index {
				pub.apply(u.Image, u.Index, pub.touched(u))
			}
		}
	}
}

// touched is the topics an update may change, from its deltas; nil (compare every topic)
// when they do not start from the image the registry matches (a snapshot, a replay by a
// new loop).
func (pub *publisher) touched(u node.Update) map[metadata.TopicID]bool {
	if u.Snapshot || len(u.Deltas) == 0 || u.Deltas[0].Before != pub.im {
		return nil
	}
	ids := map[metadata.TopicID]bool{}
	for _, d := range u.Deltas {
		for _, c := range d.Topics() {
			ids[c.ID] = true
		}
		for _, r := range d.Configs() {
			if r.Type != metadata.ResourceTopic {
				continue
			}
			if t := d.After.Topic(r.Name); t != nil {
				ids[t.ID] = true
			}
			if t := d.Before.Topic(r.Name); t != nil {
				ids[t.ID] = true
			}
		}
	}
	return ids
}

// requestCleanup asks for the orphan partition directories to be removed at the image the
// publisher has then.
func (pub *publisher) requestCleanup() {
	select {
	case pub.cleanup <- struct{}{}:
	default: // one is pending
	}
}

// close stops the goroutine; an apply in progress finishes first.
func (pub *publisher) close() {
	select {
	case <-pub.stop:
	default:
		close(pub.stop)
	}
	<-pub.done
}

// wait returns once the registry matches an image at index or later.
func (pub *publisher) wait(ctx context.Context, index uint64) error {
	for {
		pub.mu.Lock()
		at, ch := pub.index, pub.advanced
		pub.mu.Unlock()
		if at >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-pub.done:
			return errPublisherStopped
		}
	}
}

// Applied is the metadata index the broker's registry matches.
func (pub *publisher) applied() uint64 {
	pub.mu.Lock()
	defer pub.mu.Unlock()
	return pub.index
}

func (pub *publisher) publish(index uint64) {
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if index > pub.index {
		pub.index = index
		close(pub.advanced)
		pub.advanced = make(chan struct{})
	}
}

// openSlot is one partition log to open: partition index of t.
type openSlot struct {
	t     *topic
	index int32
	p     *partition
	err   error
}

// apply makes the registry match next for the topics in ids (nil: every topic either
// has) and returns the partitions it opened.
func (pub *publisher) apply(next *metadata.Image, index uint64, ids map[metadata.TopicID]bool) []*partition {
	b := pub.b
	prev := pub.im
	if ids == nil {
		ids = map[metadata.TopicID]bool{}
		for id := range next.TopicsByID {
			ids[id] = true
		}
		for _, t := range b.topics.all() {
			ids[t.id] = true
		}
	}
	// Deletions first: a name deleted and created again in one update is the new topic's.
	for id := range ids {
		if t := b.topics.getByID(id); t != nil && next.TopicsByID[id] == nil {
			pub.removeTopic(t)
		}
	}
	var created []*topic
	var slots []openSlot
	grown := map[*topic]int32{} // topics that grow, and by how many partitions
	for id := range ids {
		nt := next.TopicsByID[id]
		if nt == nil {
			continue
		}
		configs := next.Configs[metadata.ConfigResource{Type: metadata.ResourceTopic, Name: nt.Name}]
		t := b.topics.getByID(id)
		if t == nil {
			t = &topic{name: nt.Name, id: id, internal: isInternalTopic(nt.Name), configs: maps.Clone(configs)}
			t.settings, _ = b.resolveSettings(t.configs)
			t.partitions = make([]*partition, len(nt.Partitions))
			created = append(created, t)
			for i, ip := range nt.Partitions {
				if b.hosts(ip) {
					slots = append(slots, openSlot{t: t, index: int32(i)})
				}
			}
			continue
		}
		t.mu.RLock()
		cur, have := t.configs, int32(len(t.partitions))
		t.mu.RUnlock()
		if !maps.Equal(cur, configs) {
			b.setTopicConfigs(t, maps.Clone(configs))
		}
		if n := int32(len(nt.Partitions)); n > have {
			grown[t] = n - have
			for i := have; i < n; i++ {
				if b.hosts(nt.Partitions[i]) {
					slots = append(slots, openSlot{t: t, index: i})
				}
			}
		}
	}
	parallel(len(slots), partitionWorkers, func(k int) error {
		s := &slots[k]
		_, settings := s.t.snapshot()
		s.p, s.err = b.openPartition(s.t, s.index, settings)
		return nil
	})
	var opened []*partition
	added := map[*topic][]*partition{} // the grown topics' new slots, nil where not hosted
	for t, n := range grown {
		t.mu.RLock()
		added[t] = make([]*partition, n)
		have := int32(len(t.partitions))
		t.mu.RUnlock()
		grown[t] = have
	}
	for _, s := range slots {
		if s.err != nil {
			pub.offline++
			b.storageError("open partition", s.err, "topic", s.t.name, "partition", s.index)
		} else {
			opened = append(opened, s.p)
			b.partitionCount.Add(1)
		}
		if have, ok := grown[s.t]; ok {
			added[s.t][s.index-have] = s.p
		} else {
			s.t.partitions[s.index] = s.p
		}
	}
	for t, ps := range added {
		t.mu.Lock()
		t.partitions = append(append([]*partition(nil), t.partitions...), ps...)
		t.mu.Unlock()
	}
	for id := range ids {
		if t, nt := b.topics.getByID(id), next.TopicsByID[id]; t != nil && nt != nil {
			pub.lead(t, nt)
		}
	}
	b.topics.mu.Lock()
	for _, t := range created {
		b.topics.byName[t.name] = t
		b.topics.byID[t.id] = t
	}
	b.topics.mu.Unlock()
	if pub.started {
		for _, t := range created {
			b.logger.Info("topic created", "topic", t.name, "partitions", len(t.partitions))
		}
	}
	b.applyFeatures(prev, next, pub.started)
	pub.im, pub.started = next, true
	pub.cur.Store(next)
	pub.publish(index)
	return opened
}

// retryOffline tries again to open every offline partition.
func (pub *publisher) retryOffline() {
	b := pub.b
	var slots []openSlot
	for _, t := range b.topics.all() {
		parts, _ := t.snapshot()
		for i, p := range parts {
			if ip := imagePartition(pub.im, t.id, int32(i)); p == nil && ip != nil && b.hosts(ip) {
				slots = append(slots, openSlot{t: t, index: int32(i)})
			}
		}
	}
	parallel(len(slots), partitionWorkers, func(k int) error {
		s := &slots[k]
		_, settings := s.t.snapshot()
		s.p, s.err = b.openPartition(s.t, s.index, settings)
		return nil
	})
	still := 0
	for _, s := range slots {
		if s.err != nil {
			still++
			b.storageError("open partition", s.err, "topic", s.t.name, "partition", s.index)
			continue
		}
		s.t.mu.Lock()
		parts := append([]*partition(nil), s.t.partitions...)
		parts[s.index] = s.p
		s.t.partitions = parts
		s.t.mu.Unlock()
		if nt := pub.im.TopicsByID[s.t.id]; nt != nil {
			pub.lead(s.t, nt)
		}
		b.partitionCount.Add(1)
		b.logger.Info("partition online", "topic", s.t.name, "partition", s.index)
	}
	pub.offline = still
	if still == 0 {
		pub.retryIn = offlineRetryFirst
	} else {
		pub.retryIn = min(2*pub.retryIn, offlineRetryMax)
	}
}

// removeTopic takes a topic the image no longer has out of the registry, then deletes
// its groups' offsets, its share state and its partition logs. A crash in between leaves
// orphan logs and offsets that start-up removes.
func (pub *publisher) removeTopic(t *topic) {
	b := pub.b
	b.topics.mu.Lock()
	delete(b.topics.byName, t.name)
	delete(b.topics.byID, t.id)
	b.topics.mu.Unlock()
	b.deleteTopicOffsets(t)
	b.deleteTopicShareState(t)
	parts, _ := t.snapshot()
	for i, p := range parts {
		if ip := imagePartition(pub.im, t.id, int32(i)); p == nil && ip != nil && b.hosts(ip) {
			// Offline: whatever its failed open left.
			pub.offline--
			os.RemoveAll(partitionDir(b.cfg.DataDir, t.name, int32(i)))
			continue
		}
		if p == nil {
			continue // not hosted here
		}
		b.partitionCount.Add(-1)
		if err := p.delete(); err != nil {
			b.logger.Error("deleting partition log", "topic", t.name, "partition", p.index, "err", err)
		}
	}
	b.logger.Info("topic deleted", "topic", t.name)
}

// lead gives t's open partitions the leader epochs of nt (the image's), which appends
// stamp on their batches.
func (pub *publisher) lead(t *topic, nt *metadata.Topic) {
	parts, _ := t.snapshot()
	for i, p := range parts {
		if p != nil && i < len(nt.Partitions) {
			p.epoch.Store(nt.Partitions[i].LeaderEpoch)
		}
	}
}

// setTopicConfigs gives a topic its new overrides and its open partitions their settings.
func (b *Broker) setTopicConfigs(t *topic, configs map[string]string) {
	if len(configs) == 0 {
		configs = nil
	}
	settings, _ := b.resolveSettings(configs)
	t.mu.Lock()
	t.configs, t.settings = configs, settings
	parts := t.partitions
	t.mu.Unlock()
	for _, p := range parts {
		if p != nil {
			p.log.SetConfig(settings.log)
		}
	}
}
