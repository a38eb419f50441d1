package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/group"
	"github.com/exactq/exactq/internal/groupconfig"
	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/internal/txn"
	"github.com/exactq/exactq/wire"
)

// coordinators holds the group coordinator. It starts at Open when its internal topic
// already exists (it must replay before serving and before any transaction marker reaches
// __consumer_offsets), and otherwise on first use, which is when Kafka creates the topic too.
type coordinators struct {
	mu     sync.Mutex
	groups *group.Coordinator // guarded by mu
	txns   *txn.Coordinator   // guarded by mu
	shares *shareStack        // guarded by mu
	// closed is set by closeCoordinators: none is created (again) after it.
	closed bool // guarded by mu
	// skipOffsetTombstones is a test seam: topic deletions leave the groups' offsets
	// alone, as a crash right after the topic's record was removed would.
	skipOffsetTombstones bool // guarded by mu
}

// errCoordinatorsClosed answers a coordinator lookup during or after shutdown.
var errCoordinatorsClosed = errors.New("broker: coordinators are shut down")

// loadCoordinator returns the coordinator in *slot, loading it with load on first use.
// b.coord.mu is held throughout, so one caller loads and the others wait for it; after
// closeCoordinators nothing is loaded again (a request or marker job racing shutdown
// would otherwise start a coordinator no one closes).
func loadCoordinator[C comparable](b *Broker, slot *C, load func() (C, error)) (C, error) {
	b.coord.mu.Lock()
	defer b.coord.mu.Unlock()
	var none C
	if *slot != none {
		return *slot, nil
	}
	if b.coord.closed {
		return none, errCoordinatorsClosed
	}
	c, err := load()
	if err != nil {
		return none, err
	}
	*slot = c
	return c, nil
}

// groupCoordinator returns the group coordinator, creating __consumer_offsets and loading
// it on first use.
//
// The internal topic is created before b.coord.mu is taken (here and for the other
// coordinators): creating it waits for the publisher, which takes that lock to clean up
// after deleted topics.
func (b *Broker) groupCoordinator() (*group.Coordinator, error) {
	if err := b.ensureInternalTopic(offsetsTopic, b.defaults.topic.OffsetsTopicNumPartitions()); err != nil {
		return nil, err
	}
	return loadCoordinator(b, &b.coord.groups, b.loadGroupCoordinator)
}

func (b *Broker) loadGroupCoordinator() (*group.Coordinator, error) {
	parts, err := b.internalPartitions(offsetsTopic)
	if err != nil {
		return nil, err
	}
	g, err := group.New(group.Config{
		NumPartitions:           b.topics.get(offsetsTopic).numPartitions(),
		MinSessionTimeoutMs:     b.brokerInt32("group.min.session.timeout.ms", 6000),
		MaxSessionTimeoutMs:     b.brokerInt32("group.max.session.timeout.ms", 1800000),
		InitialRebalanceDelayMs: b.defaults.topic.GroupInitialRebalanceDelayMs(),
		MaxGroupSize:            b.brokerInt32("group.max.size", 0),
		TopicExists:             b.partitionExists,
		TopicID: func(name string) ([16]byte, bool) {
			if t := b.topics.get(name); t != nil {
				return t.id, true
			}
			return [16]byte{}, false
		},
		TopicName: func(id [16]byte) (string, bool) {
			if t := b.topics.getByID(id); t != nil {
				return t.name, true
			}
			return "", false
		},
		VerifyTxn:               b.verifyTxnOffsetCommit,
		IsOtherGroupType:        b.isShareGroup,
		ConsumerMaxSize:         b.brokerInt32("group.consumer.max.size", 0),
		ConsumerAssignors:       consumerAssignors(b.cfg.BrokerConfigs["group.consumer.assignors"]),
		ConsumerMigrationPolicy: b.consumerMigrationPolicy(),
		ConsumerTimeouts: func(groupID string) (int32, int32) {
			r := b.groupCfg.Resolve(groupID)
			return r.Int(groupconfig.ConsumerSessionTimeoutMs), r.Int(groupconfig.ConsumerHeartbeatIntervalMs)
		},
		TopicMeta: func(name string) ([16]byte, int32, bool) {
			if t := b.topics.get(name); t != nil {
				return t.id, t.numPartitions(), true
			}
			return [16]byte{}, 0, false
		},
		TopicNames: func() []string {
			all := b.topics.all()
			names := make([]string, 0, len(all))
			for _, t := range all {
				names = append(names, t.name)
			}
			return names
		},
		Now:    b.now,
		Logger: b.logger.With("component", "group-coordinator"),
	}, parts)
	if err != nil {
		return nil, fmt.Errorf("load group coordinator: %w", err)
	}
	b.setOffsetsMarkerListener(g.CompleteTxn)
	return g, nil
}

// consumerAssignors reads group.consumer.assignors (validated at start-up) as the group
// coordinator's assignor names; empty means Kafka's default, uniform then range.
func consumerAssignors(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		switch a = strings.TrimSpace(a); a {
		case "":
		case "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
			out = append(out, "uniform")
		case "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
			out = append(out, "range")
		default:
			out = append(out, a)
		}
	}
	return out
}

// offsetTombstonesTimeout bounds how long a topic deletion waits for the tombstones of its
// offsets to be durable; past it they are still in the write queue (and out of memory).
const offsetTombstonesTimeout = 30 * time.Second

// deleteTopicOffsets removes a deleted topic's offsets from every group, as Kafka's group
// coordinator does on a topic deletion. Only a loaded coordinator can hold any: it is
// loaded at Open whenever __consumer_offsets exists. A failure is logged, not returned:
// the topic is already deleted, its offsets are out of memory, and the coordinator's next
// load tombstones whatever did not reach the log.
func (b *Broker) deleteTopicOffsets(t *topic) {
	b.coord.mu.Lock()
	g, skip := b.coord.groups, b.coord.skipOffsetTombstones
	b.coord.mu.Unlock()
	if g == nil || skip {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), offsetTombstonesTimeout)
	defer cancel()
	if err := g.DeleteTopicOffsets(ctx, t.name, t.id); err != nil {
		b.logger.Error("deleting offsets of a deleted topic", "topic", t.name, "err", err)
	}
}

// transactionVersionLevel is the transaction.version this broker finalizes: 2, KIP-890's
// server-side defence (epoch bump at every end, partitions added by the produce path).
const transactionVersionLevel = 2

// txnCoordinator returns the transaction coordinator, creating __transaction_state and
// loading it on first use. The group coordinator starts first: a restarted transaction
// coordinator re-sends markers of decided transactions, some to __consumer_offsets.
func (b *Broker) txnCoordinator() (*txn.Coordinator, error) {
	g, err := b.groupCoordinator()
	if err != nil {
		return nil, err
	}
	if err := b.ensureInternalTopic(transactionStateTopic, b.defaults.topic.TransactionStateLogNumPartitions()); err != nil {
		return nil, err
	}
	return loadCoordinator(b, &b.coord.txns, func() (*txn.Coordinator, error) { return b.loadTxnCoordinator(g) })
}

func (b *Broker) loadTxnCoordinator(g *group.Coordinator) (*txn.Coordinator, error) {
	parts, err := b.internalPartitions(transactionStateTopic)
	if err != nil {
		return nil, err
	}
	c, err := txn.New(txn.Config{
		NumPartitions:           b.topics.get(transactionStateTopic).numPartitions(),
		MaxTimeoutMs:            b.brokerInt32("transaction.max.timeout.ms", 900000),
		TwoPhaseCommitEnable:    b.defaults.topic.TransactionTwoPhaseCommitEnable(),
		AbortTimedOutIntervalMs: int64(b.brokerInt32("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000)),
		GroupPartition: func(groupID string) txn.TopicPartition {
			return txn.TopicPartition{Topic: offsetsTopic, Partition: g.PartitionFor(groupID)}
		},
		Now:    b.now,
		Logger: b.logger.With("component", "txn-coordinator"),
	}, parts, txnBroker{b})
	if err != nil {
		return nil, fmt.Errorf("load transaction coordinator: %w", err)
	}
	b.txn.Store(&txnVerifierBox{c})
	return c, nil
}

// verifyTxnOffsetCommit is KIP-890's check for TxnOffsetCommit: the transaction must include
// the group's __consumer_offsets partition; from v5 with transaction version 2 the
// partition is added implicitly, as the produce path does for data partitions.
func (b *Broker) verifyTxnOffsetCommit(ctx context.Context, id string, pid int64, epoch int16, partition int32, version int16) int16 {
	c, err := b.txnCoordinator()
	if err != nil {
		return 15 // COORDINATOR_NOT_AVAILABLE
	}
	add := version >= 5 && b.transactionVersion() >= 2
	code := c.VerifyOrAdd(ctx, id, pid, epoch, offsetsTopic, partition, add)
	if version < 4 {
		code = txn.LegacyProduceError(code, 10)
	}
	return code
}

// txnBroker is the broker as the transaction coordinator sees it.
type txnBroker struct{ b *Broker }

func (tb txnBroker) WriteMarkers(ctx context.Context, pid int64, epoch int16, commit bool, coordinatorEpoch int32, parts []txn.TopicPartition) map[txn.TopicPartition]error {
	tps := make([]TopicPartition, len(parts))
	for i, p := range parts {
		tps[i] = TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	out := map[txn.TopicPartition]error{}
	for tp, err := range tb.b.WriteMarkers(ctx, pid, epoch, commit, coordinatorEpoch, tps) {
		out[txn.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}] = err
	}
	return out
}

func (tb txnBroker) PartitionExists(topic string, partition int32) bool {
	return partitionOf(tb.b.topics.get(topic), partition) != nil
}

func (tb txnBroker) AllocateProducerID() (int64, error) { return tb.b.pids.allocate() }

func (t *topic) numPartitions() int32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return int32(len(t.partitions))
}

// brokerInt32 reads an integer broker config exactq passes to a coordinator, falling back to
// Kafka's default when unset or unparsable (startup validation reports bad values).
func (b *Broker) brokerInt32(name string, def int32) int32 {
	if v, ok := b.cfg.BrokerConfigs[name]; ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil {
			return int32(n)
		}
	}
	return def
}

// closeCoordinators stops the coordinators before the logs they write close.
func (b *Broker) closeCoordinators() {
	// Take them out under the lock, close them outside it: the transaction coordinator's
	// Close waits for its marker jobs, and a job writing a __share_group_state marker
	// looks the share stack up (b.shares, which takes this lock). The transaction
	// coordinator closes first, while the share stack and group coordinator its jobs use
	// are still open; closed stops anyone from creating them again meanwhile.
	b.coord.mu.Lock()
	b.coord.closed = true
	txns := b.coord.txns
	b.coord.mu.Unlock()
	if txns != nil {
		txns.Close()
	}
	b.coord.mu.Lock()
	shares, groups := b.coord.shares, b.coord.groups
	b.coord.txns, b.coord.shares, b.coord.groups = nil, nil, nil
	b.coord.mu.Unlock()
	if shares != nil {
		shares.close()
	}
	if groups != nil {
		groups.Close()
	}
}

// groupReply runs a group-coordinator handler: an immediate response, or a wait the server
// runs off the connection's read loop.
func (b *Broker) groupReply(ctx context.Context, req *server.Request, call func(*group.Coordinator, context.Context) (kmsg.Response, func() kmsg.Response)) server.Reply {
	g, err := b.groupCoordinator()
	if err != nil {
		b.logger.Error("group coordinator unavailable", "err", err)
		return server.Reply{Resp: coordinatorUnavailable(req)}
	}
	if b.clustered() {
		// A cluster node coordinates the groups of the __consumer_offsets partitions it
		// leads (groupsacross.go); a request for any other group is NOT_COORDINATOR,
		// which sends the client back to FindCoordinator.
		for _, id := range groupsOf(req.Body) {
			if leader, _ := b.groupCoordinatorOf(id); leader != b.cfg.NodeID {
				return server.Reply{Resp: coordinatorError(req, kerr.NotCoordinator.Code)}
			}
		}
	}
	host := ""
	if req.Conn != nil && req.Conn.RemoteAddr != nil {
		if h, _, err := net.SplitHostPort(req.Conn.RemoteAddr.String()); err == nil {
			host = "/" + h
		}
	}
	ctx = group.WithClient(ctx, group.Client{ID: req.ClientID, Host: host})
	resp, wait := call(g, ctx)
	if wait != nil {
		return server.Reply{Wait: wait}
	}
	return server.Reply{Resp: resp}
}

// coordinatorUnavailable builds the request's response with COORDINATOR_NOT_AVAILABLE in
// every error field a client reads.
func coordinatorUnavailable(req *server.Request) kmsg.Response {
	return coordinatorError(req, kerr.CoordinatorNotAvailable.Code)
}

// coordinatorError builds the request's response with code in every error field a client
// reads.
func coordinatorError(req *server.Request, code int16) kmsg.Response {
	resp := req.Body.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode = code
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.OffsetCommitResponse:
		for _, t := range req.Body.(*kmsg.OffsetCommitRequest).Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.OffsetFetchResponse:
		r.ErrorCode = code
		for _, g := range req.Body.(*kmsg.OffsetFetchRequest).Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code
			r.Groups = append(r.Groups, rg)
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range req.Body.(*kmsg.TxnOffsetCommitRequest).Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.DescribeGroupsResponse:
		for _, id := range req.Body.(*kmsg.DescribeGroupsRequest).Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = id, code
			r.Groups = append(r.Groups, g)
		}
	case *kmsg.ListGroupsResponse:
		r.ErrorCode = code
	case *kmsg.DeleteGroupsResponse:
		for _, id := range req.Body.(*kmsg.DeleteGroupsRequest).Groups {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, code
			r.Groups = append(r.Groups, g)
		}
	case *kmsg.OffsetDeleteResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupDescribeResponse:
		for _, id := range req.Body.(*kmsg.ConsumerGroupDescribeRequest).Groups {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = id, code
			r.Groups = append(r.Groups, g)
		}
	}
	return resp
}

// txnReply runs a transaction-coordinator handler. The handlers block until the state their
// answer depends on is durable and are run in request order, never deferred: a deferred
// EndTxn could otherwise be overtaken by the same producer's next AddPartitionsToTxn.
func (b *Broker) txnReply(req *server.Request, call func(*txn.Coordinator) kmsg.Response) server.Reply {
	c, err := b.txnCoordinator()
	if err != nil {
		b.logger.Error("transaction coordinator unavailable", "err", err)
		return server.Reply{Resp: txnCoordinatorUnavailable(req)}
	}
	return server.Reply{Resp: call(c)}
}

// txnCoordinatorUnavailable answers a transaction request with COORDINATOR_NOT_AVAILABLE.
func txnCoordinatorUnavailable(req *server.Request) kmsg.Response {
	resp := req.Body.ResponseKind()
	const code = 15 // COORDINATOR_NOT_AVAILABLE
	switch r := resp.(type) {
	case *wire.InitProducerIDResponse:
		r.ErrorCode, r.ProducerID, r.ProducerEpoch = code, -1, -1
	case *kmsg.AddOffsetsToTxnResponse:
		r.ErrorCode = code
	case *kmsg.EndTxnResponse:
		r.ErrorCode = code
	case *kmsg.ListTransactionsResponse:
		r.ErrorCode = code
	case *kmsg.AddPartitionsToTxnResponse:
		r.ErrorCode = code
		for _, t := range req.Body.(*kmsg.AddPartitionsToTxnRequest).Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.DescribeTransactionsResponse:
		for _, id := range req.Body.(*kmsg.DescribeTransactionsRequest).TransactionalIDs {
			s := kmsg.NewDescribeTransactionsResponseTransactionState()
			s.TransactionalID, s.ErrorCode = id, code
			r.TransactionStates = append(r.TransactionStates, s)
		}
	}
	return resp
}

// consumerMigrationPolicy is group.consumer.migration.policy (validated with the other
// broker configs at start; Kafka's default, bidirectional, when unset).
func (b *Broker) consumerMigrationPolicy() group.MigrationPolicy {
	p, err := group.ParseMigrationPolicy(b.cfg.BrokerConfigs["group.consumer.migration.policy"])
	if err != nil {
		return group.MigrationBidirectional
	}
	return p
}
