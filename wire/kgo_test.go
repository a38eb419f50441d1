package wire_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/wire"
)

// A plain *kgo.Client (only kgo.MaxVersions names key 95) sends TxnShareAcknowledge as
// franz-go sends any partition-leader request: (*kgo.Client).Request to a broker with kgo's
// retries, (*kgo.Client).Broker(id).Request to the leader named. Both reach the share
// partition leader's handler, whose member check answers UNKNOWN_MEMBER_ID for a member the
// group does not have. Before the fix Request failed in kgo ("client is too old"): the
// type carried kmsg's transaction-coordinator marker, so kgo looked for a coordinator
// request type it knows.
func TestPlainKgoClientReachesLeader(t *testing.T) {
	tb := testbroker.Start(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr), kgo.MaxVersions(wire.TxnShareAcknowledgeVersions(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req := &wire.TxnShareAcknowledgeRequest{TransactionalID: kmsg.StringPtr("tx"), GroupID: "sg", ProducerID: 1,
		MemberID: "AAAAAAAAAAAAAAAAAAAAAA", MemberEpoch: 1,
		Topics: []wire.TxnShareAcknowledgeRequestTopic{{TopicID: [16]byte{1}, Partitions: []wire.TxnShareAcknowledgeRequestTopicPartition{{PartitionIndex: 0,
			AcknowledgementBatches: []wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{wire.AckAccept}}}}}}}}
	paths := map[string]func() (kmsg.Response, error){
		"Client.Request":                    func() (kmsg.Response, error) { return cl.Request(ctx, req) },
		"Client.Broker(1).Request":          func() (kmsg.Response, error) { return cl.Broker(1).Request(ctx, req) },
		"Client.Broker(1).RetriableRequest": func() (kmsg.Response, error) { return cl.Broker(1).RetriableRequest(ctx, req) },
	}
	for name, send := range paths {
		resp, err := send()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		r, ok := resp.(*wire.TxnShareAcknowledgeResponse)
		if !ok || r.ErrorCode != kerr.UnknownMemberID.Code {
			t.Errorf("%s: %T %+v, want the handler's UNKNOWN_MEMBER_ID", name, resp, resp)
		}
	}
}
