package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/server"
)

// implemented lists the API keys this broker serves, each capped to what Apache Kafka 4.4
// accepts (server.Kafka44). Only what is really implemented is advertised.
var implemented = []int16{
	0,  // Produce
	1,  // Fetch
	2,  // ListOffsets
	3,  // Metadata
	10, // FindCoordinator
	18, // ApiVersions (answered by the server)
	19, // CreateTopics
	20, // DeleteTopics
	21, // DeleteRecords
	22, // InitProducerId
	32, // DescribeConfigs
	33, // AlterConfigs
	37, // CreatePartitions
	44, // IncrementalAlterConfigs
	60, // DescribeCluster
	61, // DescribeProducers
}

// APIs implements server.Handler.
func (b *Broker) APIs() []server.APIRange {
	out := make([]server.APIRange, 0, len(implemented))
	for _, k := range implemented {
		r, ok := server.Kafka44[k]
		if !ok {
			panic("broker: implemented API missing from server.Kafka44")
		}
		out = append(out, r)
	}
	return out
}

// Features implements server.Handler. No feature flags are finalized until transactions
// (transaction.version) and share groups (share.version) land.
func (b *Broker) Features(resp *kmsg.ApiVersionsResponse) {}

// ConnClosed implements server.Handler.
func (b *Broker) ConnClosed(conn *server.ConnInfo) { b.sessions.connClosed(conn.ID) }

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
		return b.handleMetadata(req, r)
	case *kmsg.FindCoordinatorRequest:
		return b.handleFindCoordinator(req, r)
	case *kmsg.CreateTopicsRequest:
		return b.handleCreateTopics(req, r)
	case *kmsg.DeleteTopicsRequest:
		return b.handleDeleteTopics(req, r)
	case *kmsg.DeleteRecordsRequest:
		return b.handleDeleteRecords(req, r)
	case *kmsg.InitProducerIDRequest:
		return b.handleInitProducerID(req, r)
	case *kmsg.DescribeConfigsRequest:
		return b.handleDescribeConfigs(req, r)
	case *kmsg.AlterConfigsRequest:
		return b.handleAlterConfigs(req, r)
	case *kmsg.IncrementalAlterConfigsRequest:
		return b.handleIncrementalAlterConfigs(req, r)
	case *kmsg.CreatePartitionsRequest:
		return b.handleCreatePartitions(req, r)
	case *kmsg.DescribeClusterRequest:
		return b.handleDescribeCluster(req, r)
	case *kmsg.DescribeProducersRequest:
		return b.handleDescribeProducers(req, r)
	}
	// The server only dispatches keys listed in APIs, so this is a programming error.
	b.logger.Error("no handler for advertised API", "key", req.Key)
	return server.Reply{Close: true}
}
