package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/group"
	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/internal/txn"
	"github.com/exactq/exactq/wire"
)

// implemented lists the API keys this broker serves, each capped to what Apache Kafka 4.4
// accepts (server.Kafka44). Only what is really implemented is advertised.
var implemented = []int16{
	0,  // Produce
	1,  // Fetch
	2,  // ListOffsets
	3,  // Metadata
	8,  // OffsetCommit
	9,  // OffsetFetch
	10, // FindCoordinator
	11, // JoinGroup
	12, // Heartbeat
	13, // LeaveGroup
	14, // SyncGroup
	15, // DescribeGroups
	16, // ListGroups
	18, // ApiVersions (answered by the server)
	19, // CreateTopics
	20, // DeleteTopics
	21, // DeleteRecords
	22, // InitProducerId
	24, // AddPartitionsToTxn
	25, // AddOffsetsToTxn
	26, // EndTxn
	27, // WriteTxnMarkers
	28, // TxnOffsetCommit
	32, // DescribeConfigs
	33, // AlterConfigs
	35, // DescribeLogDirs
	37, // CreatePartitions
	42, // DeleteGroups
	44, // IncrementalAlterConfigs
	47, // OffsetDelete
	55, // DescribeQuorum (forwarded to the controller, as Kafka 4.x brokers do)
	57, // UpdateFeatures
	60, // DescribeCluster
	61, // DescribeProducers
	65, // DescribeTransactions
	66, // ListTransactions
	68, // ConsumerGroupHeartbeat
	69, // ConsumerGroupDescribe
	75, // DescribeTopicPartitions
	76, // ShareGroupHeartbeat
	77, // ShareGroupDescribe
	78, // ShareFetch
	79, // ShareAcknowledge
	90, // DescribeShareGroupOffsets
	91, // AlterShareGroupOffsets
	92, // DeleteShareGroupOffsets
}

// maxImplemented caps keys whose newest Kafka 4.4 versions are not served yet.
var maxImplemented = map[int16]int16{
	42: 2, // DeleteGroups v3 (KIP-1043 group types) not yet
}

// APIs implements server.Handler.
func (b *Broker) APIs() []server.APIRange {
	out := make([]server.APIRange, 0, len(implemented)+1)
	if key := b.txnShareAckKey(); key >= 0 {
		// KIP-1289's TxnShareAcknowledge: exactq's own message, not in Kafka 4.4.
		out = append(out, server.APIRange{Key: key, MinVersion: 0, MaxVersion: 0,
			NewRequest: func() kmsg.Request { return &wire.TxnShareAcknowledgeRequest{APIKey: key} }})
	}
	for _, k := range implemented {
		r, ok := server.Kafka44[k]
		if !ok {
			panic("broker: implemented API missing from server.Kafka44")
		}
		if m, ok := maxImplemented[k]; ok && m < r.MaxVersion {
			r.MaxVersion = m
		}
		if k == 22 {
			// InitProducerId v6 (KIP-939 two-phase commit): unstable, so not advertised,
			// in Kafka 4.4 and unknown to kmsg; exactq serves it with its own types.
			r.MaxVersion = (*wire.InitProducerIDRequest)(nil).MaxVersion()
			r.NewRequest = func() kmsg.Request { return wire.NewPtrInitProducerIDRequest() }
		}
		out = append(out, r)
	}
	return out
}

// ConnClosed implements server.Handler.
func (b *Broker) ConnClosed(conn *server.ConnInfo) {
	b.sessions.connClosed(conn.ID)
	b.coord.mu.Lock()
	s := b.coord.shares
	b.coord.mu.Unlock()
	if s != nil {
		s.fetch.ConnClosed(conn.ID)
	}
}

// Handle implements server.Handler: one request at a time per connection, in order.
func (b *Broker) Handle(ctx context.Context, req *server.Request) server.Reply {
	switch r := req.Body.(type) {
	case *kmsg.ProduceRequest:
		return b.handleProduce(ctx, req, r)
	case *kmsg.FetchRequest:
		return b.handleFetch(req, ctx, r)
	case *kmsg.ListOffsetsRequest:
		return b.handleListOffsets(req, r)
	case *kmsg.MetadataRequest:
		return b.handleMetadata(ctx, req, r)
	case *kmsg.FindCoordinatorRequest:
		return b.handleFindCoordinator(req, r)
	case *kmsg.CreateTopicsRequest:
		return b.forwardReply(ctx, req, r)
	case *kmsg.DeleteTopicsRequest:
		return b.forwardReply(ctx, req, r)
	case *kmsg.DeleteRecordsRequest:
		return b.handleDeleteRecords(req, r)
	case *wire.InitProducerIDRequest:
		if r.TransactionalID != nil {
			return b.txnReply(req, func(c *txn.Coordinator) kmsg.Response { return c.InitProducerIDV6(ctx, r) })
		}
		return b.handleInitProducerID(req, r)
	case *kmsg.DescribeConfigsRequest:
		return b.handleDescribeConfigs(req, r)
	case *kmsg.AlterConfigsRequest:
		return b.forwardReply(ctx, req, r)
	case *kmsg.IncrementalAlterConfigsRequest:
		return b.forwardReply(ctx, req, r)
	case *kmsg.CreatePartitionsRequest:
		return b.forwardReply(ctx, req, r)
	case *kmsg.DescribeClusterRequest:
		return b.handleDescribeCluster(req, r)
	case *kmsg.DescribeTopicPartitionsRequest:
		return b.handleDescribeTopicPartitions(req, r)
	case *kmsg.DescribeQuorumRequest:
		return b.handleDescribeQuorum(ctx, req, r)
	case *kmsg.DescribeProducersRequest:
		return b.handleDescribeProducers(req, r)
	case *kmsg.WriteTxnMarkersRequest:
		return b.handleWriteTxnMarkers(ctx, req, r)
	case *kmsg.DescribeLogDirsRequest:
		return b.handleDescribeLogDirs(req, r)
	case *kmsg.AddPartitionsToTxnRequest:
		return txnCall(b, ctx, req, r, (*txn.Coordinator).AddPartitionsToTxn)
	case *kmsg.AddOffsetsToTxnRequest:
		return txnCall(b, ctx, req, r, (*txn.Coordinator).AddOffsetsToTxn)
	case *kmsg.EndTxnRequest:
		return txnCall(b, ctx, req, r, (*txn.Coordinator).EndTxn)
	case *kmsg.DescribeTransactionsRequest:
		return txnCall(b, ctx, req, r, (*txn.Coordinator).DescribeTransactions)
	case *kmsg.ListTransactionsRequest:
		return txnCall(b, ctx, req, r, (*txn.Coordinator).ListTransactions)
	case *kmsg.TxnOffsetCommitRequest:
		return groupCall(b, ctx, req, r, (*group.Coordinator).TxnOffsetCommit)
	case *kmsg.ShareGroupHeartbeatRequest:
		return b.handleShareGroupHeartbeat(ctx, req, r)
	case *kmsg.ShareGroupDescribeRequest:
		return b.handleShareGroupDescribe(ctx, req, r)
	case *kmsg.ShareFetchRequest:
		return b.handleShareFetch(ctx, req, r)
	case *kmsg.ShareAcknowledgeRequest:
		return b.handleShareAcknowledge(ctx, req, r)
	case *kmsg.DescribeShareGroupOffsetsRequest:
		return b.handleDescribeShareGroupOffsets(ctx, req, r)
	case *kmsg.AlterShareGroupOffsetsRequest:
		return b.handleAlterShareGroupOffsets(ctx, req, r)
	case *kmsg.DeleteShareGroupOffsetsRequest:
		return b.handleDeleteShareGroupOffsets(ctx, req, r)
	case *kmsg.UpdateFeaturesRequest:
		return b.forwardReply(ctx, req, r)
	case *wire.TxnShareAcknowledgeRequest:
		return b.handleTxnShareAcknowledge(ctx, req, r)
	case *kmsg.JoinGroupRequest:
		return groupCall(b, ctx, req, r, (*group.Coordinator).JoinGroup)
	case *kmsg.SyncGroupRequest:
		return groupCall(b, ctx, req, r, (*group.Coordinator).SyncGroup)
	case *kmsg.HeartbeatRequest:
		return groupCall(b, ctx, req, r, (*group.Coordinator).Heartbeat)
	case *kmsg.LeaveGroupRequest:
		return groupCall(b, ctx, req, r, (*group.Coordinator).LeaveGroup)
	case *kmsg.OffsetCommitRequest:
		return groupCall(b, ctx, req, r, (*group.Coordinator).OffsetCommit)
	case *kmsg.OffsetFetchRequest:
		return groupCall(b, ctx, req, r, (*group.Coordinator).OffsetFetch)
	case *kmsg.DescribeGroupsRequest:
		return b.handleDescribeGroups(ctx, req, r)
	case *kmsg.ListGroupsRequest:
		return b.handleListGroups(ctx, req, r)
	case *kmsg.DeleteGroupsRequest:
		return b.handleDeleteGroups(ctx, req, r)
	case *kmsg.OffsetDeleteRequest:
		return groupCall(b, ctx, req, r, (*group.Coordinator).OffsetDelete)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return groupCall(b, ctx, req, r, (*group.Coordinator).ConsumerGroupHeartbeat)
	case *kmsg.ConsumerGroupDescribeRequest:
		return groupCall(b, ctx, req, r, (*group.Coordinator).ConsumerGroupDescribe)
	}
	// The server only dispatches keys listed in APIs, so this is a programming error.
	b.logger.Error("no handler for advertised API", "key", req.Key)
	return server.Reply{Close: true}
}

// groupCall dispatches a request to a group-coordinator method.
func groupCall[Q kmsg.Request](b *Broker, ctx context.Context, req *server.Request, r Q,
	method func(*group.Coordinator, context.Context, int16, Q) (kmsg.Response, func() kmsg.Response)) server.Reply {
	return b.groupReply(ctx, req, func(g *group.Coordinator, ctx context.Context) (kmsg.Response, func() kmsg.Response) {
		return method(g, ctx, req.Version, r)
	})
}

// txnCall dispatches a request to a transaction-coordinator method.
func txnCall[Q kmsg.Request, S kmsg.Response](b *Broker, ctx context.Context, req *server.Request, r Q,
	method func(*txn.Coordinator, context.Context, int16, Q) S) server.Reply {
	return b.txnReply(req, func(c *txn.Coordinator) kmsg.Response { return method(c, ctx, req.Version, r) })
}
