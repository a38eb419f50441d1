// Package metadata is the cluster metadata image (docs/architecture.md, "The metadata
// log"): an immutable value built by applying batches of KRaft metadata records
// (wire.MetadataRecord) with KRaft's replay rules. Apply never changes an image: it
// returns a new one that shares every map and partition the batch did not touch, so a
// reader holds an image without locks. A batch that does not fit the image is refused
// whole: nothing of it is applied.
//
// Pure code: no I/O, no goroutines. The quorum loop (step 4) applies committed entries,
// the checkpoint file (internal/cluster/raftstore) stores Records' output.
package metadata

import (
	"cmp"
	"github.com/exactq/exactq/internal/security/acl"
	"maps"
	"slices"
)

// TopicID is a topic's id (Kafka's Uuid).
type TopicID [16]byte

// Endpoint is one listener of a broker.
type Endpoint struct {
	Name             string
	Host             string
	Port             uint16
	SecurityProtocol int16
}

// FeatureRange is a feature version range a broker supports.
type FeatureRange struct {
	Name     string
	Min, Max int16
}

// Broker is a registered broker (RegisterBrokerRecord, then its changes).
type Broker struct {
	ID                   int32
	IncarnationID        [16]byte
	Epoch                int64
	Endpoints            []Endpoint
	Features             []FeatureRange
	Rack                 *string
	Fenced               bool
	InControlledShutdown bool
	LogDirs              [][16]byte
	CordonedLogDirs      [][16]byte
}

// Partition is one partition of a topic (PartitionRecord, then PartitionChangeRecords).
type Partition struct {
	Replicas            []int32
	ISR                 []int32
	RemovingReplicas    []int32
	AddingReplicas      []int32
	Leader              int32 // -1: none
	LeaderRecoveryState int8
	LeaderEpoch         int32
	PartitionEpoch      int32
	Directories         [][16]byte
	ELR                 []int32
	LastKnownELR        []int32
}

// Topic is a topic and its partitions, 0 to len-1.
type Topic struct {
	Name       string
	ID         TopicID
	Partitions []*Partition
}

// ConfigResource names what a ConfigRecord configures: Kafka's resource type (TOPIC 2,
// BROKER 4, GROUP 32) and name.
type ConfigResource struct {
	Type int8
	Name string
}

// Resource types ConfigRecord may name.
const (
	ResourceTopic  int8 = 2
	ResourceBroker int8 = 4
	ResourceGroup  int8 = 32
)

// ProducerIDs is the last producer-id block handed out (ProducerIdsRecord).
type ProducerIDs struct {
	BrokerID    int32
	BrokerEpoch int64
	Next        int64 // the first id of the next block; 0 before any
}

// Cluster is what ClusterRecord says.
type Cluster struct {
	ID            string
	CreatedMillis int64
}

// Image is the cluster metadata at one point of the log. Its maps and partitions are
// shared with other images: read them, never write them.
type Image struct {
	Cluster      Cluster
	Brokers      map[int32]*Broker
	TopicsByID   map[TopicID]*Topic
	TopicsByName map[string]TopicID
	Configs      map[ConfigResource]map[string]string
	Features     map[string]int16
	ProducerIDs  ProducerIDs
	// ACLs (AccessControlEntryRecord, by id) and SCRAM credentials (UserScramCredentialRecord)
	// are nil until the first such record: reading a nil map is reading an empty one.
	ACLs  map[acl.ID]acl.ACL
	Scram map[ScramKey]ScramCredential
}

// Empty is the image before any record.
func Empty() *Image {
	return &Image{
		Brokers:      map[int32]*Broker{},
		TopicsByID:   map[TopicID]*Topic{},
		TopicsByName: map[string]TopicID{},
		Configs:      map[ConfigResource]map[string]string{},
		Features:     map[string]int16{},
	}
}

// Topic returns the topic named name, or nil.
func (im *Image) Topic(name string) *Topic {
	id, ok := im.TopicsByName[name]
	if !ok {
		return nil
	}
	return im.TopicsByID[id]
}

// sortedKeys returns m's keys in order.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}
