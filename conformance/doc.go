// Package conformance holds black-box conformance suites: each runs a real exactq broker
// on a loopback listener (internal/testbroker), speaks the Kafka wire protocol to it over
// real TCP connections with requests built from kmsg types, and checks what Apache Kafka
// 4.4 answers in the same situation.
//
// kip932_*_test.go are the raw-RPC scenarios of KIP-932 (share groups): table 7.1 of the
// steering spec kip-932.md, one test per row, each named after the row and the Kafka test
// it ports (ShareFetchAcknowledgeRequestTest, ShareGroupHeartbeatRequestTest,
// ShareGroupDescribeRequestTest). Where a single-node broker cannot do what a row says
// (other replicas, several brokers, a moving coordinator) the test says what it checks
// instead.
//
// share_offsets_wire_test.go covers AlterShareGroupOffsets, DeleteShareGroupOffsets and
// the group admin RPCs on share groups; features_wire_test.go covers UpdateFeatures and the
// finalized features of ApiVersions.
//
// Broker behaviour the old Go client's integration tests checked, kept when the client was
// replaced by kgo: topic_admin_wire_test.go (Kafka's refusal messages for topic admin),
// fetch_session_wire_test.go (KIP-227 incremental fetch sessions over the wire),
// txn_offsets_wire_test.go (a transaction holding only consumer-group offsets, under
// transactions v1 and v2) and txn_admin_wire_test.go (ListTransactions,
// DescribeTransactions and DescribeProducers of an open, then committed, transaction).
//
// The package has no non-test code.
package conformance
