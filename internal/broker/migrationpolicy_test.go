package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// group.consumer.migration.policy is read from the broker config: a classic member may
// join a consumer-protocol group under Kafka's default (bidirectional), and gets
// INCONSISTENT_GROUP_PROTOCOL when the policy is disabled (the value is case-insensitive,
// as Kafka's).
func TestConsumerMigrationPolicyOverTheWire(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   int16
	}{
		{"", kerr.MemberIDRequired.Code},
		{"DISABLED", kerr.InconsistentGroupProtocol.Code},
	} {
		t.Run("policy="+tc.policy, func(t *testing.T) {
			cfg := map[string]string{}
			if tc.policy != "" {
				cfg["group.consumer.migration.policy"] = tc.policy
			}
			tb := testbroker.Start(t, testbroker.WithConfig(cfg))
			cl := newClient(t, tb.Addr)
			hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			hb.Group, hb.MemberID, hb.MemberEpoch = "mixed", "m-consumer-protocol", 0
			hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = 10000, []string{"orders"}
			hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			resp, err := hb.RequestWith(ctxT(t), cl)
			if err != nil || resp.ErrorCode != 0 {
				t.Fatalf("ConsumerGroupHeartbeat: %v %v %v", err, kerr.ErrorForCode(resp.ErrorCode), *resp.ErrorMessage)
			}
			if got := joinGroup(t, cl, "mixed", "").ErrorCode; got != tc.want {
				t.Fatalf("classic JoinGroup: %v, want %v", kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
			}
		})
	}
}
