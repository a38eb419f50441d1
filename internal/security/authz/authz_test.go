package authz_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/internal/security/authz"
	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/wire"
)

// The names every sample request uses.
const (
	topicName = "orders"
	groupName = "billing"
	txnName   = "tx-billing"
)

var topicID = [16]byte{7}

func names(id [16]byte) (string, bool) {
	if id == topicID {
		return topicName, true
	}
	return "", false
}

func strp(s string) *string { return &s }

func latest(key int16) kmsg.Request {
	r := kmsg.RequestForKey(key)
	r.SetVersion(r.MaxVersion())
	return r
}

// samples are requests of each key naming topicName (by name, and by id where the
// message has ids), groupName and txnName in every field a check reads; several per key
// where the checks depend on the version or a flag.
func samples(key int16) []kmsg.Request {
	switch key {
	case 0:
		r := latest(0).(*kmsg.ProduceRequest)
		r.TransactionID = strp(txnName)
		r.Topics = []kmsg.ProduceRequestTopic{{TopicID: topicID}}
		old := kmsg.NewPtrProduceRequest()
		old.Version = 12
		old.Topics = []kmsg.ProduceRequestTopic{{Topic: topicName}}
		return []kmsg.Request{r, old}
	case 1:
		r := latest(1).(*kmsg.FetchRequest)
		r.Topics = []kmsg.FetchRequestTopic{{TopicID: topicID}}
		f := latest(1).(*kmsg.FetchRequest)
		f.ReplicaState.ID = 2
		return []kmsg.Request{r, f}
	case 2:
		r := latest(2).(*kmsg.ListOffsetsRequest)
		r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: topicName}}
		return []kmsg.Request{r}
	case 3:
		r := latest(3).(*kmsg.MetadataRequest)
		r.Topics = []kmsg.MetadataRequestTopic{{Topic: strp(topicName)}, {TopicID: topicID}}
		return []kmsg.Request{r}
	case 8:
		r := latest(8).(*kmsg.OffsetCommitRequest)
		r.Group = groupName
		r.Topics = []kmsg.OffsetCommitRequestTopic{{TopicID: topicID}}
		return []kmsg.Request{r}
	case 9:
		old := kmsg.NewPtrOffsetFetchRequest()
		old.Version = 7
		old.Group, old.Topics = groupName, []kmsg.OffsetFetchRequestTopic{{Topic: topicName}}
		r := latest(9).(*kmsg.OffsetFetchRequest)
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: groupName, Topics: []kmsg.OffsetFetchRequestGroupTopic{{TopicID: topicID}}}}
		return []kmsg.Request{old, r}
	case 10:
		var out []kmsg.Request
		for _, typ := range []int8{0, 1, 2} {
			r := latest(10).(*kmsg.FindCoordinatorRequest)
			r.CoordinatorType = typ
			r.CoordinatorKeys = []string{map[int8]string{0: groupName, 1: txnName, 2: groupName + ":" + "x:0"}[typ]}
			out = append(out, r)
		}
		return out
	case 11:
		r := latest(11).(*kmsg.JoinGroupRequest)
		r.Group = groupName
		return []kmsg.Request{r}
	case 12:
		r := latest(12).(*kmsg.HeartbeatRequest)
		r.Group = groupName
		return []kmsg.Request{r}
	case 13:
		r := latest(13).(*kmsg.LeaveGroupRequest)
		r.Group = groupName
		return []kmsg.Request{r}
	case 14:
		r := latest(14).(*kmsg.SyncGroupRequest)
		r.Group = groupName
		return []kmsg.Request{r}
	case 15:
		r := latest(15).(*kmsg.DescribeGroupsRequest)
		r.Groups = []string{groupName}
		return []kmsg.Request{r}
	case 19:
		r := latest(19).(*kmsg.CreateTopicsRequest)
		r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: topicName}}
		return []kmsg.Request{r}
	case 20:
		r := latest(20).(*kmsg.DeleteTopicsRequest)
		r.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: topicID}}
		old := kmsg.NewPtrDeleteTopicsRequest()
		old.Version = 5
		old.TopicNames = []string{topicName}
		return []kmsg.Request{r, old}
	case 21:
		r := latest(21).(*kmsg.DeleteRecordsRequest)
		r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: topicName}}
		return []kmsg.Request{r}
	case 22:
		idem := latest(22).(*kmsg.InitProducerIDRequest)
		txn := latest(22).(*kmsg.InitProducerIDRequest)
		txn.TransactionalID = strp(txnName)
		twoPC := wire.NewPtrInitProducerIDRequest()
		twoPC.Version, twoPC.TransactionalID, twoPC.Enable2Pc = 6, strp(txnName), true
		return []kmsg.Request{idem, txn, twoPC}
	case 23:
		r := latest(23).(*kmsg.OffsetForLeaderEpochRequest)
		r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: topicName}}
		return []kmsg.Request{r}
	case 24:
		old := kmsg.NewPtrAddPartitionsToTxnRequest()
		old.Version = 3
		old.TransactionalID, old.Topics = txnName, []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topicName}}
		return []kmsg.Request{old, latest(24)}
	case 25:
		r := latest(25).(*kmsg.AddOffsetsToTxnRequest)
		r.TransactionalID, r.Group = txnName, groupName
		return []kmsg.Request{r}
	case 26:
		r := latest(26).(*kmsg.EndTxnRequest)
		r.TransactionalID = txnName
		return []kmsg.Request{r}
	case 28:
		r := latest(28).(*kmsg.TxnOffsetCommitRequest)
		r.TransactionalID, r.Group = txnName, groupName
		r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{TopicID: topicID}}
		return []kmsg.Request{r}
	case 32:
		r := latest(32).(*kmsg.DescribeConfigsRequest)
		for _, t := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeBroker} {
			r.Resources = append(r.Resources, kmsg.DescribeConfigsRequestResource{ResourceType: t, ResourceName: configName(t)})
		}
		return []kmsg.Request{r}
	case 33:
		r := latest(33).(*kmsg.AlterConfigsRequest)
		for _, t := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeBroker} {
			r.Resources = append(r.Resources, kmsg.AlterConfigsRequestResource{ResourceType: t, ResourceName: configName(t)})
		}
		return []kmsg.Request{r}
	case 37:
		r := latest(37).(*kmsg.CreatePartitionsRequest)
		r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: topicName}}
		return []kmsg.Request{r}
	case 42:
		r := latest(42).(*kmsg.DeleteGroupsRequest)
		r.Groups = []string{groupName}
		return []kmsg.Request{r}
	case 44:
		r := latest(44).(*kmsg.IncrementalAlterConfigsRequest)
		for _, t := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeBrokerLogger} {
			r.Resources = append(r.Resources, kmsg.IncrementalAlterConfigsRequestResource{ResourceType: t, ResourceName: configName(t)})
		}
		return []kmsg.Request{r}
	case 47:
		r := latest(47).(*kmsg.OffsetDeleteRequest)
		r.Group, r.Topics = groupName, []kmsg.OffsetDeleteRequestTopic{{Topic: topicName}}
		return []kmsg.Request{r}
	case 61:
		r := latest(61).(*kmsg.DescribeProducersRequest)
		r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: topicName}}
		return []kmsg.Request{r}
	case 65:
		r := latest(65).(*kmsg.DescribeTransactionsRequest)
		r.TransactionalIDs = []string{txnName}
		return []kmsg.Request{r}
	case 68:
		r := latest(68).(*kmsg.ConsumerGroupHeartbeatRequest)
		r.Group, r.SubscribedTopicNames = groupName, []string{topicName}
		return []kmsg.Request{r}
	case 69:
		r := latest(69).(*kmsg.ConsumerGroupDescribeRequest)
		r.Groups = []string{groupName}
		return []kmsg.Request{r}
	case 75:
		r := latest(75).(*kmsg.DescribeTopicPartitionsRequest)
		r.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: topicName}}
		return []kmsg.Request{r}
	case 76:
		r := latest(76).(*kmsg.ShareGroupHeartbeatRequest)
		r.GroupID, r.SubscribedTopicNames = groupName, []string{topicName}
		return []kmsg.Request{r}
	case 77:
		r := latest(77).(*kmsg.ShareGroupDescribeRequest)
		r.GroupIDs = []string{groupName}
		return []kmsg.Request{r}
	case 78:
		r := latest(78).(*kmsg.ShareFetchRequest)
		r.GroupID, r.Topics = strp(groupName), []kmsg.ShareFetchRequestTopic{{TopicID: topicID}}
		return []kmsg.Request{r}
	case 79:
		r := latest(79).(*kmsg.ShareAcknowledgeRequest)
		r.GroupID, r.Topics = strp(groupName), []kmsg.ShareAcknowledgeRequestTopic{{TopicID: topicID}}
		return []kmsg.Request{r}
	case 90:
		r := latest(90).(*kmsg.DescribeShareGroupOffsetsRequest)
		r.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: groupName,
			Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topicName}}}}
		return []kmsg.Request{r}
	case 91:
		r := latest(91).(*kmsg.AlterShareGroupOffsetsRequest)
		r.GroupID, r.Topics = groupName, []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: topicName}}
		return []kmsg.Request{r}
	case 92:
		r := latest(92).(*kmsg.DeleteShareGroupOffsetsRequest)
		r.GroupID, r.Topics = groupName, []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: topicName}}
		return []kmsg.Request{r}
	case wire.TxnShareAcknowledgeDefaultKey:
		r := wire.NewPtrTxnShareAcknowledgeRequest()
		r.APIKey = 1095 // served at another key: still its rule
		r.TransactionalID, r.GroupID = strp(txnName), groupName
		r.Topics = []wire.TxnShareAcknowledgeRequestTopic{{TopicID: topicID}}
		return []kmsg.Request{r}
	}
	return []kmsg.Request{latest(key)}
}

func configName(t kmsg.ConfigResourceType) string {
	switch t {
	case kmsg.ConfigResourceTypeTopic:
		return topicName
	case kmsg.ConfigResourceTypeGroupConfig:
		return groupName
	}
	return "1" // a broker id
}

// TestEveryKeyHasARule: every key Kafka 4.4 serves on a broker has checks or a reason it
// is not served, and the checks are well formed.
func TestEveryKeyHasARule(t *testing.T) {
	for key := range server.Kafka44 {
		_, ruled := authz.Rules[key]
		_, skipped := authz.NotServed[key]
		if ruled == skipped {
			t.Errorf("key %d: rule %v, not served %v", key, ruled, skipped)
		}
	}
	if _, ok := authz.Rules[wire.TxnShareAcknowledgeDefaultKey]; !ok {
		t.Error("no rule for TxnShareAcknowledge")
	}
	for key, r := range authz.Rules {
		if r.Key != key || r.Name == "" || (len(r.Checks) == 0 && r.Notes == "") {
			t.Errorf("key %d: rule %+v", key, r)
		}
		for i, ch := range r.Checks {
			if len(ch.AnyOf) == 0 || (ch.Scope != authz.Hide && ch.Code == 0) {
				t.Errorf("%s check %d: %+v", r.Name, i, ch)
			}
		}
	}
}

const principal = "User:client"

var client = acl.Client{Principal: acl.Principal{Type: "User", Name: "client"}, Host: "192.0.2.7"}

func allow(rt acl.ResourceType, pt acl.PatternType, name string, op acl.Operation) acl.ACL {
	return acl.ACL{Binding: acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*",
		Operation: op, Permission: acl.Allow}}
}

// grantACLs are the ACLs that give g for the resources names: literal (or, by pattern,
// a prefix of the name or the wildcard), on the cluster, or for a by-type grant an ACL
// on some other resource of the type.
func grantACLs(g authz.Grant, names []string, pattern string) []acl.ACL {
	switch {
	case g.ByType:
		return []acl.ACL{allow(g.Type, acl.PatternLiteral, "some-other-"+g.Type.String(), g.Op)}
	case g.Type == acl.ResourceCluster:
		return []acl.ACL{allow(g.Type, acl.PatternLiteral, acl.ClusterName, g.Op)}
	}
	var out []acl.ACL
	for _, n := range names {
		switch pattern {
		case "prefixed":
			out = append(out, allow(g.Type, acl.PatternPrefixed, n[:1], g.Op))
		case "wildcard":
			out = append(out, allow(g.Type, acl.PatternLiteral, acl.Wildcard, g.Op))
		default:
			out = append(out, allow(g.Type, acl.PatternLiteral, n, g.Op))
		}
	}
	return out
}

func authorizer(t *testing.T, acls []acl.ACL) *acl.Authorizer {
	t.Helper()
	for i := range acls {
		acls[i].ID = acl.ID{byte(i >> 8), byte(i), 1}
	}
	ix, err := acl.NewIndex(acls)
	if err != nil {
		t.Fatal(err)
	}
	return acl.New(acl.Config{}, ix)
}

// TestMatrix is the authorization matrix, generated from the table: for every API and
// every check Authorize makes on a sample request, without the check's ACL the request
// gets the check's code (for the whole request, or for the named resources), and with
// it (any alternative; literal, prefixed or wildcard patterns) the request passes; a DENY
// beside the ALLOW refuses again.
func TestMatrix(t *testing.T) {
	for key, rule := range authz.Rules {
		for si, req := range samples(key) {
			checks := authz.Applied(rule, req, names)
			if len(checks) == 0 {
				continue
			}
			name := fmt.Sprintf("%d-%s-sample%d", key, rule.Name, si)
			t.Run(name, func(t *testing.T) {
				everything := func(except int) []acl.ACL {
					var out []acl.ACL
					for i, a := range checks {
						if i != except {
							out = append(out, grantACLs(a.Check.AnyOf[0], a.Names, "literal")...)
						}
					}
					return out
				}
				if d, err := authz.Authorize(authorizer(t, everything(-1)), client, req, names); err != nil || !d.Allowed() {
					t.Fatalf("with every grant: %+v, %v", d, err)
				}
				if d, _ := authz.Authorize(authorizer(t, nil), client, req, names); d.Allowed() {
					t.Fatalf("with no ACL at all: allowed")
				}
				for i, a := range checks {
					d, _ := authz.Authorize(authorizer(t, everything(i)), client, req, names)
					expectRefused(t, a, d)
					for _, g := range a.Check.AnyOf {
						for _, pattern := range []string{"literal", "prefixed", "wildcard"} {
							acls := append(everything(i), grantACLs(g, a.Names, pattern)...)
							if d, _ := authz.Authorize(authorizer(t, acls), client, req, names); !d.Allowed() {
								t.Errorf("check %q granted %v (%s): %+v", a.Check.Field, g, pattern, d)
							}
						}
					}
					if a.Check.AnyOf[0].ByType {
						continue
					}
					// DENY wins: deny every alternative beside the ALLOW.
					acls := everything(-1)
					for _, g := range a.Check.AnyOf {
						for _, ga := range grantACLs(g, a.Names, "literal") {
							ga.Permission = acl.Deny
							acls = append(acls, ga)
						}
					}
					d, _ = authz.Authorize(authorizer(t, acls), client, req, names)
					expectRefused(t, a, d)
				}
			})
		}
	}
}

func expectRefused(t *testing.T, a authz.AppliedCheck, d authz.Decision) {
	t.Helper()
	ch := a.Check
	switch ch.Scope {
	case authz.Whole:
		if d.Code != ch.Code {
			t.Errorf("check %q refused: whole-request code %d, want %d (%+v)", ch.Field, d.Code, ch.Code, d)
		}
	default:
		for _, n := range a.Names {
			res := authz.Resource{Type: a.Type, Name: n}
			got, ok := d.Refused[res]
			if ch.Scope == authz.Hide {
				got, ok = d.Hidden[res]
			}
			if !ok || got != ch.Code || d.Code != 0 {
				t.Errorf("check %q refused: %v got %d (present %v), want %d; %+v", ch.Field, res, got, ok, ch.Code, d)
			}
		}
	}
}

// TestKafkaCases: decisions of particular APIs that the matrix's shape does not show.
func TestKafkaCases(t *testing.T) {
	topicRead := allow(acl.ResourceTopic, acl.PatternLiteral, topicName, acl.OpRead)
	groupRead := allow(acl.ResourceGroup, acl.PatternLiteral, groupName, acl.OpRead)

	// ShareFetch: READ on the group and the topic; with DESCRIBE only on the topic, the
	// topic is refused and the request goes on.
	sf := samples(78)[0]
	az := authorizer(t, []acl.ACL{groupRead, allow(acl.ResourceTopic, acl.PatternLiteral, topicName, acl.OpDescribe)})
	d, _ := authz.Authorize(az, client, sf, names)
	if d.Code != 0 || d.TopicCode(topicName) != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("ShareFetch with topic DESCRIBE: %+v", d)
	}
	// ShareGroupHeartbeat: group READ and topic DESCRIBE, which READ implies.
	if d, _ := authz.Authorize(authorizer(t, []acl.ACL{groupRead, topicRead}), client, samples(76)[0], names); !d.Allowed() {
		t.Errorf("ShareGroupHeartbeat with group READ, topic READ: %+v", d)
	}
	// A topic unauthorized for DESCRIBE fails the whole heartbeat.
	if d, _ := authz.Authorize(authorizer(t, []acl.ACL{groupRead}), client, samples(76)[0], names); d.Code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("ShareGroupHeartbeat without topic DESCRIBE: %+v", d)
	}
	// TxnShareAcknowledge: without transactional-id WRITE nothing else matters.
	tsa := samples(wire.TxnShareAcknowledgeDefaultKey)[0]
	if d, _ := authz.Authorize(authorizer(t, []acl.ACL{groupRead, topicRead}), client, tsa, names); d.Code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("TxnShareAcknowledge without txn WRITE: %+v", d)
	}
	// InitProducerId of an idempotent producer: WRITE on any topic is enough (Kafka's
	// authorizeByResourceType), unless a wildcard DENY covers the type.
	idem := samples(22)[0]
	anyTopic := allow(acl.ResourceTopic, acl.PatternPrefixed, "logs-", acl.OpWrite)
	if d, _ := authz.Authorize(authorizer(t, []acl.ACL{anyTopic}), client, idem, names); !d.Allowed() {
		t.Errorf("idempotent InitProducerId with WRITE on a prefix: %+v", d)
	}
	denyAll := allow(acl.ResourceTopic, acl.PatternLiteral, acl.Wildcard, acl.OpWrite)
	denyAll.Permission = acl.Deny
	if d, _ := authz.Authorize(authorizer(t, []acl.ACL{anyTopic, denyAll}), client, idem, names); d.Code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("idempotent InitProducerId under a wildcard DENY: %+v", d)
	}
	// Metadata of all topics hides those the client may not describe (a deferred check).
	hide, ok := authz.Deferred(3, "response: every topic")
	if !ok || hide.Allows(authorizer(t, nil), client, topicName) || !hide.Allows(authorizer(t, []acl.ACL{topicRead}), client, topicName) {
		t.Errorf("Metadata's hiding: %+v %v", hide, ok)
	}
	// ListGroups: DESCRIBE on the cluster shows every group.
	lg, _ := authz.Deferred(16, "response: the groups listed")
	if !lg.Allows(authorizer(t, []acl.ACL{allow(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, acl.OpDescribe)}), client, "any") {
		t.Error("ListGroups with cluster DESCRIBE hides a group")
	}
	// Config resources: a broker's configs are the cluster's.
	dc := samples(32)[0]
	d, _ = authz.Authorize(authorizer(t, []acl.ACL{allow(acl.ResourceTopic, acl.PatternLiteral, topicName, acl.OpAlterConfigs),
		allow(acl.ResourceGroup, acl.PatternLiteral, groupName, acl.OpDescribeConfigs)}), client, dc, names)
	if d.TopicCode(topicName) != 0 || d.GroupCode(groupName) != 0 ||
		d.Refused[authz.Resource{Type: acl.ResourceCluster, Name: "1"}] != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("DescribeConfigs: %+v", d)
	}
	// Topic ids resolve to names; an unknown id is the handler's (no check).
	unknown := kmsg.NewPtrShareAcknowledgeRequest()
	unknown.Version, unknown.GroupID = 2, strp(groupName)
	unknown.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: [16]byte{9}}}
	if d, _ := authz.Authorize(authorizer(t, []acl.ACL{groupRead}), client, unknown, names); !d.Allowed() {
		t.Errorf("an unknown topic id: %+v", d)
	}
}

func TestOperations(t *testing.T) {
	az := authorizer(t, []acl.ACL{
		allow(acl.ResourceTopic, acl.PatternLiteral, topicName, acl.OpRead),
		allow(acl.ResourceGroup, acl.PatternPrefixed, "bill", acl.OpAll),
		allow(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, acl.OpCreate),
	})
	bits := func(ops ...acl.Operation) int32 {
		var b int32
		for _, op := range ops {
			b |= 1 << op
		}
		return b
	}
	if got, want := authz.Operations(az, client, acl.ResourceTopic, topicName), bits(acl.OpRead, acl.OpDescribe); got != want {
		t.Errorf("topic operations %b, want %b", got, want)
	}
	if got, want := authz.Operations(az, client, acl.ResourceGroup, groupName),
		bits(acl.OpRead, acl.OpDelete, acl.OpDescribe, acl.OpDescribeConfigs, acl.OpAlterConfigs); got != want {
		t.Errorf("group operations %b, want %b", got, want)
	}
	// CREATE on the cluster without DESCRIBE: Kafka answers 0.
	if got := authz.Operations(az, client, acl.ResourceCluster, ""); got != 0 {
		t.Errorf("cluster operations without DESCRIBE %b, want 0", got)
	}
	az = authorizer(t, []acl.ACL{allow(acl.ResourceCluster, acl.PatternLiteral, acl.ClusterName, acl.OpAlter)})
	if got, want := authz.Operations(az, client, acl.ResourceCluster, ""), bits(acl.OpAlter, acl.OpDescribe); got != want {
		t.Errorf("cluster operations with ALTER %b, want %b", got, want)
	}
	for _, r := range authz.Rules {
		if slices.Contains(r.Operations, acl.ResourceUser) {
			t.Errorf("%s reports user operations", r.Name)
		}
	}
}
