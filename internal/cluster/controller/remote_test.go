package controller

import (
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
)

// A new cluster of several voters gets its ClusterRecord and features from the first
// controller's first tick, once: while the batch is in flight (latest has it) and after it
// is applied, no tick proposes it again; a term whose batch was lost proposes it again.
// Registrations are refused until the log has a cluster id.
func TestBootstrapProposedOnce(t *testing.T) {
	boot := []wire.MetadataRecord{&wire.ClusterRecord{ClusterID: testCluster}, &wire.FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 27}}
	l := &log{t: t, committed: metadata.Empty()}
	l.latest = l.committed
	c := New(Config{Bootstrap: boot})
	now := time.Unix(1000, 0)
	wantCode(t, "registration before the cluster id", l.handle(c, now, registration(1, 1)), kerr.InconsistentClusterID)
	r := l.tick(c, now)
	if !reflect.DeepEqual(r.Records, boot) {
		t.Fatalf("first tick proposed %s, want the bootstrap", describe(r.Records))
	}
	l.run(r, true, nil)
	if r := l.tick(c, now); len(r.Records) != 0 {
		t.Fatalf("a tick with the bootstrap in flight proposed %s", describe(r.Records))
	}
	l.drop() // the term ended before it committed
	c = New(Config{Bootstrap: boot})
	r = l.tick(c, now)
	if !reflect.DeepEqual(r.Records, boot) {
		t.Fatalf("the next term proposed %s, want the bootstrap again", describe(r.Records))
	}
	l.run(r, false, nil)
	if l.committed.Cluster.ID != testCluster {
		t.Fatalf("cluster id %q", l.committed.Cluster.ID)
	}
	if r := l.tick(c, now.Add(time.Second)); len(r.Records) != 0 {
		t.Fatalf("a tick after the bootstrap proposed %s", describe(r.Records))
	}
	l.register(t, c, now, 1, 1)
}

// The two creations without a Kafka message survive the trip to another node's controller
// as a tagged CreateTopics, and a client's CreateTopics cannot pass for one once the
// broker stripped it.
func TestInternalCreationsOverTheWire(t *testing.T) {
	for _, req := range []any{
		&AutoCreateTopicRequest{Name: "orders"},
		&CreateInternalTopicRequest{Name: "__consumer_offsets", Partitions: 50, Configs: map[string]string{"cleanup.policy": "compact"}},
	} {
		w := WireRequest(req)
		buf := w.AppendTo(nil)
		decoded := kmsg.NewPtrCreateTopicsRequest()
		decoded.SetVersion(w.GetVersion())
		if err := decoded.ReadFrom(buf); err != nil {
			t.Fatal(err)
		}
		if got := FromWire(decoded); !reflect.DeepEqual(got, req) {
			t.Fatalf("%#v came back as %#v", req, got)
		}
		StripInternalTag(decoded)
		if got := FromWire(decoded); got != kmsg.Request(decoded) {
			t.Fatalf("a stripped CreateTopics is %#v", got)
		}
	}
	plain := kmsg.NewPtrCreateTopicsRequest()
	if FromWire(plain) != kmsg.Request(plain) {
		t.Fatal("a plain CreateTopics is not itself")
	}
}

// NotController recognises the controller's NOT_CONTROLLER answers and nothing else.
func TestNotController(t *testing.T) {
	for _, req := range []kmsg.Request{registration(1, 1), heartbeat(1, 5, 5), kmsg.NewPtrAllocateProducerIDsRequest(),
		WireRequest(&AutoCreateTopicRequest{Name: "x"}), kmsg.NewPtrUpdateFeaturesRequest(),
		&kmsg.CreateACLsRequest{Creations: make([]kmsg.CreateACLsRequestCreation, 1)},
		&kmsg.DeleteACLsRequest{Filters: make([]kmsg.DeleteACLsRequestFilter, 1)},
		&kmsg.AlterUserSCRAMCredentialsRequest{Deletions: []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "u"}}}} {
		if !NotController(ErrorResponse(req, kerr.NotController, "")) {
			t.Fatalf("%T's NOT_CONTROLLER answer not recognised", req)
		}
		if NotController(ErrorResponse(req, kerr.RequestTimedOut, "")) {
			t.Fatalf("%T's REQUEST_TIMED_OUT taken for NOT_CONTROLLER", req)
		}
	}
}
