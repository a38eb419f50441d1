package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/coordlog"
)

// Consumer groups across nodes (docs/architecture.md, build order step 13, the part built):
// a group's coordinator is the leader of its __consumer_offsets partition
// (coordlog.PartitionFor, Kafka's hash), which FindCoordinator answers from the image. Every
// node runs the group coordinator over the partitions of __consumer_offsets it holds; the
// partitions held elsewhere are empty stand-ins (elsewhere) that never take an append, since
// requests for their groups are answered NOT_COORDINATOR before they reach it (groupReply).
// With one replica per partition a partition's leader is its one replica or nobody, so a
// node never has to load or unload a partition while it runs: it loads what it holds when
// the coordinator first loads, and a leaderless partition's groups are unavailable
// (COORDINATOR_NOT_AVAILABLE) until its node is back. Transactions and share groups still
// need every partition of their internal topics on one node (steps 14-17).

// elsewhere is a __consumer_offsets partition held by another node: nothing to replay, and
// an append (which groupReply prevents) is NOT_COORDINATOR.
type elsewhere int32

func (e elsewhere) Index() int32 { return int32(e) }

func (e elsewhere) Append(context.Context, coordlog.Batch) (int64, error) {
	return -1, fmt.Errorf("%s-%d is on another node: %w", offsetsTopic, int32(e), kerr.NotCoordinator)
}

func (e elsewhere) Replay(func(coordlog.Stored) error) error { return nil }

// groupCoordinatorOf is the node coordinating group id (its __consumer_offsets partition's
// leader, -1 when leaderless) and that partition.
func (b *Broker) groupCoordinatorOf(id string) (leader, partition int32) {
	t := b.topics.get(offsetsTopic)
	if t == nil {
		return -1, -1
	}
	it := b.pub.image().TopicsByID[t.id]
	if it == nil || len(it.Partitions) == 0 {
		return -1, -1
	}
	partition = coordlog.PartitionFor(id, int32(len(it.Partitions)))
	return b.leaderOf(it.Partitions[partition]), partition
}

var errCoordinatorLeaderless = errors.New("the group's __consumer_offsets partition has no leader")

// groupCoordinatorNode is the endpoint FindCoordinator gives for group id on a cluster node.
func (b *Broker) groupCoordinatorNode(id string) (endpoint, error) {
	leader, p := b.groupCoordinatorOf(id)
	if leader < 0 {
		return endpoint{}, fmt.Errorf("%w (partition %d)", errCoordinatorLeaderless, p)
	}
	for _, e := range b.brokers() {
		if e.id == leader {
			return e, nil
		}
	}
	return endpoint{}, fmt.Errorf("the coordinator of partition %d, node %d, is not an unfenced broker", p, leader)
}

// groupsOf is the group ids a group request names; none for ListGroups (each node lists
// the groups it coordinates, and Kafka's admin client asks every broker).
func groupsOf(body kmsg.Request) []string {
	switch r := body.(type) {
	case *kmsg.JoinGroupRequest:
		return []string{r.Group}
	case *kmsg.SyncGroupRequest:
		return []string{r.Group}
	case *kmsg.HeartbeatRequest:
		return []string{r.Group}
	case *kmsg.LeaveGroupRequest:
		return []string{r.Group}
	case *kmsg.OffsetCommitRequest:
		return []string{r.Group}
	case *kmsg.TxnOffsetCommitRequest:
		return []string{r.Group}
	case *kmsg.OffsetDeleteRequest:
		return []string{r.Group}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return []string{r.Group}
	case *kmsg.OffsetFetchRequest:
		if len(r.Groups) == 0 {
			return []string{r.Group}
		}
		ids := make([]string, 0, len(r.Groups))
		for _, g := range r.Groups {
			ids = append(ids, g.Group)
		}
		return ids
	case *kmsg.DescribeGroupsRequest:
		return r.Groups
	case *kmsg.DeleteGroupsRequest:
		return r.Groups
	case *kmsg.ConsumerGroupDescribeRequest:
		return r.Groups
	}
	return nil
}

// partitionExists is what the group coordinator checks an offset commit's partition
// against: on a cluster node, the image's partitions (most are led elsewhere); on a lone
// voter, the partitions open here (an offline one does not take commits, as before).
func (b *Broker) partitionExists(topic string, p int32) bool {
	t := b.topics.get(topic)
	if !b.clustered() {
		return partitionOf(t, p) != nil
	}
	return t != nil && imagePartition(b.pub.image(), t.id, p) != nil
}
