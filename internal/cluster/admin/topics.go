package admin

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/topicconfig"
	"github.com/exactq/exactq/wire"
)

// MaxPartitionsPerTopic keeps every partition directory name within 255 bytes: a topic
// name has at most 249 characters, "-" and five digits fill the rest (Kafka's 249 assumes
// the same). Kafka has no per-topic limit; the per-request and per-broker caps bound the
// rest.
const MaxPartitionsPerTopic = 100000

// MaxPartitionsPerRequest is Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH:
// one CreateTopics, CreatePartitions or auto-creating Metadata request creates at most
// this many partitions ("Exceeding this number of topics per batch has led to
// out-of-memory exceptions").
const MaxPartitionsPerRequest = 10000

// errTooManyPartitionsPerRequest is Kafka's answer to a CreateTopics request over
// MaxPartitionsPerRequest: every topic of the request gets it.
var errTooManyPartitionsPerRequest = newAdminError(kerr.PolicyViolation, "Excessively large number of partitions per request.")

// topicView is the image as a request sees it part way: the image plus the topics the
// request created so far (only their names matter to the checks).
type topicView struct {
	im    *metadata.Image
	added map[string]bool
}

func (v *topicView) exists(name string) bool { return v.im.Topic(name) != nil || v.added[name] }

// collision returns an existing topic whose name differs from name only by '.' versus
// '_' (they would clash in metric names), or "".
func (v *topicView) collision(name string) string {
	if !topicconfig.HasCollisionChars(name) {
		return ""
	}
	key := topicconfig.CollisionKey(name)
	for other := range v.im.TopicsByName {
		if other != name && topicconfig.CollisionKey(other) == key {
			return other
		}
	}
	for other := range v.added {
		if other != name && topicconfig.CollisionKey(other) == key {
			return other
		}
	}
	return ""
}

// newTopic is a checked topic to create.
type newTopic struct {
	name     string
	replicas [][]int32
	configs  map[string]string
}

// topicRecords are a new topic's records: TopicRecord, PartitionRecords, TOPIC configs.
func topicRecords(t newTopic, id metadata.TopicID) []wire.MetadataRecord {
	out := []wire.MetadataRecord{versioned(&wire.TopicRecord{Name: t.name, TopicID: id})}
	out = append(out, PartitionRecords(id, 0, t.replicas)...)
	return append(out, ConfigRecords(metadata.ResourceTopic, t.name, nil, t.configs)...)
}

// newTopicID draws ids until one is neither zero nor taken.
func newTopicID(im *metadata.Image, newID func() metadata.TopicID) metadata.TopicID {
	for {
		id := newID()
		if id != (metadata.TopicID{}) && im.TopicsByID[id] == nil {
			return id
		}
	}
}

// creation is one CreateTopics (or auto-creating Metadata) request in progress.
type creation struct {
	cfg     Config
	view    topicView
	pl      Placement
	counts  partitionCounts
	grownBy map[metadata.TopicID]int32 // partitions CreatePartitions added so far
}

func newCreation(im *metadata.Image, pl Placement, cfg Config) *creation {
	return &creation{cfg: cfg, view: topicView{im: im, added: map[string]bool{}}, pl: pl, counts: partitionCounts{have: Hosted(im)},
		grownBy: map[metadata.TopicID]int32{}}
}

// effectiveRF is the replication factor a request gets, -1 being the default.
func (c *creation) effectiveRF(rf int16) int16 {
	if rf == -1 {
		return c.cfg.Topic.DefaultReplicationFactor()
	}
	return rf
}

// checkNewTopic validates a CreateTopics entry as the broker does, in its order: name,
// existence, collision, partitions, the per-broker cap, replication factor, configs; a
// manual assignment (assignment non-nil) is checked last. The replicas are placed here
// (the cap needs them); a placement is only consumed when the caller creates the topic.
func (c *creation) checkNewTopic(name string, partitions int32, rf int16, assignment []kmsg.CreateTopicsRequestTopicReplicaAssignment, configs map[string]string) (newTopic, *adminError) {
	if err := topicconfig.ValidateTopicName(name); err != nil {
		return newTopic{}, newAdminError(kerr.InvalidTopicException, "%v", err)
	}
	if c.view.exists(name) {
		return newTopic{}, newAdminError(kerr.TopicAlreadyExists, "Topic '%s' already exists.", name)
	}
	if other := c.view.collision(name); other != "" {
		return newTopic{}, newAdminError(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", name, other)
	}
	if len(assignment) > 0 {
		if partitions != -1 || rf != -1 {
			return newTopic{}, newAdminError(kerr.InvalidRequest,
				"Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.")
		}
		partitions = int32(len(assignment))
	}
	if partitions == -1 {
		partitions = c.cfg.Topic.NumPartitions()
	}
	if partitions <= 0 {
		return newTopic{}, newAdminError(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
	}
	if partitions > MaxPartitionsPerTopic {
		return newTopic{}, newAdminError(kerr.InvalidPartitions, "Number of partitions %d exceeds exactq's limit of %d per topic (partition directory names must fit 255 bytes).", partitions, MaxPartitionsPerTopic)
	}
	var replicas [][]int32
	if len(assignment) > 0 {
		for _, a := range assignment {
			replicas = append(replicas, a.Replicas)
		}
		rf = int16(len(assignment[0].Replicas))
	} else {
		rf = c.effectiveRF(rf)
		// The cap is checked before the replication factor (the broker's order); a
		// factor that fails below is counted as 1 here.
		replicas = c.pl.peek(partitions, max(min(rf, int16(len(c.pl.Brokers))), 1))
	}
	if aerr := c.counts.check(replicas, c.cfg.MaxBrokerPartitions); aerr != nil {
		return newTopic{}, aerr
	}
	if len(assignment) == 0 {
		if aerr := c.checkRF(rf); aerr != nil {
			return newTopic{}, aerr
		}
	}
	if err := topicconfig.ValidateSet(configs, c.cfg.Topic); err != nil {
		return newTopic{}, configAdminError(err)
	}
	if len(assignment) > 0 {
		// An assignment's replicas are checked on their own (known, distinct brokers:
		// INVALID_REPLICA_ASSIGNMENT), then their count against what is replicated.
		if aerr := c.checkAssignment(assignment); aerr != nil {
			return newTopic{}, aerr
		}
		if aerr := c.checkRF(rf); aerr != nil {
			return newTopic{}, aerr
		}
	}
	return newTopic{name: name, replicas: replicas, configs: configs}, nil
}

// checkRF refuses a replication factor the brokers cannot reach, with Kafka's message, or
// one above MaxReplicationFactor.
func (c *creation) checkRF(rf int16) *adminError {
	if rf <= 0 {
		return newAdminError(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	}
	if int(rf) > len(c.pl.Brokers) {
		return newAdminError(kerr.InvalidReplicationFactor,
			"Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, rf, len(c.pl.Brokers))
	}
	if m := c.cfg.MaxReplicationFactor; m > 0 && rf > m {
		return newAdminError(kerr.InvalidReplicationFactor, "Replication factor %d is above %d: exactq does not replicate partitions yet.", rf, m)
	}
	return nil
}

// checkAssignment checks a manual assignment: partitions 0, 1, ... in order, each a set
// of known brokers, all of one size the replication rules accept.
func (c *creation) checkAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment) *adminError {
	for i, a := range as {
		if a.Partition != int32(i) {
			return newAdminError(kerr.InvalidReplicaAssignment, "Partitions should be a consecutive 0-based integer sequence")
		}
		if !c.pl.knownReplicas(a.Replicas) {
			return newAdminError(kerr.InvalidReplicaAssignment, "Replica assignment for partition %d names brokers that do not exist; this cluster has only %s", a.Partition, c.pl.nodeList())
		}
		if len(a.Replicas) != len(as[0].Replicas) {
			return newAdminError(kerr.InvalidReplicaAssignment, "All partitions should have the same number of replicas")
		}
	}
	return nil
}

// create consumes the placement of a checked topic (unless manual: it came with its own)
// and returns its records.
func (c *creation) create(t newTopic, id metadata.TopicID, manual bool) []wire.MetadataRecord {
	if !manual {
		c.pl.advance(int32(len(t.replicas)))
	}
	c.view.added[t.name] = true
	c.counts.add(t.replicas)
	return topicRecords(t, id)
}

// requestedPartitions is the upper bound of the partitions a CreateTopics request
// creates, counted as Kafka's validateTotalNumberOfPartitions does: before any other
// check, with -1 as num.partitions, an assignment's length where one is given, and
// duplicate names (answered INVALID_REQUEST before the controller sees them) left out.
func requestedPartitions(r *kmsg.CreateTopicsRequest, seen map[string]int, numPartitions int32) int64 {
	var total int64
	for _, rt := range r.Topics {
		switch {
		case seen[rt.Topic] > 1:
		case len(rt.ReplicaAssignment) > 0:
			total += int64(len(rt.ReplicaAssignment))
		case rt.NumPartitions == -1:
			total += int64(numPartitions)
		case rt.NumPartitions > 0:
			total += int64(rt.NumPartitions)
		}
	}
	return total
}

// CreateTopics is CreateTopics (r.Version set) against im from client clientID: a group
// of records per topic created, in request order, and the response. newID draws topic ids.
func CreateTopics(im *metadata.Image, r *kmsg.CreateTopicsRequest, clientID string, pl Placement, cfg Config, newID func() metadata.TopicID) ([][]wire.MetadataRecord, *kmsg.CreateTopicsResponse) {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.Version = r.Version
	c := newCreation(im, pl, cfg)
	seen := map[string]int{}
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	tooMany := requestedPartitions(r, seen, cfg.Topic.NumPartitions()) > MaxPartitionsPerRequest
	var groups [][]wire.MetadataRecord
	for _, rt := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		t, aerr := c.checkRequestTopic(rt, seen, tooMany, clientID)
		if aerr != nil {
			st.ErrorCode, st.ErrorMessage = aerr.code()
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !r.ValidateOnly {
			id := newTopicID(im, newID)
			groups = append(groups, c.create(t, id, len(rt.ReplicaAssignment) > 0))
			st.TopicID = id
		}
		st.NumPartitions, st.ReplicationFactor = int32(len(t.replicas)), int16(len(t.replicas[0]))
		if r.Version >= 5 {
			st.Configs = createTopicsConfigs(t.configs, cfg.Topic)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return groups, resp
}

// checkRequestTopic is every check of one CreateTopics entry, the request-wide ones first.
func (c *creation) checkRequestTopic(rt kmsg.CreateTopicsRequestTopic, seen map[string]int, tooMany bool, clientID string) (newTopic, *adminError) {
	if tooMany {
		return newTopic{}, errTooManyPartitionsPerRequest
	}
	configs, err := topicconfig.FromCreate(rt.Configs, c.cfg.Topic)
	if err != nil {
		return newTopic{}, configAdminError(err)
	}
	if len(configs) == 0 {
		configs = nil
	}
	if seen[rt.Topic] > 1 {
		return newTopic{}, newAdminError(kerr.InvalidRequest, "Create topics request from client `%s` contains multiple entries for the following topics: %s", clientID, rt.Topic)
	}
	if topicconfig.IsInternal(rt.Topic) {
		return newTopic{}, newAdminError(kerr.InvalidRequest, "Creation of internal topic %s is reserved to the broker.", rt.Topic)
	}
	return c.checkNewTopic(rt.Topic, rt.NumPartitions, rt.ReplicationFactor, rt.ReplicaAssignment, configs)
}

// createTopicsConfigs is the config list CreateTopics v5+ returns for a new topic.
func createTopicsConfigs(overrides map[string]string, defaults *topicconfig.BrokerDefaults) []kmsg.CreateTopicsResponseTopicConfig {
	return topicconfig.CreateTopicsConfigs(overrides, defaults)
}

// AutoCreateTopic creates a topic a client asked for in Metadata, with the default
// partitions, replication and configs: its records, or the error the client gets.
// Internal topics and topics that fail a check get UNKNOWN_TOPIC_OR_PARTITION (Kafka's
// broker answers every topic its controller did not create so, and logs why: reason), an
// invalid name INVALID_TOPIC_EXCEPTION. An existing topic is no records and no error.
func AutoCreateTopic(im *metadata.Image, name string, pl Placement, cfg Config, newID func() metadata.TopicID) (recs []wire.MetadataRecord, err *kerr.Error, reason string) {
	if topicconfig.IsInternal(name) {
		return nil, kerr.UnknownTopicOrPartition, "internal topic"
	}
	if im.Topic(name) != nil {
		return nil, nil, ""
	}
	c := newCreation(im, pl, cfg)
	t, aerr := c.checkNewTopic(name, -1, -1, nil, nil)
	if aerr == nil {
		return c.create(t, newTopicID(im, newID), false), nil, ""
	}
	if aerr.err == kerr.InvalidTopicException {
		return nil, aerr.err, aerr.msg
	}
	return nil, kerr.UnknownTopicOrPartition, aerr.msg
}

// InternalTopicConfigs are the configs Kafka gives the compacted internal topics
// (__consumer_offsets, __transaction_state).
var InternalTopicConfigs = map[string]string{
	"cleanup.policy":   "compact",
	"compression.type": "producer",
	"segment.bytes":    "104857600",
}

// ShareGroupStateConfigs are the configs Kafka gives __share_group_state.
var ShareGroupStateConfigs = map[string]string{
	"cleanup.policy": "delete",
	"retention.ms":   "-1",
	"segment.bytes":  "104857600",
}

// ErrNoBrokers: a topic cannot be placed with no broker to place it on.
var ErrNoBrokers = errors.New("admin: no broker to place partitions on")

// CreateInternalTopic is the records of an internal topic a coordinator creates on first
// use, with one replica per partition; none if it exists. Nothing is checked against the
// per-broker cap: coordinators need it, and its few partitions count towards the cap.
func CreateInternalTopic(im *metadata.Image, name string, partitions int32, configs map[string]string, pl Placement, newID func() metadata.TopicID) ([]wire.MetadataRecord, error) {
	if im.Topic(name) != nil {
		return nil, nil
	}
	if len(pl.Brokers) == 0 {
		return nil, ErrNoBrokers
	}
	t := newTopic{name: name, replicas: pl.peek(partitions, 1), configs: configs}
	return topicRecords(t, newTopicID(im, newID)), nil
}

// DeleteTopics is DeleteTopics (r.Version set) against im: a RemoveTopicRecord per topic
// deleted, each its own group, and the response. v6+ names topics by name or id (both
// set is INVALID_REQUEST), earlier versions by name.
func DeleteTopics(im *metadata.Image, r *kmsg.DeleteTopicsRequest, cfg Config) ([][]wire.MetadataRecord, *kmsg.DeleteTopicsResponse) {
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	resp.Version = r.Version
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
			targets = append(targets, target{name: &n})
		}
	}
	deleted := map[metadata.TopicID]bool{}
	var groups [][]wire.MetadataRecord
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		var t *metadata.Topic
		missing := kerr.UnknownTopicOrPartition
		switch {
		case tg.name != nil && tg.id != [16]byte{}:
			st.ErrorCode = kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, st)
			continue
		case tg.name != nil:
			t = im.Topic(*tg.name)
		default:
			t = im.TopicsByID[tg.id]
			missing = kerr.UnknownTopicID
		}
		if t == nil || deleted[t.ID] {
			st.ErrorCode = missing.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		name := t.Name
		st.Topic, st.TopicID = &name, t.ID
		var aerr *adminError
		switch {
		case topicconfig.IsInternal(t.Name):
			aerr = newAdminError(kerr.TopicAuthorizationFailed, "Internal topics cannot be deleted")
		case !cfg.Topic.DeleteTopicEnable():
			aerr = newAdminError(kerr.TopicDeletionDisabled, "Topic deletion is disabled.")
		default:
			deleted[t.ID] = true
			groups = append(groups, []wire.MetadataRecord{versioned(&wire.RemoveTopicRecord{TopicID: t.ID})})
		}
		st.ErrorCode, st.ErrorMessage = aerr.code()
		resp.Topics = append(resp.Topics, st)
	}
	return groups, resp
}

// CreatePartitions is CreatePartitions (r.Version set) against im: the new
// PartitionRecords of each topic grown, one group per topic, and the response. A topic's
// new partitions have its first partition's replication factor.
//
// The request creates at most MaxPartitionsPerRequest partitions: Kafka builds them in
// one list bounded at 10,000 (QuorumController.MAX_RECORDS_PER_USER_OP), so the topic
// that would overflow it, and every later one, fails while the earlier ones are created.
// Kafka answers that topic UNKNOWN_SERVER_ERROR and may commit the part of it that fits;
// exactq answers POLICY_VIOLATION with the message Kafka gives the same exception
// elsewhere, and creates none of that topic's partitions.
func CreatePartitions(im *metadata.Image, r *kmsg.CreatePartitionsRequest, pl Placement, cfg Config) ([][]wire.MetadataRecord, *kmsg.CreatePartitionsResponse) {
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	resp.Version = r.Version
	c := newCreation(im, pl, cfg)
	budget := int32(MaxPartitionsPerRequest)
	var groups [][]wire.MetadataRecord
	for _, rt := range r.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		recs, aerr := c.addPartitions(rt, r.ValidateOnly, &budget)
		if recs != nil {
			groups = append(groups, recs)
		}
		st.ErrorCode, st.ErrorMessage = aerr.code()
		resp.Topics = append(resp.Topics, st)
	}
	return groups, resp
}

// addPartitions checks and places one topic of a CreatePartitions request. A second entry
// for one topic sees the count the first gave it, as the broker's did.
func (c *creation) addPartitions(rt kmsg.CreatePartitionsRequestTopic, validateOnly bool, budget *int32) ([]wire.MetadataRecord, *adminError) {
	t := c.view.im.Topic(rt.Topic)
	if t == nil {
		return nil, newAdminError(kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
	}
	if topicconfig.IsInternal(t.Name) {
		return nil, newAdminError(kerr.InvalidRequest, "Cannot add partitions to internal topic %s", t.Name)
	}
	cur := int32(len(t.Partitions)) + c.grownBy[t.ID]
	switch {
	case rt.Count < cur:
		return nil, newAdminError(kerr.InvalidPartitions, "Topic currently has %d partitions, which is higher than the requested %d.", cur, rt.Count)
	case rt.Count == cur:
		return nil, newAdminError(kerr.InvalidPartitions, "Topic already has %d partitions.", cur)
	case rt.Count > MaxPartitionsPerTopic:
		return nil, newAdminError(kerr.InvalidPartitions, "Number of partitions %d exceeds exactq's limit of %d per topic (partition directory names must fit 255 bytes).", rt.Count, MaxPartitionsPerTopic)
	}
	rf := int16(1)
	if len(t.Partitions) > 0 {
		rf = int16(len(t.Partitions[0].Replicas))
	}
	var replicas [][]int32
	if rt.Assignment != nil {
		if len(rt.Assignment) != int(rt.Count-cur) {
			return nil, newAdminError(kerr.InvalidReplicaAssignment, "Increasing the number of partitions by %d but %d assignments provided.", rt.Count-cur, len(rt.Assignment))
		}
		for _, a := range rt.Assignment {
			if !c.pl.knownReplicas(a.Replicas) {
				return nil, newAdminError(kerr.InvalidReplicaAssignment, "Replica assignment names brokers that do not exist; this cluster has only %s", c.pl.nodeList())
			}
			if len(a.Replicas) != int(rf) {
				return nil, newAdminError(kerr.InvalidReplicaAssignment, "The manual partition assignment has %d replicas per partition, the topic %d.", len(a.Replicas), rf)
			}
			replicas = append(replicas, a.Replicas)
		}
	}
	if rt.Count-cur > *budget {
		*budget = 0
		return nil, newAdminError(kerr.PolicyViolation, "Unable to perform excessively large batch operation.")
	}
	*budget -= rt.Count - cur
	if replicas == nil {
		if int(rf) > len(c.pl.Brokers) {
			return nil, c.checkRF(rf)
		}
		replicas = c.pl.peek(rt.Count-cur, rf)
	}
	if aerr := c.counts.check(replicas, c.cfg.MaxBrokerPartitions); aerr != nil {
		return nil, aerr
	}
	if validateOnly {
		return nil, nil
	}
	if rt.Assignment == nil {
		c.pl.advance(rt.Count - cur)
	}
	c.counts.add(replicas)
	c.grownBy[t.ID] += rt.Count - cur
	return PartitionRecords(t.ID, cur, replicas), nil
}
