package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPipelining sends 50 requests without reading. Every third reply uses Wait, released
// in reverse order within blocks; every seventh asks for no response (acks=0). Responses
// must come back in request order with the right correlation ids and versions, Handle must
// run one request at a time in arrival order, and a small in-flight bound must only slow
// things down, never reorder or deadlock.
func TestPipelining(t *testing.T) {
	for _, tc := range []struct {
		maxInFlight int
		block       int // Waits are released in reverse order within blocks of this size
	}{
		{maxInFlight: 100, block: 50},
		{maxInFlight: 4, block: 3},
		{maxInFlight: 1, block: 1},
	} {
		t.Run(fmt.Sprintf("inflight=%d", tc.maxInFlight), func(t *testing.T) {
			testPipelining(t, tc.maxInFlight, tc.block)
		})
	}
}

func testPipelining(t *testing.T, maxInFlight, block int) {
	const n = 50
	var release, handled [n]chan struct{}
	for i := range release {
		release[i] = make(chan struct{})
		handled[i] = make(chan struct{})
	}
	var active, next atomic.Int32
	h := newTestHandler()
	h.handle = func(ctx context.Context, req *Request) Reply {
		if req.CorrelationID == 1 { // the final request
			return Reply{Resp: req.Body.ResponseKind()}
		}
		if active.Add(1) != 1 {
			t.Error("Handle called concurrently on one connection")
		}
		defer active.Add(-1)
		i := int(req.CorrelationID) - 1000
		if want := int(next.Add(1)) - 1; i != want {
			t.Errorf("Handle got request %d, want %d", i, want)
		}
		defer close(handled[i])
		resp := req.Body.ResponseKind().(*kmsg.MetadataResponse)
		resp.ThrottleMillis = int32(i) // lets the client check which response it got
		switch {
		case i%7 == 6:
			return Reply{} // acks=0 style: nothing written
		case i%3 == 0:
			return Reply{Wait: func() kmsg.Response {
				<-release[i]
				return resp
			}}
		default:
			return Reply{Resp: resp}
		}
	}
	s := startServer(t, Config{MaxInFlightPerConn: maxInFlight}, h)
	c := dial(t, s)

	go func() {
		for start := 0; start < n; start += block {
			end := min(start+block, n)
			<-handled[end-1]
			for i := end - 1; i >= start; i-- {
				close(release[i])
			}
		}
	}()

	var frames []byte
	reqs := make([]*kmsg.MetadataRequest, n)
	for i := range reqs {
		reqs[i] = metadataReq(int16(1 + i%13)) // mix flexible (v9+) and non-flexible
		// AppendRequest writes the size at dst[0:4], so each frame needs a fresh slice.
		frames = append(frames, c.f.AppendRequest(nil, reqs[i], int32(1000+i))...)
	}
	c.write(frames)

	for i := 0; i < n; i++ {
		if i%7 == 6 {
			continue
		}
		corr, r := c.recv(reqs[i])
		if corr != int32(1000+i) {
			t.Fatalf("response %d: correlation id %d", i, corr)
		}
		resp := r.(*kmsg.MetadataResponse)
		if resp.GetVersion() >= 3 && resp.ThrottleMillis != int32(i) {
			t.Fatalf("response %d carries request %d's body", i, resp.ThrottleMillis)
		}
	}
	// Everything answered: a final request proves nothing was left queued.
	last := metadataReq(12)
	c.send(last, 1)
	if corr, _ := c.recv(last); corr != 1 {
		t.Fatalf("final correlation id %d", corr)
	}
}
