package server

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFrameReuse: large frames whose handler is done with them (BodyDone) are reused for
// later requests, and every request still sees exactly its own bytes; a handler that keeps
// its request's bytes (no BodyDone) keeps them intact however many requests follow.
func TestFrameReuse(t *testing.T) {
	for _, done := range []bool{true, false} {
		t.Run(fmt.Sprintf("BodyDone=%v", done), func(t *testing.T) {
			h := newTestHandler()
			var kept [][]byte // the handler's references into request bodies (no BodyDone)
			var keptWant [][]byte
			errs := make(chan error, 100)
			h.handle = func(ctx context.Context, req *Request) Reply {
				records := req.Body.(*kmsg.ProduceRequest).Topics[0].Partitions[0].Records
				if want := testRecords(int(req.CorrelationID)); !bytes.Equal(records, want) {
					errs <- fmt.Errorf("request %d: records differ", req.CorrelationID)
				}
				if !done {
					kept = append(kept, records)
					keptWant = append(keptWant, testRecords(int(req.CorrelationID)))
				}
				return Reply{Resp: req.Body.ResponseKind(), BodyDone: done}
			}
			s := startServer(t, Config{MaxRequestBytes: 8 << 20}, h)
			c := dial(t, s)
			const n = 40
			var frames []byte
			for i := range n {
				req := benchProduce(0)
				req.Topics[0].Partitions[0].Records = testRecords(i)
				frames = append(frames, c.f.AppendRequest(nil, req, int32(i))...)
			}
			go c.nc.Write(frames)
			for i := range n {
				if corr, _, err := c.readFrame(); err != nil || corr != int32(i) {
					t.Fatalf("response %d: corr %d, %v", i, corr, err)
				}
			}
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for i := range kept {
				if !bytes.Equal(kept[i], keptWant[i]) {
					t.Fatalf("kept body of request %d was overwritten", i)
				}
			}
		})
	}
}

// testRecords is request i's distinct payload, of sizes around and between pooled classes.
func testRecords(i int) []byte {
	sizes := []int{pooledFrameMin - 100, pooledFrameMin + 5, 300 << 10, 1_000_012, 1 << 20, 3<<20 + 7, 100}
	b := make([]byte, sizes[i%len(sizes)])
	for j := range b {
		b[j] = byte(i*31 + j)
	}
	return b
}

func TestFrameClassCap(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{100, 100}, {pooledFrameMin - 1, pooledFrameMin - 1}, {pooledFrameMin, pooledFrameMin},
		{pooledFrameMin + 1, 2 * pooledFrameMin}, {1_000_012, 1 << 20}, {pooledFrameMax, pooledFrameMax},
		{pooledFrameMax + 1, pooledFrameMax + 1},
	} {
		if got := frameClassCap(c.n); got != c.want {
			t.Errorf("frameClassCap(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}
