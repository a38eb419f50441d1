package metadata

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/wire"
)

// ErrRefused wraps every reason Apply refuses a batch: a record that does not fit the
// image it would be applied to.
var ErrRefused = errors.New("metadata: record refused")

// Delta is what one Apply (or a composition of them) changed: the image before and after
// and the keys the records touched. Its accessors report only what differs.
type Delta struct {
	Before, After *Image
	topics        map[TopicID]struct{}
	brokers       map[int32]struct{}
	configs       map[ConfigResource]struct{}
	features      map[string]struct{}
	acls          map[acl.ID]struct{}
	scram         map[ScramKey]struct{}
}

// Apply applies batch to im atomically: the new image and what changed, or an error
// wrapping ErrRefused and naming the first record that does not fit (im is unchanged;
// images are never changed).
func Apply(im *Image, batch []wire.MetadataRecord) (*Image, *Delta, error) {
	return ApplyEntry(im, 0, batch)
}

// ApplyEntry is Apply for the batch of the raft entry at index (0: not from the log, a
// checkpoint's replay or a test). A RegisterBrokerRecord with BrokerEpoch -1 gets index as
// its epoch, KRaft's rule that a broker's epoch is the offset of its registration: the
// controller cannot know the index when it writes the record, and every node applying the
// entry must agree on the epoch.
func ApplyEntry(im *Image, index uint64, batch []wire.MetadataRecord) (*Image, *Delta, error) {
	b := &builder{im: *im, index: index, d: &Delta{Before: im, topics: map[TopicID]struct{}{}, brokers: map[int32]struct{}{},
		configs: map[ConfigResource]struct{}{}, features: map[string]struct{}{},
		acls: map[acl.ID]struct{}{}, scram: map[ScramKey]struct{}{}}, ownedParts: map[TopicID]bool{}}
	for i, r := range batch {
		if err := b.apply(r); err != nil {
			return nil, nil, fmt.Errorf("%w: record %d of %d (%s): %v", ErrRefused, i, len(batch), r.Type(), err)
		}
	}
	out := b.im
	b.d.After = &out
	return &out, b.d, nil
}

// builder applies records to a shallow copy of an image, cloning each map the first time
// the batch writes it, and each topic the first time it changes one of its partitions.
type builder struct {
	im                                                 Image
	index                                              uint64 // the entry's raft index; 0 outside the log
	d                                                  *Delta
	ownBrokers, ownTopics, ownNames, ownConfigs, ownFt bool
	ownACLs, ownScram                                  bool
	ownedParts                                         map[TopicID]bool
}

// owned returns *m as this batch's own copy: cloned on the batch's first write, so the
// image the batch started from keeps its map.
func owned[K comparable, V any](m *map[K]V, own *bool) map[K]V {
	if !*own {
		*m, *own = maps.Clone(*m), true
	}
	return *m
}

func (b *builder) brokers() map[int32]*Broker { return owned(&b.im.Brokers, &b.ownBrokers) }
func (b *builder) topics() map[TopicID]*Topic { return owned(&b.im.TopicsByID, &b.ownTopics) }
func (b *builder) names() map[string]TopicID  { return owned(&b.im.TopicsByName, &b.ownNames) }
func (b *builder) features() map[string]int16 { return owned(&b.im.Features, &b.ownFt) }
func (b *builder) configs() map[ConfigResource]map[string]string {
	return owned(&b.im.Configs, &b.ownConfigs)
}

// topic returns a topic this batch may change (a copy, with its own partition slice).
func (b *builder) topic(id TopicID) (*Topic, error) {
	t, ok := b.im.TopicsByID[id]
	if !ok {
		return nil, fmt.Errorf("no topic %x", id)
	}
	if !b.ownedParts[id] {
		c := *t
		c.Partitions = slices.Clone(t.Partitions)
		t = &c
		b.topics()[id] = t
		b.ownedParts[id] = true
	}
	b.d.topics[id] = struct{}{}
	return t, nil
}

func (b *builder) apply(r wire.MetadataRecord) error {
	switch r := r.(type) {
	case *wire.ClusterRecord:
		if b.im.Cluster.ID != "" {
			return fmt.Errorf("the cluster is already %q", b.im.Cluster.ID)
		}
		if r.ClusterID == "" {
			return errors.New("empty cluster id")
		}
		b.im.Cluster = Cluster{ID: r.ClusterID, CreatedMillis: r.CreatedMillis}
	case *wire.RegisterBrokerRecord:
		if r.BrokerEpoch == -1 {
			if b.index == 0 {
				return fmt.Errorf("broker %d: epoch -1 (the entry's index) outside a log entry", r.BrokerID)
			}
			c := *r
			c.BrokerEpoch = int64(b.index)
			r = &c
		}
		if r.BrokerEpoch < 0 {
			return fmt.Errorf("broker %d: epoch %d", r.BrokerID, r.BrokerEpoch)
		}
		if old, ok := b.im.Brokers[r.BrokerID]; ok && r.BrokerEpoch <= old.Epoch {
			return fmt.Errorf("broker %d epoch %d does not grow from %d", r.BrokerID, r.BrokerEpoch, old.Epoch)
		}
		br := &Broker{ID: r.BrokerID, IncarnationID: r.IncarnationID, Epoch: r.BrokerEpoch, Rack: r.Rack,
			Fenced: r.Fenced, InControlledShutdown: r.InControlledShutdown, LogDirs: r.LogDirs, CordonedLogDirs: r.CordonedLogDirs}
		seen := map[string]bool{}
		for _, e := range r.EndPoints {
			if seen[e.Name] {
				return fmt.Errorf("broker %d: endpoint %q twice", r.BrokerID, e.Name)
			}
			seen[e.Name] = true
			br.Endpoints = append(br.Endpoints, Endpoint{Name: e.Name, Host: e.Host, Port: e.Port, SecurityProtocol: e.SecurityProtocol})
		}
		for _, f := range r.Features {
			if f.MinSupportedVersion > f.MaxSupportedVersion {
				return fmt.Errorf("broker %d: feature %s range %d-%d", r.BrokerID, f.Name, f.MinSupportedVersion, f.MaxSupportedVersion)
			}
			br.Features = append(br.Features, FeatureRange{Name: f.Name, Min: f.MinSupportedVersion, Max: f.MaxSupportedVersion})
		}
		b.brokers()[r.BrokerID] = br
		b.d.brokers[r.BrokerID] = struct{}{}
	case *wire.UnregisterBrokerRecord:
		if _, err := b.broker(r.BrokerID, r.BrokerEpoch); err != nil {
			return err
		}
		delete(b.brokers(), r.BrokerID)
		b.d.brokers[r.BrokerID] = struct{}{}
	case *wire.BrokerRegistrationChangeRecord:
		old, err := b.broker(r.BrokerID, r.BrokerEpoch)
		if err != nil {
			return err
		}
		br := *old
		switch r.Fenced { // Kafka's BrokerRegistrationFencingChange
		case -1:
			br.Fenced = false
		case 0:
		case 1:
			br.Fenced = true
		default:
			return fmt.Errorf("broker %d: Fenced %d", r.BrokerID, r.Fenced)
		}
		switch r.InControlledShutdown {
		case 0:
		case 1:
			br.InControlledShutdown = true
		default:
			return fmt.Errorf("broker %d: InControlledShutdown %d", r.BrokerID, r.InControlledShutdown)
		}
		if len(r.LogDirs) > 0 {
			br.LogDirs = r.LogDirs
		}
		if r.CordonedLogDirs != nil {
			br.CordonedLogDirs = r.CordonedLogDirs
		}
		b.brokers()[r.BrokerID] = &br
		b.d.brokers[r.BrokerID] = struct{}{}
	case *wire.TopicRecord:
		id := TopicID(r.TopicID)
		switch {
		case r.Name == "":
			return errors.New("empty topic name")
		case id == TopicID{}:
			return errors.New("zero topic id")
		case b.im.TopicsByName[r.Name] != TopicID{}:
			return fmt.Errorf("topic %q exists", r.Name)
		case b.im.TopicsByID[id] != nil:
			return fmt.Errorf("topic id %x exists", id)
		}
		b.topics()[id] = &Topic{Name: r.Name, ID: id}
		b.ownedParts[id] = true // new: this batch's own
		b.names()[r.Name] = id
		b.d.topics[id] = struct{}{}
	case *wire.PartitionRecord:
		t, err := b.topic(r.TopicID)
		if err != nil {
			return err
		}
		if int(r.PartitionID) != len(t.Partitions) {
			return fmt.Errorf("topic %q: partition %d, the next is %d", t.Name, r.PartitionID, len(t.Partitions))
		}
		p := &Partition{Replicas: r.Replicas, ISR: r.ISR, RemovingReplicas: r.RemovingReplicas, AddingReplicas: r.AddingReplicas,
			Leader: r.Leader, LeaderRecoveryState: r.LeaderRecoveryState, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
			Directories: r.Directories, ELR: r.EligibleLeaderReplicas, LastKnownELR: r.LastKnownELR}
		if p.LeaderEpoch < 0 || p.PartitionEpoch < 0 {
			return fmt.Errorf("topic %q partition %d: epochs %d, %d", t.Name, r.PartitionID, p.LeaderEpoch, p.PartitionEpoch)
		}
		if err := p.check(); err != nil {
			return fmt.Errorf("topic %q partition %d: %v", t.Name, r.PartitionID, err)
		}
		t.Partitions = append(t.Partitions, p)
	case *wire.PartitionChangeRecord:
		t, err := b.topic(r.TopicID)
		if err != nil {
			return err
		}
		if r.PartitionID < 0 || int(r.PartitionID) >= len(t.Partitions) {
			return fmt.Errorf("topic %q has no partition %d", t.Name, r.PartitionID)
		}
		p, err := merge(t.Partitions[r.PartitionID], r)
		if err != nil {
			return fmt.Errorf("topic %q partition %d: %v", t.Name, r.PartitionID, err)
		}
		t.Partitions[r.PartitionID] = p
	case *wire.RemoveTopicRecord:
		t, ok := b.im.TopicsByID[r.TopicID]
		if !ok {
			return fmt.Errorf("no topic %x", r.TopicID)
		}
		delete(b.topics(), t.ID)
		delete(b.names(), t.Name)
		res := ConfigResource{ResourceTopic, t.Name} // KRaft deletes a topic's configs with it
		if _, ok := b.im.Configs[res]; ok {
			delete(b.configs(), res)
			b.d.configs[res] = struct{}{}
		}
		b.d.topics[t.ID] = struct{}{}
	case *wire.ConfigRecord:
		res := ConfigResource{r.ResourceType, r.ResourceName}
		switch r.ResourceType {
		case ResourceTopic:
			if b.im.TopicsByName[r.ResourceName] == (TopicID{}) {
				return fmt.Errorf("config for topic %q, which does not exist", r.ResourceName)
			}
		case ResourceBroker, ResourceGroup:
		default:
			return fmt.Errorf("resource type %d", r.ResourceType)
		}
		if r.Name == "" {
			return errors.New("empty config name")
		}
		m := maps.Clone(b.im.Configs[res])
		if r.Value == nil {
			delete(m, r.Name)
		} else {
			if m == nil {
				m = map[string]string{}
			}
			m[r.Name] = *r.Value
		}
		if len(m) == 0 {
			delete(b.configs(), res)
		} else {
			b.configs()[res] = m
		}
		b.d.configs[res] = struct{}{}
	case *wire.FeatureLevelRecord:
		if r.Name == "" || r.FeatureLevel < 0 {
			return fmt.Errorf("feature %q level %d", r.Name, r.FeatureLevel)
		}
		if r.FeatureLevel == 0 { // KRaft: level 0 removes the feature
			delete(b.features(), r.Name)
		} else {
			b.features()[r.Name] = r.FeatureLevel
		}
		b.d.features[r.Name] = struct{}{}
	case *wire.ProducerIdsRecord:
		if r.NextProducerID <= b.im.ProducerIDs.Next {
			return fmt.Errorf("next producer id %d does not grow from %d", r.NextProducerID, b.im.ProducerIDs.Next)
		}
		b.im.ProducerIDs = ProducerIDs{BrokerID: r.BrokerID, BrokerEpoch: r.BrokerEpoch, Next: r.NextProducerID}
	case *wire.ClearElrRecord:
		ids := sortedTopicIDs(b.im.TopicsByID)
		if r.TopicName != "" {
			id := b.im.TopicsByName[r.TopicName]
			if id == (TopicID{}) {
				return fmt.Errorf("no topic %q", r.TopicName)
			}
			ids = []TopicID{id}
		}
		for _, id := range ids {
			if !hasELR(b.im.TopicsByID[id]) {
				continue
			}
			t, _ := b.topic(id)
			for i, p := range t.Partitions {
				if len(p.ELR) > 0 || len(p.LastKnownELR) > 0 {
					t.Partitions[i], _ = merge(p, &wire.PartitionChangeRecord{Leader: -2, LeaderRecoveryState: -1,
						EligibleLeaderReplicas: []int32{}, LastKnownELR: []int32{}})
				}
			}
		}
	default:
		if ok, err := b.applySecurity(r); ok {
			return err
		}
		return fmt.Errorf("no rule for %T", r)
	}
	return nil
}

func hasELR(t *Topic) bool {
	for _, p := range t.Partitions {
		if len(p.ELR) > 0 || len(p.LastKnownELR) > 0 {
			return true
		}
	}
	return false
}

// broker returns the registered broker id if its epoch is epoch.
func (b *builder) broker(id int32, epoch int64) (*Broker, error) {
	br, ok := b.im.Brokers[id]
	if !ok {
		return nil, fmt.Errorf("broker %d is not registered", id)
	}
	if br.Epoch != epoch {
		return nil, fmt.Errorf("broker %d has epoch %d, not %d", id, br.Epoch, epoch)
	}
	return br, nil
}

// merge is KRaft's PartitionRegistration.merge: what the record sets replaces, a leader
// change (even to the same leader) bumps the leader epoch, every change bumps the
// partition epoch.
func merge(old *Partition, r *wire.PartitionChangeRecord) (*Partition, error) {
	p := *old
	if r.Replicas != nil {
		p.Replicas = r.Replicas
	}
	if r.ISR != nil {
		p.ISR = r.ISR
	}
	if r.RemovingReplicas != nil {
		p.RemovingReplicas = r.RemovingReplicas
	}
	if r.AddingReplicas != nil {
		p.AddingReplicas = r.AddingReplicas
	}
	if r.Directories != nil {
		p.Directories = r.Directories
	}
	if r.EligibleLeaderReplicas != nil {
		p.ELR = r.EligibleLeaderReplicas
	}
	if r.LastKnownELR != nil {
		p.LastKnownELR = r.LastKnownELR
	}
	if r.Leader != -2 {
		if r.Leader < -1 {
			return nil, fmt.Errorf("leader %d", r.Leader)
		}
		p.Leader = r.Leader
		p.LeaderEpoch++
	}
	if r.LeaderRecoveryState != -1 {
		p.LeaderRecoveryState = r.LeaderRecoveryState
	}
	p.PartitionEpoch++
	if err := p.check(); err != nil {
		return nil, err
	}
	return &p, nil
}

// check is what a partition must be: distinct replicas, the ISR, leader and the moving
// replicas among them, a directory per replica if any.
func (p *Partition) check() error {
	if len(p.Replicas) == 0 {
		return errors.New("no replicas")
	}
	in := map[int32]bool{}
	for _, r := range p.Replicas {
		if r < 0 || in[r] {
			return fmt.Errorf("replicas %v", p.Replicas)
		}
		in[r] = true
	}
	for _, set := range [][]int32{p.ISR, p.RemovingReplicas, p.AddingReplicas} {
		seen := map[int32]bool{}
		for _, r := range set {
			if !in[r] || seen[r] {
				return fmt.Errorf("%v is not a set of replicas %v", set, p.Replicas)
			}
			seen[r] = true
		}
	}
	if p.Leader != -1 && !in[p.Leader] {
		return fmt.Errorf("leader %d is not a replica of %v", p.Leader, p.Replicas)
	}
	if p.LeaderRecoveryState != 0 && p.LeaderRecoveryState != 1 {
		return fmt.Errorf("leader recovery state %d", p.LeaderRecoveryState)
	}
	if len(p.Directories) != 0 && len(p.Directories) != len(p.Replicas) {
		return fmt.Errorf("%d directories for %d replicas", len(p.Directories), len(p.Replicas))
	}
	return nil
}
