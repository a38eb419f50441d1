// Package admin turns admin requests into metadata records: CreateTopics, DeleteTopics,
// CreatePartitions, AlterConfigs, IncrementalAlterConfigs (topics and groups),
// UpdateFeatures, CreateAcls, DeleteAcls and AlterUserScramCredentials, each validated
// against a metadata image with the Kafka error codes and messages Kafka's controller
// answers. The controller (the raft leader) calls them against its latest image,
// proposes the records and answers the response once they are applied. DescribeAcls and
// DescribeUserScramCredentials are the reads any broker answers from its own image.
//
// Pure code: no I/O, no clocks, no randomness. Topic ids come from a function the caller
// passes and replica placement starts where the caller says, so tests and the simulation
// choose both.
//
// A request's records come as groups, one per topic or resource, each to be applied
// atomically and in order (the controller may split a request's records into batches
// only between groups: Kafka's CreateTopics is not atomic across topics either). Every
// group fits the image it is computed against plus the groups before it.
package admin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/groupconfig"
	"github.com/exactq/exactq/internal/topicconfig"
	"github.com/exactq/exactq/wire"
)

// Config is what the node's configuration gives the admin rules.
type Config struct {
	// Topic holds the broker defaults: num.partitions, default.replication.factor,
	// delete.topic.enable, and what topic configs are validated against.
	Topic *topicconfig.BrokerDefaults
	// Group validates group configs.
	Group *groupconfig.Broker
	// MaxBrokerPartitions is max.broker.partitions: the most partition replicas one broker
	// may host (internal topics count but are never refused).
	MaxBrokerPartitions int64
	// MaxReplicationFactor is the highest replication factor accepted (0: as many as there
	// are brokers). 1 until partitions are replicated (part 2).
	MaxReplicationFactor int16
}

// Placement is where new partitions' replicas go: striped over Brokers (the unfenced
// brokers, in the caller's order), partition k of a request led by Brokers[(Start+k) %
// len(Brokers)] with its followers the next brokers in turn (Kafka's striped placer
// without racks). The controller draws Start at random; tests choose it.
type Placement struct {
	Brokers []int32
	Start   int
}

// peek returns the replicas of n new partitions of replication factor rf (at most
// len(Brokers)); none when there are no brokers.
func (pl *Placement) peek(n int32, rf int16) [][]int32 {
	if len(pl.Brokers) == 0 {
		return nil
	}
	nb := len(pl.Brokers)
	first := (pl.Start%nb + nb) % nb
	out := make([][]int32, n)
	for k := range out {
		r := make([]int32, rf)
		for j := range r {
			r[j] = pl.Brokers[(first+k+j)%nb]
		}
		out[k] = r
	}
	return out
}

// advance moves the stripe past n placed partitions, so the next topic of a request
// continues where this one ended.
func (pl *Placement) advance(n int32) {
	if len(pl.Brokers) > 0 {
		pl.Start = (pl.Start + int(n)) % len(pl.Brokers)
	}
}

// nodeList names the brokers for a message: "node 1" on a single node, as the broker has
// said it, "nodes 1, 2, 3" otherwise.
func (pl *Placement) nodeList() string {
	if len(pl.Brokers) == 1 {
		return "node " + strconv.Itoa(int(pl.Brokers[0]))
	}
	ids := make([]string, len(pl.Brokers))
	for i, b := range pl.Brokers {
		ids[i] = strconv.Itoa(int(b))
	}
	return "nodes " + strings.Join(ids, ", ")
}

// knownReplicas reports whether replicas is a non-empty set of distinct placement brokers.
func (pl *Placement) knownReplicas(replicas []int32) bool {
	if len(replicas) == 0 {
		return false
	}
	for i, r := range replicas {
		if !slices.Contains(pl.Brokers, r) || slices.Contains(replicas[:i], r) {
			return false
		}
	}
	return true
}

// adminError is a Kafka error code with the message the broker puts next to it.
type adminError struct {
	err *kerr.Error
	msg string
}

func newAdminError(err *kerr.Error, format string, args ...any) *adminError {
	return &adminError{err: err, msg: fmt.Sprintf(format, args...)}
}

// code returns the error's code and message pointer as responses carry them (0 and nil
// for no error).
func (e *adminError) code() (int16, *string) {
	if e == nil {
		return 0, nil
	}
	m := e.msg
	return e.err.Code, &m
}

// Hosted counts, per broker, the partition replicas im places on it (what
// max.broker.partitions bounds).
func Hosted(im *metadata.Image) map[int32]int64 {
	out := map[int32]int64{}
	for _, t := range im.TopicsByID {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				out[r]++
			}
		}
	}
	return out
}

// partitionCounts is the per-broker replica count of a request in progress: the image's,
// plus what the request has added so far.
type partitionCounts struct {
	have map[int32]int64
}

// check refuses adding replicas when a broker would then host more than
// MaxBrokerPartitions, with the broker's message (the first such broker in id order).
func (pc *partitionCounts) check(replicas [][]int32, max int64) *adminError {
	add := map[int32]int64{}
	for _, rs := range replicas {
		for _, r := range rs {
			add[r]++
		}
	}
	ids := make([]int32, 0, len(add))
	for id := range add {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if pc.have[id]+add[id] > max {
			return newAdminError(kerr.PolicyViolation,
				"Adding %d partition(s) would exceed this broker's limit of %d partitions (max.broker.partitions); it hosts %d.",
				add[id], max, pc.have[id])
		}
	}
	return nil
}

func (pc *partitionCounts) add(replicas [][]int32) {
	for _, rs := range replicas {
		for _, r := range rs {
			pc.have[r]++
		}
	}
}

// PartitionRecords are the PartitionRecords of new partitions from, from+1, ... of a
// topic: leader the first replica, every replica in the ISR, epochs 0.
func PartitionRecords(id metadata.TopicID, from int32, replicas [][]int32) []wire.MetadataRecord {
	out := make([]wire.MetadataRecord, len(replicas))
	for k, rs := range replicas {
		r := wire.NewPartitionRecord()
		r.TopicID, r.PartitionID = id, from+int32(k)
		r.Replicas, r.ISR, r.Leader = rs, slices.Clone(rs), rs[0]
		r.LeaderEpoch, r.PartitionEpoch = 0, 0
		out[k] = versioned(&r)
	}
	return out
}
