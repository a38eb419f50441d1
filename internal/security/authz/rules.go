package authz

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/wire"
)

// The refusal codes.
var (
	topicDenied = kerr.TopicAuthorizationFailed.Code
	groupDenied = kerr.GroupAuthorizationFailed.Code
	clusterDen  = kerr.ClusterAuthorizationFailed.Code
	txnDenied   = kerr.TransactionalIDAuthorizationFailed.Code
)

func grant(rt acl.ResourceType, op acl.Operation) Grant { return Grant{Type: rt, Op: op} }

// clusterCheck is a Whole check of op on the cluster, CLUSTER_AUTHORIZATION_FAILED
// (AuthHelper.authorizeClusterOperation, which throws and answers the request's error
// response).
func clusterCheck(op acl.Operation) Check {
	return Check{AnyOf: []Grant{grant(acl.ResourceCluster, op)}, Scope: Whole, Code: clusterDen}
}

func clusterRule(key int16, name string, op acl.Operation) Rule {
	return Rule{Key: key, Name: name, Checks: []Check{clusterCheck(op)}}
}

// on adapts a typed name extractor.
func on[T kmsg.Request](f func(T, TopicNames) []string) func(kmsg.Request, TopicNames) []string {
	return func(r kmsg.Request, tn TopicNames) []string { return f(r.(T), tn) }
}

func when[T kmsg.Request](f func(T) bool) func(kmsg.Request) bool {
	return func(r kmsg.Request) bool { return f(r.(T)) }
}

// topicOf is an entry's topic: its name, or the name its id resolves to.
func topicOf(name string, id [16]byte, tn TopicNames) (string, bool) {
	if name != "" || id == [16]byte{} {
		return name, true
	}
	if tn == nil {
		return "", false
	}
	return tn(id)
}

// topicsOf collects the topics of a request's entries.
func topicsOf[E any](entries []E, tn TopicNames, f func(E) (string, [16]byte)) []string {
	var out []string
	for _, e := range entries {
		n, id := f(e)
		if t, ok := topicOf(n, id, tn); ok {
			out = append(out, t)
		}
	}
	return out
}

// namesOf collects the names of a request's entries.
func namesOf[E any](entries []E, f func(E) string) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, f(e))
	}
	return out
}

// resourcesOf collects a config request's resources.
func resourcesOf[E any](entries []E, f func(E) (kmsg.ConfigResourceType, string)) []configResource {
	out := make([]configResource, 0, len(entries))
	for _, e := range entries {
		t, n := f(e)
		out = append(out, configResource{t, n})
	}
	return out
}

func one(s string) []string { return []string{s} }

func deref(s *string) []string {
	if s == nil {
		return nil
	}
	return []string{*s}
}

// configChecks are DescribeConfigs/AlterConfigs/IncrementalAlterConfigs' per-resource
// checks of op (ConfigHelper, ControllerApis.authorizeAlterResource): a TOPIC resource on
// the topic, a GROUP on the group, BROKER, BROKER_LOGGER (clusterTypes) and CLIENT_METRICS
// on the cluster.
func configChecks[T kmsg.Request](op acl.Operation, clusterTypes []kmsg.ConfigResourceType, resources func(T) []configResource) []Check {
	of := func(types ...kmsg.ConfigResourceType) func(kmsg.Request, TopicNames) []string {
		return on(func(r T, _ TopicNames) []string {
			var out []string
			for _, res := range resources(r) {
				for _, t := range types {
					if res.typ == t {
						out = append(out, res.name)
					}
				}
			}
			return out
		})
	}
	return []Check{
		{Field: "Resources[] of type TOPIC", AnyOf: []Grant{grant(acl.ResourceTopic, op)}, Scope: Each, Code: topicDenied, names: of(kmsg.ConfigResourceTypeTopic)},
		{Field: "Resources[] of type GROUP", AnyOf: []Grant{grant(acl.ResourceGroup, op)}, Scope: Each, Code: groupDenied, names: of(kmsg.ConfigResourceTypeGroupConfig)},
		{Field: "Resources[] of type BROKER, BROKER_LOGGER or CLIENT_METRICS", AnyOf: []Grant{grant(acl.ResourceCluster, op)}, Scope: Each, Code: clusterDen,
			names: of(clusterTypes...)},
	}
}

type configResource struct {
	typ  kmsg.ConfigResourceType
	name string
}

// Rules is every API key exactq answers (Kafka 4.4's server.Kafka44 keys, less those in
// NotServed, plus KIP-1289's TxnShareAcknowledge at its default key), with its checks.
var Rules = map[int16]Rule{}

// NotServed are Kafka 4.4 keys without a rule, and why.
var NotServed = map[int16]string{
	38: "delegation tokens: exactq has none",
	39: "delegation tokens: exactq has none",
	40: "delegation tokens: exactq has none",
	41: "delegation tokens: exactq has none",
	88: "streams groups (KIP-1071): not built",
	89: "streams groups (KIP-1071): not built",
	93: "streams groups (KIP-1071): not built",
}

func add(rs ...Rule) {
	for _, r := range rs {
		if _, dup := Rules[r.Key]; dup {
			panic("authz: two rules for one key")
		}
		Rules[r.Key] = r
	}
}

func init() {
	topicRead := []Grant{grant(acl.ResourceTopic, acl.OpRead)}
	topicDescribe := []Grant{grant(acl.ResourceTopic, acl.OpDescribe)}
	groupRead := []Grant{grant(acl.ResourceGroup, acl.OpRead)}
	groupDescribe := []Grant{grant(acl.ResourceGroup, acl.OpDescribe)}
	txnWrite := []Grant{grant(acl.ResourceTransactionalID, acl.OpWrite)}

	groupRule := func(key int16, name string, group func(kmsg.Request) string) Rule {
		return Rule{Key: key, Name: name, Checks: []Check{{Field: "Group", AnyOf: groupRead, Scope: Whole, Code: groupDenied,
			names: func(r kmsg.Request, _ TopicNames) []string { return one(group(r)) }}}}
	}

	add(
		Rule{Key: 0, Name: "Produce", Checks: []Check{
			{Field: "TransactionID", AnyOf: txnWrite, Scope: Whole, Code: txnDenied, When: "the request is transactional",
				applies: when(func(r *kmsg.ProduceRequest) bool { return r.TransactionID != nil }),
				names:   on(func(r *kmsg.ProduceRequest, _ TopicNames) []string { return deref(r.TransactionID) })},
			{Field: "Topics[].Topic or TopicID", AnyOf: []Grant{grant(acl.ResourceTopic, acl.OpWrite)}, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.ProduceRequest, tn TopicNames) []string {
					return topicsOf(r.Topics, tn, func(t kmsg.ProduceRequestTopic) (string, [16]byte) { return t.Topic, t.TopicID })
				})},
		}, Notes: "Each partition of a refused topic gets TOPIC_AUTHORIZATION_FAILED. Idempotence is checked at InitProducerId."},

		Rule{Key: 1, Name: "Fetch", Checks: []Check{
			{AnyOf: []Grant{grant(acl.ResourceCluster, acl.OpClusterAction)}, Scope: Whole, Code: topicDenied,
				When: "a follower fetches (ReplicaID or ReplicaState.ID ≥ 0)", applies: when(isFollowerFetch)},
			{Field: "Topics[].Topic or TopicID", AnyOf: topicRead, Scope: Each, Code: topicDenied, When: "a consumer fetches",
				applies: when(func(r *kmsg.FetchRequest) bool { return !isFollowerFetch(r) }),
				names: on(func(r *kmsg.FetchRequest, tn TopicNames) []string {
					return topicsOf(r.Topics, tn, func(t kmsg.FetchRequestTopic) (string, [16]byte) { return t.Topic, t.TopicID })
				})},
		}, Notes: "A follower without CLUSTER_ACTION gets TOPIC_AUTHORIZATION_FAILED in every partition (top-level error NONE)."},

		Rule{Key: 2, Name: "ListOffsets", Checks: []Check{
			{Field: "Topics[].Topic", AnyOf: topicDescribe, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.ListOffsetsRequest, _ TopicNames) []string {
					return namesOf(r.Topics, func(t kmsg.ListOffsetsRequestTopic) string { return t.Topic })
				})},
		}},

		Rule{Key: 3, Name: "Metadata", Checks: []Check{
			{Field: "Topics[].Topic or TopicID", AnyOf: topicDescribe, Scope: Each, Code: topicDenied, When: "topics are named",
				names: on(func(r *kmsg.MetadataRequest, tn TopicNames) []string {
					return topicsOf(r.Topics, tn, func(t kmsg.MetadataRequestTopic) (string, [16]byte) {
						if t.Topic != nil {
							return *t.Topic, t.TopicID
						}
						return "", t.TopicID
					})
				})},
			{Field: "response: every topic", AnyOf: topicDescribe, Scope: Hide, When: "all topics are asked for (Topics null)", Deferred: true},
			{Field: "response: a topic to auto-create", AnyOf: []Grant{grant(acl.ResourceCluster, acl.OpCreate), grant(acl.ResourceTopic, acl.OpCreate)},
				Scope: Each, Code: topicDenied, When: "a named, describable topic does not exist and auto-creation is on", Deferred: true},
		}, Operations: []acl.ResourceType{acl.ResourceTopic, acl.ResourceCluster},
			Notes: "A refused named topic is answered with its name and a zero id; one named by id with a null name and its id. " +
				"Cluster operations only at v8-10 with IncludeClusterAuthorizedOperations; topic operations for the topics answered."},

		Rule{Key: 8, Name: "OffsetCommit", Checks: []Check{
			{Field: "Group", AnyOf: groupRead, Scope: Whole, Code: groupDenied,
				names: on(func(r *kmsg.OffsetCommitRequest, _ TopicNames) []string { return one(r.Group) })},
			{Field: "Topics[].Topic or TopicID", AnyOf: topicRead, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.OffsetCommitRequest, tn TopicNames) []string {
					return topicsOf(r.Topics, tn, func(t kmsg.OffsetCommitRequestTopic) (string, [16]byte) { return t.Topic, t.TopicID })
				})},
		}},

		Rule{Key: 9, Name: "OffsetFetch", Checks: []Check{
			{Field: "Group", AnyOf: groupDescribe, Scope: Whole, Code: groupDenied, When: "v0-7 (one group)",
				applies: when(func(r *kmsg.OffsetFetchRequest) bool { return r.Version < 8 }),
				names:   on(func(r *kmsg.OffsetFetchRequest, _ TopicNames) []string { return one(r.Group) })},
			{Field: "Groups[].Group", AnyOf: groupDescribe, Scope: Each, Code: groupDenied, When: "v8+",
				applies: when(func(r *kmsg.OffsetFetchRequest) bool { return r.Version >= 8 }),
				names: on(func(r *kmsg.OffsetFetchRequest, _ TopicNames) []string {
					var out []string
					for _, g := range r.Groups {
						out = append(out, g.Group)
					}
					return out
				})},
			{Field: "Topics[].Topic, Groups[].Topics[].Topic or TopicID", AnyOf: topicDescribe, Scope: Each, Code: topicDenied, When: "topics are named",
				names: on(func(r *kmsg.OffsetFetchRequest, tn TopicNames) []string {
					out := namesOf(r.Topics, func(t kmsg.OffsetFetchRequestTopic) string { return t.Topic })
					for _, g := range r.Groups {
						out = append(out, topicsOf(g.Topics, tn, func(t kmsg.OffsetFetchRequestGroupTopic) (string, [16]byte) { return t.Topic, t.TopicID })...)
					}
					return out
				})},
			{Field: "response: the group's topics", AnyOf: topicDescribe, Scope: Hide, When: "a group's topics are not named (all of them)", Deferred: true},
		}, Notes: "A refused group at v8+ gets GROUP_AUTHORIZATION_FAILED in its own entry."},

		Rule{Key: 10, Name: "FindCoordinator", Checks: []Check{
			{AnyOf: []Grant{grant(acl.ResourceCluster, acl.OpClusterAction)}, Scope: Whole, Code: clusterDen, When: "share coordinator (type 2)",
				applies: when(func(r *kmsg.FindCoordinatorRequest) bool { return r.CoordinatorType == 2 })},
			{Field: "CoordinatorKey(s)", AnyOf: groupDescribe, Scope: Each, Code: groupDenied, When: "group coordinator (type 0)",
				applies: when(func(r *kmsg.FindCoordinatorRequest) bool { return r.CoordinatorType == 0 }), names: on(coordinatorKeys)},
			{Field: "CoordinatorKey(s)", AnyOf: []Grant{grant(acl.ResourceTransactionalID, acl.OpDescribe)}, Scope: Each, Code: txnDenied,
				When: "transaction coordinator (type 1)", applies: when(func(r *kmsg.FindCoordinatorRequest) bool { return r.CoordinatorType == 1 }),
				names: on(coordinatorKeys)},
		}, Notes: "v0-3 name one key: its refusal is the response's error (node -1)."},

		groupRule(11, "JoinGroup", func(r kmsg.Request) string { return r.(*kmsg.JoinGroupRequest).Group }),
		groupRule(12, "Heartbeat", func(r kmsg.Request) string { return r.(*kmsg.HeartbeatRequest).Group }),
		groupRule(13, "LeaveGroup", func(r kmsg.Request) string { return r.(*kmsg.LeaveGroupRequest).Group }),
		groupRule(14, "SyncGroup", func(r kmsg.Request) string { return r.(*kmsg.SyncGroupRequest).Group }),

		Rule{Key: 15, Name: "DescribeGroups", Checks: []Check{
			{Field: "Groups[]", AnyOf: groupDescribe, Scope: Each, Code: groupDenied,
				names: on(func(r *kmsg.DescribeGroupsRequest, _ TopicNames) []string { return r.Groups })},
		}, Operations: []acl.ResourceType{acl.ResourceGroup}},

		Rule{Key: 16, Name: "ListGroups", Checks: []Check{
			{Field: "response: the groups listed", AnyOf: []Grant{grant(acl.ResourceCluster, acl.OpDescribe), grant(acl.ResourceGroup, acl.OpDescribe)},
				Scope: Hide, Deferred: true},
		}},

		Rule{Key: 17, Name: "SaslHandshake", Notes: "Answered by the listener before authentication; no ACL."},
		Rule{Key: 18, Name: "ApiVersions", Notes: "No ACL."},

		Rule{Key: 19, Name: "CreateTopics", Checks: []Check{
			{Field: "Topics[].Topic", AnyOf: []Grant{grant(acl.ResourceCluster, acl.OpCreate), grant(acl.ResourceTopic, acl.OpCreate)}, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.CreateTopicsRequest, _ TopicNames) []string {
					return namesOf(r.Topics, func(t kmsg.CreateTopicsRequestTopic) string { return t.Topic })
				})},
			{Field: "response: the created topic's configs", AnyOf: []Grant{grant(acl.ResourceTopic, acl.OpDescribeConfigs)}, Scope: Each,
				Code: topicDenied, Deferred: true},
		}, Notes: "A refused topic's message is \"Authorization failed.\"; without DESCRIBE_CONFIGS the configs are not returned " +
			"and TopicConfigErrorCode is TOPIC_AUTHORIZATION_FAILED."},

		Rule{Key: 20, Name: "DeleteTopics", Checks: []Check{
			{Field: "TopicNames[] or Topics[].Topic or TopicID", AnyOf: []Grant{grant(acl.ResourceCluster, acl.OpDelete), grant(acl.ResourceTopic, acl.OpDelete)},
				Scope: Each, Code: topicDenied, names: on(deleteTopicNames)},
			{Field: "response: the name of a topic named by id", AnyOf: []Grant{grant(acl.ResourceCluster, acl.OpDelete), grant(acl.ResourceTopic, acl.OpDescribe)},
				Scope: Hide, Code: topicDenied, Deferred: true},
		}, Notes: "A refused topic named by id is answered with a null name unless the client may DESCRIBE it."},

		Rule{Key: 21, Name: "DeleteRecords", Checks: []Check{
			{Field: "Topics[].Topic", AnyOf: []Grant{grant(acl.ResourceTopic, acl.OpDelete)}, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.DeleteRecordsRequest, _ TopicNames) []string {
					return namesOf(r.Topics, func(t kmsg.DeleteRecordsRequestTopic) string { return t.Topic })
				})},
		}},

		Rule{Key: 22, Name: "InitProducerId", Checks: []Check{
			{Field: "TransactionalID", AnyOf: txnWrite, Scope: Whole, Code: txnDenied, When: "TransactionalID set",
				applies: func(r kmsg.Request) bool { id, _ := initProducerID(r); return id != nil },
				names:   func(r kmsg.Request, _ TopicNames) []string { id, _ := initProducerID(r); return deref(id) }},
			{Field: "TransactionalID", AnyOf: []Grant{grant(acl.ResourceTransactionalID, acl.OpTwoPhaseCommit)}, Scope: Whole, Code: txnDenied,
				When:    "TransactionalID set and Enable2Pc (v6)",
				applies: func(r kmsg.Request) bool { id, twoPC := initProducerID(r); return id != nil && twoPC },
				names:   func(r kmsg.Request, _ TopicNames) []string { id, _ := initProducerID(r); return deref(id) }},
			{AnyOf: []Grant{grant(acl.ResourceCluster, acl.OpIdempotentWrite), {Type: acl.ResourceTopic, Op: acl.OpWrite, ByType: true}},
				Scope: Whole, Code: clusterDen, When: "no TransactionalID (an idempotent producer)",
				applies: func(r kmsg.Request) bool { id, _ := initProducerID(r); return id == nil }},
		}},

		Rule{Key: 23, Name: "OffsetForLeaderEpoch", Checks: []Check{
			{Field: "Topics[].Topic", AnyOf: []Grant{grant(acl.ResourceCluster, acl.OpClusterAction), grant(acl.ResourceTopic, acl.OpDescribe)}, Scope: Each,
				Code: topicDenied, names: on(func(r *kmsg.OffsetForLeaderEpochRequest, _ TopicNames) []string {
					return namesOf(r.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic })
				})},
		}},

		Rule{Key: 24, Name: "AddPartitionsToTxn", Checks: []Check{
			{AnyOf: []Grant{grant(acl.ResourceCluster, acl.OpClusterAction)}, Scope: Whole, Code: clusterDen, When: "v4+ (a broker verifying)",
				applies: when(func(r *kmsg.AddPartitionsToTxnRequest) bool { return r.Version >= 4 })},
			{Field: "TransactionalID", AnyOf: txnWrite, Scope: Whole, Code: txnDenied, When: "v0-3 (a client)",
				applies: when(func(r *kmsg.AddPartitionsToTxnRequest) bool { return r.Version < 4 }),
				names:   on(func(r *kmsg.AddPartitionsToTxnRequest, _ TopicNames) []string { return one(r.TransactionalID) })},
			{Field: "Topics[].Topic", AnyOf: []Grant{grant(acl.ResourceTopic, acl.OpWrite)}, Scope: Each, Code: topicDenied, When: "v0-3",
				applies: when(func(r *kmsg.AddPartitionsToTxnRequest) bool { return r.Version < 4 }),
				names: on(func(r *kmsg.AddPartitionsToTxnRequest, _ TopicNames) []string {
					return namesOf(r.Topics, func(t kmsg.AddPartitionsToTxnRequestTopic) string { return t.Topic })
				})},
		}, Notes: "An internal topic is always TOPIC_AUTHORIZATION_FAILED here; when any partition is refused the others get OPERATION_NOT_ATTEMPTED."},

		Rule{Key: 25, Name: "AddOffsetsToTxn", Checks: []Check{
			{Field: "TransactionalID", AnyOf: txnWrite, Scope: Whole, Code: txnDenied,
				names: on(func(r *kmsg.AddOffsetsToTxnRequest, _ TopicNames) []string { return one(r.TransactionalID) })},
			{Field: "Group", AnyOf: groupRead, Scope: Whole, Code: groupDenied,
				names: on(func(r *kmsg.AddOffsetsToTxnRequest, _ TopicNames) []string { return one(r.Group) })},
		}},

		Rule{Key: 26, Name: "EndTxn", Checks: []Check{
			{Field: "TransactionalID", AnyOf: txnWrite, Scope: Whole, Code: txnDenied,
				names: on(func(r *kmsg.EndTxnRequest, _ TopicNames) []string { return one(r.TransactionalID) })},
		}},

		Rule{Key: 27, Name: "WriteTxnMarkers", Checks: []Check{
			{AnyOf: []Grant{grant(acl.ResourceCluster, acl.OpAlter), grant(acl.ResourceCluster, acl.OpClusterAction)}, Scope: Whole, Code: clusterDen},
		}},

		Rule{Key: 28, Name: "TxnOffsetCommit", Checks: []Check{
			{Field: "TransactionalID", AnyOf: txnWrite, Scope: Whole, Code: txnDenied,
				names: on(func(r *kmsg.TxnOffsetCommitRequest, _ TopicNames) []string { return one(r.TransactionalID) })},
			{Field: "Group", AnyOf: groupRead, Scope: Whole, Code: groupDenied,
				names: on(func(r *kmsg.TxnOffsetCommitRequest, _ TopicNames) []string { return one(r.Group) })},
			{Field: "Topics[].Topic or TopicID", AnyOf: topicRead, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.TxnOffsetCommitRequest, tn TopicNames) []string {
					return topicsOf(r.Topics, tn, func(t kmsg.TxnOffsetCommitRequestTopic) (string, [16]byte) { return t.Topic, t.TopicID })
				})},
		}},

		clusterRule(29, "DescribeAcls", acl.OpDescribe),
		clusterRule(30, "CreateAcls", acl.OpAlter),
		clusterRule(31, "DeleteAcls", acl.OpAlter),

		Rule{Key: 32, Name: "DescribeConfigs", Checks: configChecks(acl.OpDescribeConfigs,
			[]kmsg.ConfigResourceType{kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics},
			func(r *kmsg.DescribeConfigsRequest) []configResource {
				return resourcesOf(r.Resources, func(e kmsg.DescribeConfigsRequestResource) (kmsg.ConfigResourceType, string) {
					return e.ResourceType, e.ResourceName
				})
			})},
		Rule{Key: 33, Name: "AlterConfigs", Checks: configChecks(acl.OpAlterConfigs,
			[]kmsg.ConfigResourceType{kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeClientMetrics},
			func(r *kmsg.AlterConfigsRequest) []configResource {
				return resourcesOf(r.Resources, func(e kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
					return e.ResourceType, e.ResourceName
				})
			})},

		clusterRule(34, "AlterReplicaLogDirs", acl.OpAlter),
		clusterRule(35, "DescribeLogDirs", acl.OpDescribe),
		Rule{Key: 36, Name: "SaslAuthenticate", Notes: "Answered by the listener; no ACL."},

		Rule{Key: 37, Name: "CreatePartitions", Checks: []Check{
			{Field: "Topics[].Topic", AnyOf: []Grant{grant(acl.ResourceTopic, acl.OpAlter)}, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.CreatePartitionsRequest, _ TopicNames) []string {
					return namesOf(r.Topics, func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic })
				})},
		}},

		Rule{Key: 42, Name: "DeleteGroups", Checks: []Check{
			{Field: "Groups[]", AnyOf: []Grant{grant(acl.ResourceGroup, acl.OpDelete)}, Scope: Each, Code: groupDenied,
				names: on(func(r *kmsg.DeleteGroupsRequest, _ TopicNames) []string { return r.Groups })},
		}},

		clusterRule(43, "ElectLeaders", acl.OpAlter),

		Rule{Key: 44, Name: "IncrementalAlterConfigs", Checks: configChecks(acl.OpAlterConfigs,
			[]kmsg.ConfigResourceType{kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics},
			func(r *kmsg.IncrementalAlterConfigsRequest) []configResource {
				return resourcesOf(r.Resources, func(e kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
					return e.ResourceType, e.ResourceName
				})
			})},

		clusterRule(45, "AlterPartitionReassignments", acl.OpAlter),
		clusterRule(46, "ListPartitionReassignments", acl.OpDescribe),

		Rule{Key: 47, Name: "OffsetDelete", Checks: []Check{
			{Field: "Group", AnyOf: []Grant{grant(acl.ResourceGroup, acl.OpDelete)}, Scope: Whole, Code: groupDenied,
				names: on(func(r *kmsg.OffsetDeleteRequest, _ TopicNames) []string { return one(r.Group) })},
			{Field: "Topics[].Topic", AnyOf: topicRead, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.OffsetDeleteRequest, _ TopicNames) []string {
					return namesOf(r.Topics, func(t kmsg.OffsetDeleteRequestTopic) string { return t.Topic })
				})},
		}},

		clusterRule(48, "DescribeClientQuotas", acl.OpDescribeConfigs),
		clusterRule(49, "AlterClientQuotas", acl.OpAlterConfigs),
		clusterRule(50, "DescribeUserScramCredentials", acl.OpDescribe),
		clusterRule(51, "AlterUserScramCredentials", acl.OpAlter),
		clusterRule(55, "DescribeQuorum", acl.OpDescribe),
		clusterRule(57, "UpdateFeatures", acl.OpAlter),

		Rule{Key: 60, Name: "DescribeCluster", Operations: []acl.ResourceType{acl.ResourceCluster},
			Notes: "No ACL; the cluster operations with IncludeClusterAuthorizedOperations."},

		Rule{Key: 61, Name: "DescribeProducers", Checks: []Check{
			{Field: "Topics[].Topic", AnyOf: topicRead, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.DescribeProducersRequest, _ TopicNames) []string {
					return namesOf(r.Topics, func(t kmsg.DescribeProducersRequestTopic) string { return t.Topic })
				})},
		}},

		clusterRule(64, "UnregisterBroker", acl.OpAlter),

		Rule{Key: 65, Name: "DescribeTransactions", Checks: []Check{
			{Field: "TransactionalIDs[]", AnyOf: []Grant{grant(acl.ResourceTransactionalID, acl.OpDescribe)}, Scope: Each, Code: txnDenied,
				names: on(func(r *kmsg.DescribeTransactionsRequest, _ TopicNames) []string { return r.TransactionalIDs })},
			{Field: "response: each transaction's topics", AnyOf: topicDescribe, Scope: Hide, Deferred: true},
		}},

		Rule{Key: 66, Name: "ListTransactions", Checks: []Check{
			{Field: "response: the transactional ids listed", AnyOf: []Grant{grant(acl.ResourceTransactionalID, acl.OpDescribe)}, Scope: Hide, Deferred: true},
		}},

		Rule{Key: 68, Name: "ConsumerGroupHeartbeat", Checks: []Check{
			{Field: "Group", AnyOf: groupRead, Scope: Whole, Code: groupDenied,
				names: on(func(r *kmsg.ConsumerGroupHeartbeatRequest, _ TopicNames) []string { return one(r.Group) })},
			{Field: "SubscribedTopicNames[]", AnyOf: topicDescribe, Scope: Whole, Code: topicDenied, When: "SubscribedTopicNames given",
				names: on(func(r *kmsg.ConsumerGroupHeartbeatRequest, _ TopicNames) []string { return r.SubscribedTopicNames })},
		}, Notes: "A regular-expression subscription is resolved by the coordinator to the topics the member may DESCRIBE."},

		Rule{Key: 69, Name: "ConsumerGroupDescribe", Checks: []Check{
			{Field: "Groups[]", AnyOf: groupDescribe, Scope: Each, Code: groupDenied,
				names: on(func(r *kmsg.ConsumerGroupDescribeRequest, _ TopicNames) []string { return r.Groups })},
			{Field: "response: the topics of the group's members", AnyOf: topicDescribe, Scope: Each, Code: topicDenied, Deferred: true},
		}, Operations: []acl.ResourceType{acl.ResourceGroup},
			Notes: "A group with a member on a topic the client may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, " +
				"\"The group has described topic(s) that the client is not authorized to describe.\""},

		Rule{Key: 71, Name: "GetTelemetrySubscriptions", Notes: "No ACL."},
		Rule{Key: 72, Name: "PushTelemetry", Notes: "No ACL."},
		clusterRule(74, "ListConfigResources", acl.OpDescribeConfigs),

		Rule{Key: 75, Name: "DescribeTopicPartitions", Checks: []Check{
			{Field: "Topics[].Topic", AnyOf: topicDescribe, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.DescribeTopicPartitionsRequest, _ TopicNames) []string {
					return namesOf(r.Topics, func(t kmsg.DescribeTopicPartitionsRequestTopic) string { return t.Topic })
				})},
			{Field: "response: every topic", AnyOf: topicDescribe, Scope: Hide, When: "no topics are named", Deferred: true},
		}, Operations: []acl.ResourceType{acl.ResourceTopic}, Notes: "A refused topic is answered with a zero id."},

		Rule{Key: 76, Name: "ShareGroupHeartbeat", Checks: []Check{
			{Field: "GroupID", AnyOf: groupRead, Scope: Whole, Code: groupDenied,
				names: on(func(r *kmsg.ShareGroupHeartbeatRequest, _ TopicNames) []string { return one(r.GroupID) })},
			{Field: "SubscribedTopicNames[]", AnyOf: topicDescribe, Scope: Whole, Code: topicDenied, When: "SubscribedTopicNames given",
				names: on(func(r *kmsg.ShareGroupHeartbeatRequest, _ TopicNames) []string { return r.SubscribedTopicNames })},
		}},

		Rule{Key: 77, Name: "ShareGroupDescribe", Checks: []Check{
			{Field: "GroupIDs[]", AnyOf: groupDescribe, Scope: Each, Code: groupDenied,
				names: on(func(r *kmsg.ShareGroupDescribeRequest, _ TopicNames) []string { return r.GroupIDs })},
			{Field: "response: the topics of the group's members", AnyOf: topicDescribe, Scope: Each, Code: topicDenied, Deferred: true},
		}, Operations: []acl.ResourceType{acl.ResourceGroup},
			Notes: "As ConsumerGroupDescribe for a member's topics the client may not DESCRIBE."},

		Rule{Key: 78, Name: "ShareFetch", Checks: []Check{
			{Field: "GroupID", AnyOf: groupRead, Scope: Whole, Code: groupDenied,
				names: on(func(r *kmsg.ShareFetchRequest, _ TopicNames) []string { return deref(r.GroupID) })},
			{Field: "Topics[].TopicID", AnyOf: topicRead, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.ShareFetchRequest, tn TopicNames) []string {
					return topicsOf(r.Topics, tn, func(t kmsg.ShareFetchRequestTopic) (string, [16]byte) { return "", t.TopicID })
				})},
		}, Notes: "A refused partition's fetch and its piggy-backed acknowledgements both get TOPIC_AUTHORIZATION_FAILED."},

		Rule{Key: 79, Name: "ShareAcknowledge", Checks: []Check{
			{Field: "GroupID", AnyOf: groupRead, Scope: Whole, Code: groupDenied,
				names: on(func(r *kmsg.ShareAcknowledgeRequest, _ TopicNames) []string { return deref(r.GroupID) })},
			{Field: "Topics[].TopicID", AnyOf: topicRead, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.ShareAcknowledgeRequest, tn TopicNames) []string {
					return topicsOf(r.Topics, tn, func(t kmsg.ShareAcknowledgeRequestTopic) (string, [16]byte) { return "", t.TopicID })
				})},
		}},

		clusterRule(80, "AddRaftVoter", acl.OpAlter),
		clusterRule(81, "RemoveRaftVoter", acl.OpAlter),
		clusterRule(83, "InitializeShareGroupState", acl.OpClusterAction),
		clusterRule(84, "ReadShareGroupState", acl.OpClusterAction),
		clusterRule(85, "WriteShareGroupState", acl.OpClusterAction),
		clusterRule(86, "DeleteShareGroupState", acl.OpClusterAction),
		clusterRule(87, "ReadShareGroupStateSummary", acl.OpClusterAction),

		Rule{Key: 90, Name: "DescribeShareGroupOffsets", Checks: []Check{
			{Field: "Groups[].GroupID", AnyOf: groupDescribe, Scope: Each, Code: groupDenied,
				names: on(func(r *kmsg.DescribeShareGroupOffsetsRequest, _ TopicNames) []string {
					var out []string
					for _, g := range r.Groups {
						out = append(out, g.GroupID)
					}
					return out
				})},
			{Field: "Groups[].Topics[].Topic", AnyOf: topicDescribe, Scope: Each, Code: topicDenied, When: "topics are named",
				names: on(func(r *kmsg.DescribeShareGroupOffsetsRequest, _ TopicNames) []string {
					var out []string
					for _, g := range r.Groups {
						out = append(out, namesOf(g.Topics, func(t kmsg.DescribeShareGroupOffsetsRequestGroupTopic) string { return t.Topic })...)
					}
					return out
				})},
			{Field: "response: the group's topics", AnyOf: topicDescribe, Scope: Hide, When: "a group's topics are not named (all of them)", Deferred: true},
		}},

		Rule{Key: 91, Name: "AlterShareGroupOffsets", Checks: []Check{
			{Field: "GroupID", AnyOf: groupRead, Scope: Whole, Code: groupDenied,
				names: on(func(r *kmsg.AlterShareGroupOffsetsRequest, _ TopicNames) []string { return one(r.GroupID) })},
			{Field: "Topics[].Topic", AnyOf: topicRead, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.AlterShareGroupOffsetsRequest, _ TopicNames) []string {
					return namesOf(r.Topics, func(t kmsg.AlterShareGroupOffsetsRequestTopic) string { return t.Topic })
				})},
		}},

		Rule{Key: 92, Name: "DeleteShareGroupOffsets", Checks: []Check{
			{Field: "GroupID", AnyOf: []Grant{grant(acl.ResourceGroup, acl.OpDelete)}, Scope: Whole, Code: groupDenied,
				names: on(func(r *kmsg.DeleteShareGroupOffsetsRequest, _ TopicNames) []string { return one(r.GroupID) })},
			{Field: "Topics[].Topic", AnyOf: topicRead, Scope: Each, Code: topicDenied,
				names: on(func(r *kmsg.DeleteShareGroupOffsetsRequest, _ TopicNames) []string {
					return namesOf(r.Topics, func(t kmsg.DeleteShareGroupOffsetsRequestTopic) string { return t.Topic })
				})},
		}},

		clusterRule(94, "UnregisterController", acl.OpAlter),

		Rule{Key: wire.TxnShareAcknowledgeDefaultKey, Name: "TxnShareAcknowledge", Checks: []Check{
			{Field: "TransactionalID", AnyOf: txnWrite, Scope: Whole, Code: txnDenied, When: "TransactionalID set",
				applies: when(func(r *wire.TxnShareAcknowledgeRequest) bool { return r.TransactionalID != nil }),
				names:   on(func(r *wire.TxnShareAcknowledgeRequest, _ TopicNames) []string { return deref(r.TransactionalID) })},
			{Field: "GroupID", AnyOf: groupRead, Scope: Whole, Code: groupDenied,
				names: on(func(r *wire.TxnShareAcknowledgeRequest, _ TopicNames) []string { return one(r.GroupID) })},
			{Field: "Topics[].TopicID", AnyOf: topicRead, Scope: Each, Code: topicDenied,
				names: on(func(r *wire.TxnShareAcknowledgeRequest, tn TopicNames) []string {
					return topicsOf(r.Topics, tn, func(t wire.TxnShareAcknowledgeRequestTopic) (string, [16]byte) { return "", t.TopicID })
				})},
		}, Notes: "KIP-1289, exactq's own message: the producer's transactional id, the share group's READ and each source topic's READ, " +
			"as ShareAcknowledge plus the transactional check of TxnOffsetCommit."},
	)
}

func isFollowerFetch(r *kmsg.FetchRequest) bool {
	if r.Version >= 15 {
		return r.ReplicaState.ID >= 0
	}
	return r.ReplicaID >= 0
}

func coordinatorKeys(r *kmsg.FindCoordinatorRequest, _ TopicNames) []string {
	if r.Version >= 4 {
		return r.CoordinatorKeys
	}
	return one(r.CoordinatorKey)
}

func deleteTopicNames(r *kmsg.DeleteTopicsRequest, tn TopicNames) []string {
	if r.Version < 6 {
		return r.TopicNames
	}
	return topicsOf(r.Topics, tn, func(t kmsg.DeleteTopicsRequestTopic) (string, [16]byte) {
		if t.Topic != nil {
			return *t.Topic, t.TopicID
		}
		return "", t.TopicID
	})
}

// initProducerID reads InitProducerId from kmsg's type or exactq's (v6, KIP-939).
func initProducerID(r kmsg.Request) (id *string, twoPC bool) {
	switch r := r.(type) {
	case *kmsg.InitProducerIDRequest:
		return r.TransactionalID, false
	case *wire.InitProducerIDRequest:
		return r.TransactionalID, r.Version >= 6 && r.Enable2Pc
	}
	return nil, false
}
