package broker

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/internal/topicconfig"
	"github.com/exactq/exactq/wire"
)

// adminError is a Kafka error code with the message Kafka would put next to it.
type adminError struct {
	err *kerr.Error
	msg string
}

func (e *adminError) Error() string { return e.msg }

func newAdminError(err *kerr.Error, format string, args ...any) *adminError {
	return &adminError{err: err, msg: fmt.Sprintf(format, args...)}
}

// topicSpec is a validated request to create a topic.
type topicSpec struct {
	name       string
	partitions int32
	configs    map[string]string
}

// checkNewTopic validates a CreateTopics entry as Kafka's controller does.
func (b *Broker) checkNewTopic(name string, partitions int32, replication int16, assignments int, configs map[string]string) (topicSpec, *adminError) {
	if err := validateTopicName(name); err != nil {
		return topicSpec{}, newAdminError(kerr.InvalidTopicException, "%v", err)
	}
	if b.topics.get(name) != nil {
		return topicSpec{}, newAdminError(kerr.TopicAlreadyExists, "Topic '%s' already exists.", name)
	}
	if other := b.topicCollision(name); other != "" {
		return topicSpec{}, newAdminError(kerr.InvalidTopicException,
			"Topic '%s' collides with existing topic: %s", name, other)
	}
	if assignments > 0 {
		// A manual assignment can only name this node, one replica per partition.
		if partitions != -1 || replication != -1 {
			return topicSpec{}, newAdminError(kerr.InvalidRequest,
				"Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.")
		}
		partitions = int32(assignments)
		replication = 1
	}
	if partitions == -1 {
		partitions = b.defaults.numPartitions
	}
	if partitions <= 0 {
		return topicSpec{}, newAdminError(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
	}
	if partitions > maxPartitionsPerTopic {
		return topicSpec{}, newAdminError(kerr.InvalidPartitions, "Number of partitions %d exceeds exactq's limit of %d per topic (partition directory names must fit 255 bytes).", partitions, maxPartitionsPerTopic)
	}
	if aerr := b.checkBrokerPartitions(int64(partitions)); aerr != nil {
		return topicSpec{}, aerr
	}
	if replication == -1 {
		replication = int16(b.defaults.replicationFactor)
	}
	if replication <= 0 {
		return topicSpec{}, newAdminError(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	}
	if replication > 1 {
		return topicSpec{}, newAdminError(kerr.InvalidReplicationFactor,
			"Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only 1 broker(s) are registered.", replication, replication)
	}
	if aerr := b.validateConfigs(configs); aerr != nil {
		return topicSpec{}, aerr
	}
	return topicSpec{name: name, partitions: partitions, configs: configs}, nil
}

// maxPartitionsPerTopic keeps every partition directory name within 255 bytes: a topic name
// has at most 249 characters, "-" and five digits fill the rest (Kafka's 249 assumes the
// same). Kafka has no per-topic limit; the per-request and broker-wide caps bound the rest.
const maxPartitionsPerTopic = 100000

// maxPartitionsPerRequest is Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH:
// one CreateTopics, CreatePartitions or auto-creating Metadata request creates at most this
// many partitions ("Exceeding this number of topics per batch has led to out-of-memory
// exceptions").
const maxPartitionsPerRequest = 10000

// errTooManyPartitionsPerRequest is Kafka's answer to a CreateTopics request over
// maxPartitionsPerRequest: every topic of the request gets it (CreateTopicsRequest.
// getErrorResponse of the controller's PolicyViolationException).
var errTooManyPartitionsPerRequest = newAdminError(kerr.PolicyViolation, "Excessively large number of partitions per request.")

// requestedPartitions is the upper bound of the partitions a CreateTopics request creates,
// counted as Kafka's validateTotalNumberOfPartitions does: before any other check, with -1
// as num.partitions, an assignment's length where one is given, and duplicate names
// (answered INVALID_REQUEST before the controller sees them) left out.
func (b *Broker) requestedPartitions(r *kmsg.CreateTopicsRequest, seen map[string]int) int64 {
	var total int64
	for _, rt := range r.Topics {
		switch {
		case seen[rt.Topic] > 1:
		case len(rt.ReplicaAssignment) > 0:
			total += int64(len(rt.ReplicaAssignment))
		case rt.NumPartitions == -1:
			total += int64(b.defaults.numPartitions)
		case rt.NumPartitions > 0:
			total += int64(rt.NumPartitions)
		}
	}
	return total
}

// createTopic makes a checked topic durable and live. The partition logs are created first
// and the topic's metadata entry (TopicRecord, PartitionRecords, ConfigRecords) proposed
// last: the entry is the commit point, and logs the image does not name are removed at
// start-up.
func (b *Broker) createTopic(spec topicSpec) (*topic, *adminError) {
	if b.topics.get(spec.name) != nil {
		return nil, newAdminError(kerr.TopicAlreadyExists, "Topic '%s' already exists.", spec.name)
	}
	settings, err := b.resolveSettings(spec.configs)
	if err != nil {
		return nil, newAdminError(kerr.InvalidConfig, "%v", err)
	}
	t := &topic{name: spec.name, id: newUUID(), internal: isInternalTopic(spec.name), configs: spec.configs, settings: settings}
	parts, err := b.openNewPartitions(t, 0, spec.partitions, settings)
	if err != nil {
		return nil, newAdminError(kerr.KafkaStorageError, "%v", err)
	}
	t.partitions = parts
	recs := append([]wire.MetadataRecord{&wire.TopicRecord{Name: t.name, TopicID: t.id}}, b.partitionRecords(t.id, 0, spec.partitions)...)
	recs = append(recs, configRecords(metadata.ResourceTopic, t.name, nil, spec.configs)...)
	if _, err := b.propose(recs...); err != nil {
		b.discardNewPartitions(t, 0, parts)
		b.storageError("create topic", err, "topic", t.name)
		return nil, newAdminError(kerr.KafkaStorageError, "%v", err)
	}
	b.topics.mu.Lock()
	b.topics.byName[t.name] = t
	b.topics.byID[t.id] = t
	b.topics.mu.Unlock()
	b.partitionCount.Add(int64(spec.partitions))
	b.logger.Info("topic created", "topic", t.name, "partitions", spec.partitions)
	return t, nil
}

// openNewPartitions creates partitions [from, to) of t, in parallel (each is a directory,
// a segment file and fsyncs). If any fails, none is kept: every one is removed with its
// directory, so a failed creation leaves nothing behind (after a crash, start-up removes
// the directories of partitions no topic record names).
func (b *Broker) openNewPartitions(t *topic, from, to int32, settings topicSettings) ([]*partition, error) {
	parts := make([]*partition, to-from)
	errs := parallel(len(parts), partitionWorkers, func(i int) error {
		p, err := b.openPartition(t, from+int32(i), settings)
		parts[i] = p
		return err
	})
	if err := firstError(errs); err != nil {
		b.discardNewPartitions(t, from, parts)
		b.storageError("create partition", err, "topic", t.name)
		return nil, err
	}
	return parts, nil
}

// discardNewPartitions removes partitions from, from+1, ... of t whose creation is
// abandoned: the logs that opened and any directory a failed open left.
func (b *Broker) discardNewPartitions(t *topic, from int32, parts []*partition) {
	for i, p := range parts {
		if p != nil {
			p.delete()
		}
		os.RemoveAll(partitionDir(b.cfg.DataDir, t.name, from+int32(i)))
	}
}

// autoCreateTopic creates a topic a client asked for in Metadata, with default settings.
func (b *Broker) autoCreateTopic(name string) (*topic, *kerr.Error) {
	if isInternalTopic(name) {
		return nil, kerr.UnknownTopicOrPartition
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if t := b.topics.get(name); t != nil {
		return t, nil
	}
	spec, aerr := b.checkNewTopic(name, -1, -1, 0, nil)
	if aerr == nil {
		var t *topic
		if t, aerr = b.createTopic(spec); aerr == nil {
			return t, nil
		}
	}
	if aerr.err == kerr.InvalidTopicException {
		return nil, aerr.err
	}
	// Kafka's broker answers every topic it asks the controller to create
	// UNKNOWN_TOPIC_OR_PARTITION and only logs why a creation failed.
	b.ratelog.log(slog.LevelWarn, "auto-create", "auto topic creation failed", "topic", name, "error", aerr.err.Message, "reason", aerr.msg)
	return nil, kerr.UnknownTopicOrPartition
}

func (b *Broker) handleCreateTopics(req *server.Request, r *kmsg.CreateTopicsRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	seen := map[string]int{}
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	tooMany := b.requestedPartitions(r, seen) > maxPartitionsPerRequest
	for _, rt := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(e *adminError) {
			st.ErrorCode = e.err.Code
			m := e.msg
			st.ErrorMessage = &m
		}
		if tooMany {
			fail(errTooManyPartitionsPerRequest)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		configs, cerr := topicconfig.FromCreate(rt.Configs, b.defaults.topic)
		if cerr != nil {
			fail(configAdminError(cerr))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if len(configs) == 0 {
			configs = nil
		}
		if seen[rt.Topic] > 1 {
			fail(newAdminError(kerr.InvalidRequest, "Create topics request from client `%s` contains multiple entries for the following topics: %s", req.ClientID, rt.Topic))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if isInternalTopic(rt.Topic) {
			fail(newAdminError(kerr.InvalidRequest, "Creation of internal topic %s is reserved to the broker.", rt.Topic))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		spec, aerr := b.checkNewTopic(rt.Topic, rt.NumPartitions, rt.ReplicationFactor, len(rt.ReplicaAssignment), configs)
		if aerr == nil && len(rt.ReplicaAssignment) > 0 {
			aerr = b.checkAssignment(rt.ReplicaAssignment)
		}
		if aerr != nil {
			fail(aerr)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		var t *topic
		if !r.ValidateOnly {
			if t, aerr = b.createTopic(spec); aerr != nil {
				fail(aerr)
				resp.Topics = append(resp.Topics, st)
				continue
			}
			st.TopicID = t.id
		}
		st.NumPartitions = spec.partitions
		st.ReplicationFactor = 1
		if r.Version >= 5 {
			st.Configs = b.createTopicsConfigs(spec.configs)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return server.Reply{Resp: resp}
}

func (b *Broker) checkAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment) *adminError {
	for i, a := range as {
		if a.Partition != int32(i) {
			return newAdminError(kerr.InvalidReplicaAssignment, "Partitions should be a consecutive 0-based integer sequence")
		}
		if len(a.Replicas) != 1 || a.Replicas[0] != b.cfg.NodeID {
			return newAdminError(kerr.InvalidReplicaAssignment, "Replica assignment for partition %d names brokers that do not exist; this cluster has only node %d", a.Partition, b.cfg.NodeID)
		}
	}
	return nil
}

func (b *Broker) handleDeleteTopics(req *server.Request, r *kmsg.DeleteTopicsRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if r.Version >= 6 {
		for _, t := range r.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	} else {
		for _, n := range r.TopicNames {
			n := n
			targets = append(targets, target{name: &n})
		}
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		var t *topic
		missing := kerr.UnknownTopicOrPartition
		switch {
		case tg.name != nil && tg.id != [16]byte{}:
			st.ErrorCode = kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, st)
			continue
		case tg.name != nil:
			t = b.topics.get(*tg.name)
		default:
			t = b.topics.getByID(tg.id)
			missing = kerr.UnknownTopicID
		}
		if t == nil {
			st.ErrorCode = missing.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		name := t.name
		st.Topic, st.TopicID = &name, t.id
		if t.internal {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			m := "Internal topics cannot be deleted"
			st.ErrorMessage = &m
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !b.defaults.topic.DeleteTopicEnable() {
			st.ErrorCode = kerr.TopicDeletionDisabled.Code
			m := "Topic deletion is disabled."
			st.ErrorMessage = &m
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if err := b.deleteTopic(t); err != nil {
			st.ErrorCode = kerr.KafkaStorageError.Code
			m := err.Error()
			st.ErrorMessage = &m
		}
		resp.Topics = append(resp.Topics, st)
	}
	return server.Reply{Resp: resp}
}

// deleteTopic removes the topic from the metadata log first (RemoveTopicRecord, the
// commit point), then the groups' offsets of the topic, then the logs. A crash in between
// leaves orphan logs and offsets that start-up removes.
func (b *Broker) deleteTopic(t *topic) error {
	if _, err := b.propose(&wire.RemoveTopicRecord{TopicID: t.id}); err != nil {
		b.storageError("delete topic", err, "topic", t.name)
		return err
	}
	b.topics.mu.Lock()
	delete(b.topics.byName, t.name)
	delete(b.topics.byID, t.id)
	b.topics.mu.Unlock()
	b.deleteTopicOffsets(t)
	b.deleteTopicShareState(t)
	parts, _ := t.snapshot()
	b.partitionCount.Add(-int64(len(parts)))
	for _, p := range parts {
		if err := p.delete(); err != nil {
			b.logger.Error("deleting partition log", "topic", t.name, "partition", p.index, "err", err)
		}
	}
	b.logger.Info("topic deleted", "topic", t.name)
	return nil
}

func (b *Broker) handleCreatePartitions(req *server.Request, r *kmsg.CreatePartitionsRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	budget := int32(maxPartitionsPerRequest)
	for _, rt := range r.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		if aerr := b.addPartitions(rt, r.ValidateOnly, &budget); aerr != nil {
			st.ErrorCode = aerr.err.Code
			m := aerr.msg
			st.ErrorMessage = &m
		}
		resp.Topics = append(resp.Topics, st)
	}
	return server.Reply{Resp: resp}
}

// addPartitions grows one topic of a CreatePartitions request. budget is what is left of
// the request's maxPartitionsPerRequest: Kafka builds the request's partition records in one
// list bounded at 10,000 (QuorumController.MAX_RECORDS_PER_USER_OP), so the topic that would
// overflow it, and every later one, fails while the earlier ones are created. Kafka answers
// that topic UNKNOWN_SERVER_ERROR (its BoundedListTooLongException is caught per topic) and
// may commit the records of it that fit; exactq answers POLICY_VIOLATION with the message
// Kafka gives the same exception elsewhere, and creates none of that topic's partitions.
func (b *Broker) addPartitions(rt kmsg.CreatePartitionsRequestTopic, validateOnly bool, budget *int32) *adminError {
	t := b.topics.get(rt.Topic)
	if t == nil {
		return newAdminError(kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
	}
	if t.internal {
		return newAdminError(kerr.InvalidRequest, "Cannot add partitions to internal topic %s", t.name)
	}
	parts, settings := t.snapshot()
	cur := int32(len(parts))
	switch {
	case rt.Count < cur:
		return newAdminError(kerr.InvalidPartitions, "Topic currently has %d partitions, which is higher than the requested %d.", cur, rt.Count)
	case rt.Count == cur:
		return newAdminError(kerr.InvalidPartitions, "Topic already has %d partitions.", cur)
	case rt.Count > maxPartitionsPerTopic:
		return newAdminError(kerr.InvalidPartitions, "Number of partitions %d exceeds exactq's limit of %d per topic (partition directory names must fit 255 bytes).", rt.Count, maxPartitionsPerTopic)
	}
	if rt.Assignment != nil {
		if len(rt.Assignment) != int(rt.Count-cur) {
			return newAdminError(kerr.InvalidReplicaAssignment, "Increasing the number of partitions by %d but %d assignments provided.", rt.Count-cur, len(rt.Assignment))
		}
		for _, a := range rt.Assignment {
			if len(a.Replicas) != 1 || a.Replicas[0] != b.cfg.NodeID {
				return newAdminError(kerr.InvalidReplicaAssignment, "Replica assignment names brokers that do not exist; this cluster has only node %d", b.cfg.NodeID)
			}
		}
	}
	if rt.Count-cur > *budget {
		*budget = 0
		return newAdminError(kerr.PolicyViolation, "Unable to perform excessively large batch operation.")
	}
	*budget -= rt.Count - cur
	if aerr := b.checkBrokerPartitions(int64(rt.Count - cur)); aerr != nil {
		return aerr
	}
	if validateOnly {
		return nil
	}
	added, err := b.openNewPartitions(t, cur, rt.Count, settings)
	if err != nil {
		return newAdminError(kerr.KafkaStorageError, "%v", err)
	}
	// The entry with the new partitions is the commit point; publish them after it.
	if _, err := b.propose(b.partitionRecords(t.id, cur, rt.Count)...); err != nil {
		b.discardNewPartitions(t, cur, added)
		b.storageError("create partitions", err, "topic", t.name)
		return newAdminError(kerr.KafkaStorageError, "%v", err)
	}
	t.mu.Lock()
	t.partitions = append(append([]*partition(nil), t.partitions...), added...)
	t.mu.Unlock()
	b.partitionCount.Add(int64(len(added)))
	return nil
}

// partitionRecords are the PartitionRecords of partitions [from, to) of a topic, each
// with this node as its only replica and leader at leader epoch 0.
func (b *Broker) partitionRecords(id [16]byte, from, to int32) []wire.MetadataRecord {
	out := make([]wire.MetadataRecord, 0, to-from)
	for p := from; p < to; p++ {
		out = append(out, &wire.PartitionRecord{PartitionID: p, TopicID: id, Replicas: []int32{b.cfg.NodeID},
			ISR: []int32{b.cfg.NodeID}, Leader: b.cfg.NodeID})
	}
	return out
}
