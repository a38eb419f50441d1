// Package client is exactq's own Go client for the Kafka protocol: a Producer, a simple
// Consumer (assigned partitions, no groups yet) and an Admin client.
//
// Every wire message is a kmsg request or response; record batches are encoded with
// kmsg.RecordBatch and kmsg.Record and compressed with package compress. Errors a broker
// returns are kerr values, so callers test them with errors.Is(err, kerr.UnknownTopicOrPartition).
//
// Layering, bottom up:
//
//	conn.go       one TCP connection: ApiVersions negotiation, request headers, pipelining
//	cluster.go    seed brokers, Metadata cache, broker id → connection
//	producer*.go  batching, partitioning, idempotence (producerid.go), retries
//	consumer.go   assigned-partition fetching with KIP-227 fetch sessions (fetchsession.go)
//	admin.go      topic, config and offset administration
//
// Each Producer, Consumer and Admin owns its own connections: a fetch long poll never
// delays a produce response queued behind it on the same pipelined connection.
package client
