package group

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func cgEnv(t *testing.T) *env {
	topics := map[string][16]byte{"orders": {1}}
	return newEnv(t, func(c *Config) {
		c.TopicMeta = func(n string) ([16]byte, int32, bool) { id, ok := topics[n]; return id, 3, ok }
		c.TopicNames = func() []string { return []string{"orders"} }
		c.TopicName = func(id [16]byte) (string, bool) { return "orders", id == topics["orders"] }
		c.TopicID = func(n string) ([16]byte, bool) { id, ok := topics[n]; return id, ok }
	})
}

func (e *env) cgHeartbeat(version int16, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	e.t.Helper()
	ctx := WithClient(context.Background(), Client{ID: "cli", Host: "/127.0.0.1"})
	return start(e.c.ConsumerGroupHeartbeat(ctx, version, req)).get(e.t).(*kmsg.ConsumerGroupHeartbeatResponse)
}

func cgJoinRequest(group, member string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group, r.MemberID, r.RebalanceTimeoutMillis = group, member, 30000
	r.SubscribedTopicNames = topics
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return r
}

func TestConsumerGroupHeartbeatValidation(t *testing.T) {
	e := cgEnv(t)
	empty, other := "", "sticky"
	cases := []struct {
		name    string
		version int16
		mod     func(r *kmsg.ConsumerGroupHeartbeatRequest)
		code    int16
	}{
		{"v1 without member id", 1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, 42},
		{"no group", 1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, 42},
		{"empty instance id", 1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = &empty }, 42},
		{"join without rebalance timeout", 1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, 42},
		{"join owning partitions", 1, func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = append(r.Topics, kmsg.NewConsumerGroupHeartbeatRequestTopic())
		}, 42},
		{"join without subscription", 1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, 42},
		{"static leave without instance", 1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }, 42},
		{"epoch -3", 1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, 42},
		{"unknown assignor", 1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = &other }, 112},
	}
	for _, c := range cases {
		r := cgJoinRequest("g", "m1", "orders")
		c.mod(r)
		if got := e.cgHeartbeat(c.version, r); got.ErrorCode != c.code || got.ErrorMessage == nil {
			t.Errorf("%s: error %d (%v), want %d", c.name, got.ErrorCode, got.ErrorMessage, c.code)
		}
	}
	// v0 may leave the member id to the coordinator.
	r := cgJoinRequest("g", "", "orders")
	got := e.cgHeartbeat(0, r)
	if got.ErrorCode != 0 || got.MemberID == nil || len(*got.MemberID) != 22 {
		t.Fatalf("v0 join: %+v", got)
	}
}

func TestConsumerGroupSurvivesRestart(t *testing.T) {
	e := cgEnv(t)
	r := cgJoinRequest("g", "m1", "orders")
	got := e.cgHeartbeat(1, r)
	if got.ErrorCode != 0 || got.MemberEpoch != 1 || got.Assignment == nil || len(got.Assignment.Topics[0].Partitions) != 3 {
		t.Fatalf("join: %+v", got)
	}
	if got.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("heartbeat interval %d", got.HeartbeatIntervalMillis)
	}
	e.settle()
	e.restart()
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "m1", 1, -1
	if got := e.cgHeartbeat(1, hb); got.ErrorCode != 0 || got.MemberEpoch != 1 {
		t.Fatalf("heartbeat after restart: %+v", got)
	}
	d, _ := e.c.ConsumerGroupDescribe(context.Background(), 1, &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}, IncludeAuthorizedOperations: true})
	dg := d.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	if dg.ErrorCode != 0 || dg.State != "Stable" || len(dg.Members) != 1 || dg.AuthorizedOperations != AllGroupOperations {
		t.Fatalf("describe: %+v", dg)
	}
	l, _ := e.c.ListGroups(context.Background(), 5, &kmsg.ListGroupsRequest{TypesFilter: []string{"consumer"}})
	if lg := l.(*kmsg.ListGroupsResponse).Groups; len(lg) != 1 || lg[0].GroupType != "consumer" || lg[0].ProtocolType != "consumer" {
		t.Fatalf("list: %+v", lg)
	}
	// A classic join under the consumer group's id is a classic member of the consumer
	// group (online migration): first the member id, as for a classic group.
	jr := e.join(5, joinReq("g", "")).get(t).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != errMemberIDRequired || len(jr.MemberID) != 22 {
		t.Fatalf("classic join: %d %q", jr.ErrorCode, jr.MemberID)
	}
}

func TestClassicJoinToConsumerGroupWithMigrationDisabled(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.ConsumerMigrationPolicy = MigrationDisabled
		c.TopicMeta = func(string) ([16]byte, int32, bool) { return [16]byte{1}, 3, true }
	})
	if got := e.cgHeartbeat(1, cgJoinRequest("g", "m1", "orders")); got.ErrorCode != 0 {
		t.Fatalf("join: %+v", got)
	}
	jr := e.join(5, joinReq("g", "")).get(t).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != errInconsistentProtocol {
		t.Fatalf("classic join with migration disabled: %d", jr.ErrorCode)
	}
}
