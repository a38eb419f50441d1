package peer_test

// An external test: the real broker (testbroker) imports this package through the
// cluster node, so an in-package test may not import it.

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/peer"
	"github.com/exactq/exactq/internal/testbroker"
)

// A real exactq broker answers standard requests on every lane, at the versions both sides
// support.
func TestRealBrokerEveryLane(t *testing.T) {
	tb := testbroker.Start(t)
	tr := peer.NewTCP(peer.Config{Self: 9, Addr: func(node int32) (string, bool) { return tb.Addr, node == 1 }})
	t.Cleanup(tr.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ln := peer.Lane(0); ln < peer.NumLanes; ln++ {
		avReq := kmsg.NewPtrApiVersionsRequest()
		avReq.ClientSoftwareName, avReq.ClientSoftwareVersion = "exactq", "test"
		resp, err := tr.Send(ctx, 1, ln, avReq)
		if err != nil {
			t.Fatalf("%s ApiVersions: %v", ln, err)
		}
		av := resp.(*kmsg.ApiVersionsResponse)
		if av.ErrorCode != 0 || len(av.ApiKeys) == 0 {
			t.Fatalf("%s ApiVersions: %+v", ln, av)
		}
		var mdMax int16 = -1
		for _, k := range av.ApiKeys {
			if k.ApiKey == 3 {
				mdMax = k.MaxVersion
			}
		}
		req := kmsg.NewPtrMetadataRequest()
		resp, err = tr.Send(ctx, 1, ln, req)
		if err != nil {
			t.Fatalf("%s Metadata: %v", ln, err)
		}
		md := resp.(*kmsg.MetadataResponse)
		if want := min(mdMax, req.MaxVersion()); md.Version != want {
			t.Errorf("%s Metadata at v%d, want v%d", ln, md.Version, want)
		}
		if len(md.Brokers) != 1 || md.Brokers[0].NodeID != 1 {
			t.Errorf("%s Metadata brokers %+v", ln, md.Brokers)
		}
	}
}
