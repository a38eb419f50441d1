package server

// Kafka44 lists every API key that Apache Kafka 4.4 serves on a broker listener, with the
// request versions a 4.4 broker accepts (unstable versions excluded, as with the default
// unstable.api.versions.enable=false).
//
// Source: the "validVersions", "listeners" and "latestVersionUnstable" fields of
// clients/src/main/resources/common/message/*Request.json on the 4.4 branch of
// github.com/confluentinc/kafka (Apache Kafka 4.4 code, gradle version 8.4.0-ccs), filtered to
// schemas whose listeners include "broker". ApiKeys.java (same branch) confirms the key set.
//
// kmsg v1.15.1 can decode every version listed here: its MaxVersion equals Kafka's for every
// key. The only difference is InitProducerId, where Kafka 4.4 has an unstable v6 (KIP-939
// 2PC) that kmsg does not know; a 4.4 broker does not advertise it by default either.
//
// Notes a broker using this table should know:
//   - Produce: 4.4 accepts v3-13, but a 4.4 broker advertises MinVersion 0 in ApiVersions
//     (KAFKA-18659, a librdkafka workaround; ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION).
//     The server reproduces that quirk when it builds ApiVersions responses; requests for
//     v0-2 are still rejected by closing the connection, as Kafka does.
//   - GetTelemetrySubscriptions (71) and PushTelemetry (72) are advertised by Kafka only when
//     a client telemetry exporter is configured.
//   - Keys 4-7 (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown) have no valid
//     versions since 4.0; controller-only keys (Vote, BrokerRegistration, ...) are absent.
//   - Inter-broker keys (WriteTxnMarkers, the *ShareGroupState RPCs, UnregisterBroker, ...)
//     are on the broker listener in Kafka and so are listed here; a broker that does not
//     implement them should simply leave them out of Handler.APIs.
var Kafka44 = map[int16]APIRange{
	0:  {Key: 0, MinVersion: 3, MaxVersion: 13}, // Produce
	1:  {Key: 1, MinVersion: 4, MaxVersion: 18}, // Fetch
	2:  {Key: 2, MinVersion: 1, MaxVersion: 11}, // ListOffsets
	3:  {Key: 3, MinVersion: 0, MaxVersion: 13}, // Metadata
	8:  {Key: 8, MinVersion: 2, MaxVersion: 10}, // OffsetCommit
	9:  {Key: 9, MinVersion: 1, MaxVersion: 10}, // OffsetFetch
	10: {Key: 10, MinVersion: 0, MaxVersion: 6}, // FindCoordinator
	11: {Key: 11, MinVersion: 0, MaxVersion: 9}, // JoinGroup
	12: {Key: 12, MinVersion: 0, MaxVersion: 4}, // Heartbeat
	13: {Key: 13, MinVersion: 0, MaxVersion: 5}, // LeaveGroup
	14: {Key: 14, MinVersion: 0, MaxVersion: 5}, // SyncGroup
	15: {Key: 15, MinVersion: 0, MaxVersion: 6}, // DescribeGroups
	16: {Key: 16, MinVersion: 0, MaxVersion: 5}, // ListGroups
	17: {Key: 17, MinVersion: 0, MaxVersion: 1}, // SaslHandshake
	18: {Key: 18, MinVersion: 0, MaxVersion: 5}, // ApiVersions
	19: {Key: 19, MinVersion: 2, MaxVersion: 7}, // CreateTopics
	20: {Key: 20, MinVersion: 1, MaxVersion: 6}, // DeleteTopics
	21: {Key: 21, MinVersion: 0, MaxVersion: 2}, // DeleteRecords
	22: {Key: 22, MinVersion: 0, MaxVersion: 5}, // InitProducerId (v6 unstable in 4.4, not in kmsg v1.15.1)
	23: {Key: 23, MinVersion: 2, MaxVersion: 4}, // OffsetForLeaderEpoch
	24: {Key: 24, MinVersion: 0, MaxVersion: 5}, // AddPartitionsToTxn
	25: {Key: 25, MinVersion: 0, MaxVersion: 4}, // AddOffsetsToTxn
	26: {Key: 26, MinVersion: 0, MaxVersion: 5}, // EndTxn
	27: {Key: 27, MinVersion: 1, MaxVersion: 2}, // WriteTxnMarkers
	28: {Key: 28, MinVersion: 0, MaxVersion: 6}, // TxnOffsetCommit
	29: {Key: 29, MinVersion: 1, MaxVersion: 3}, // DescribeAcls
	30: {Key: 30, MinVersion: 1, MaxVersion: 3}, // CreateAcls
	31: {Key: 31, MinVersion: 1, MaxVersion: 3}, // DeleteAcls
	32: {Key: 32, MinVersion: 1, MaxVersion: 4}, // DescribeConfigs
	33: {Key: 33, MinVersion: 0, MaxVersion: 2}, // AlterConfigs
	34: {Key: 34, MinVersion: 1, MaxVersion: 2}, // AlterReplicaLogDirs
	35: {Key: 35, MinVersion: 1, MaxVersion: 5}, // DescribeLogDirs
	36: {Key: 36, MinVersion: 0, MaxVersion: 2}, // SaslAuthenticate
	37: {Key: 37, MinVersion: 0, MaxVersion: 3}, // CreatePartitions
	38: {Key: 38, MinVersion: 1, MaxVersion: 3}, // CreateDelegationToken
	39: {Key: 39, MinVersion: 1, MaxVersion: 2}, // RenewDelegationToken
	40: {Key: 40, MinVersion: 1, MaxVersion: 2}, // ExpireDelegationToken
	41: {Key: 41, MinVersion: 1, MaxVersion: 3}, // DescribeDelegationToken
	42: {Key: 42, MinVersion: 0, MaxVersion: 3}, // DeleteGroups
	43: {Key: 43, MinVersion: 0, MaxVersion: 2}, // ElectLeaders
	44: {Key: 44, MinVersion: 0, MaxVersion: 1}, // IncrementalAlterConfigs
	45: {Key: 45, MinVersion: 0, MaxVersion: 1}, // AlterPartitionReassignments
	46: {Key: 46, MinVersion: 0, MaxVersion: 0}, // ListPartitionReassignments
	47: {Key: 47, MinVersion: 0, MaxVersion: 0}, // OffsetDelete
	48: {Key: 48, MinVersion: 0, MaxVersion: 1}, // DescribeClientQuotas
	49: {Key: 49, MinVersion: 0, MaxVersion: 1}, // AlterClientQuotas
	50: {Key: 50, MinVersion: 0, MaxVersion: 0}, // DescribeUserScramCredentials
	51: {Key: 51, MinVersion: 0, MaxVersion: 0}, // AlterUserScramCredentials
	55: {Key: 55, MinVersion: 0, MaxVersion: 2}, // DescribeQuorum
	57: {Key: 57, MinVersion: 0, MaxVersion: 2}, // UpdateFeatures
	60: {Key: 60, MinVersion: 0, MaxVersion: 2}, // DescribeCluster
	61: {Key: 61, MinVersion: 0, MaxVersion: 0}, // DescribeProducers
	64: {Key: 64, MinVersion: 0, MaxVersion: 0}, // UnregisterBroker
	65: {Key: 65, MinVersion: 0, MaxVersion: 0}, // DescribeTransactions
	66: {Key: 66, MinVersion: 0, MaxVersion: 2}, // ListTransactions
	68: {Key: 68, MinVersion: 0, MaxVersion: 1}, // ConsumerGroupHeartbeat
	69: {Key: 69, MinVersion: 0, MaxVersion: 1}, // ConsumerGroupDescribe
	71: {Key: 71, MinVersion: 0, MaxVersion: 0}, // GetTelemetrySubscriptions
	72: {Key: 72, MinVersion: 0, MaxVersion: 0}, // PushTelemetry
	74: {Key: 74, MinVersion: 0, MaxVersion: 1}, // ListConfigResources
	75: {Key: 75, MinVersion: 0, MaxVersion: 0}, // DescribeTopicPartitions
	76: {Key: 76, MinVersion: 1, MaxVersion: 1}, // ShareGroupHeartbeat
	77: {Key: 77, MinVersion: 1, MaxVersion: 1}, // ShareGroupDescribe
	78: {Key: 78, MinVersion: 1, MaxVersion: 2}, // ShareFetch
	79: {Key: 79, MinVersion: 1, MaxVersion: 2}, // ShareAcknowledge
	80: {Key: 80, MinVersion: 0, MaxVersion: 1}, // AddRaftVoter
	81: {Key: 81, MinVersion: 0, MaxVersion: 0}, // RemoveRaftVoter
	83: {Key: 83, MinVersion: 0, MaxVersion: 0}, // InitializeShareGroupState
	84: {Key: 84, MinVersion: 0, MaxVersion: 0}, // ReadShareGroupState
	85: {Key: 85, MinVersion: 0, MaxVersion: 1}, // WriteShareGroupState
	86: {Key: 86, MinVersion: 0, MaxVersion: 0}, // DeleteShareGroupState
	87: {Key: 87, MinVersion: 0, MaxVersion: 1}, // ReadShareGroupStateSummary
	88: {Key: 88, MinVersion: 0, MaxVersion: 1}, // StreamsGroupHeartbeat
	89: {Key: 89, MinVersion: 0, MaxVersion: 1}, // StreamsGroupDescribe
	90: {Key: 90, MinVersion: 0, MaxVersion: 1}, // DescribeShareGroupOffsets
	91: {Key: 91, MinVersion: 0, MaxVersion: 0}, // AlterShareGroupOffsets
	92: {Key: 92, MinVersion: 0, MaxVersion: 0}, // DeleteShareGroupOffsets
	93: {Key: 93, MinVersion: 0, MaxVersion: 0}, // StreamsGroupTopologyDescriptionUpdate
	94: {Key: 94, MinVersion: 0, MaxVersion: 0}, // UnregisterController
}
