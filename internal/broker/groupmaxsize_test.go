package broker_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// joinGroup sends one JoinGroup v5 for group g with member id member.
func joinGroup(t *testing.T, cl interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}, g, member string) *kmsg.JoinGroupResponse {
	t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.ProtocolType = g, member, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	req.Protocols = append(req.Protocols, p)
	resp, err := cl.Request(ctxT(t), req)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	return resp.(*kmsg.JoinGroupResponse)
}

// group.max.size (classic groups) is read from the broker config and enforced over the
// wire: a member beyond it gets GROUP_MAX_SIZE_REACHED, the members inside it are kept.
func TestGroupMaxSizeOverTheWire(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{"group.max.size": "1"}))
	a, b := newClient(t, tb.Addr), newClient(t, tb.Addr)
	first := joinGroup(t, a, "capped", "")
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %v, want MEMBER_ID_REQUIRED", kerr.ErrorForCode(first.ErrorCode))
	}
	joined := joinGroup(t, a, "capped", first.MemberID)
	if joined.ErrorCode != 0 || joined.Generation != 1 {
		t.Fatalf("first member's join: %v generation %d", kerr.ErrorForCode(joined.ErrorCode), joined.Generation)
	}
	second := joinGroup(t, b, "capped", "")
	if second.ErrorCode == kerr.MemberIDRequired.Code {
		second = joinGroup(t, b, "capped", second.MemberID)
	}
	if second.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("second member: %v, want GROUP_MAX_SIZE_REACHED", kerr.ErrorForCode(second.ErrorCode))
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "capped", first.MemberID, 1
	resp, err := a.Request(ctxT(t), hb)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.HeartbeatResponse).ErrorCode; code != 0 && code != kerr.RebalanceInProgress.Code {
		t.Fatalf("first member after the refusal: %v", kerr.ErrorForCode(code))
	}
}
