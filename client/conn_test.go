package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func testNetConfig(t testing.TB, addrs ...string) *netConfig {
	t.Helper()
	cfg, err := newNetConfig(addrs, NetConfig{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func metadataEcho(_ *peerConn, req *peerReq) kmsg.Response {
	// Echo the first requested topic as the cluster id, so a test can match responses
	// to requests.
	m := req.body.(*kmsg.MetadataRequest)
	resp := m.ResponseKind().(*kmsg.MetadataResponse)
	if len(m.Topics) > 0 && m.Topics[0].Topic != nil {
		resp.ClusterID = m.Topics[0].Topic
	}
	return resp
}

func TestConnNegotiatesMinOfMaxVersions(t *testing.T) {
	p := newPeer(t, func(p *peer) {
		p.apiMax = map[int16]int16{
			kmsg.Produce.Int16():       9,  // below our cap: broker's max wins
			kmsg.Fetch.Int16():         18, // above our cap of 12: ours wins
			kmsg.DeleteRecords.Int16(): -1,
		}
		p.handle = metadataEcho
	})
	c, err := dialConn(context.Background(), testNetConfig(t, p.addr), p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close(nil)
	for _, tc := range []struct {
		key  kmsg.Key
		want int16
	}{
		{kmsg.Produce, 9},
		{kmsg.Fetch, 12},
		{kmsg.Metadata, (&kmsg.MetadataRequest{}).MaxVersion()},
		{kmsg.DeleteRecords, -1},
	} {
		if got := c.version(tc.key.Int16()); got != tc.want {
			t.Errorf("%s: version %d, want %d", tc.key.Name(), got, tc.want)
		}
	}
	_, err = c.do(context.Background(), kmsg.NewPtrDeleteRecordsRequest())
	if !errors.Is(err, kerr.UnsupportedVersion) {
		t.Fatalf("unsupported key: err %v, want UNSUPPORTED_VERSION", err)
	}
}

func TestConnApiVersionsFallsBackToBrokerVersion(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []int16
	)
	p := newPeer(t, func(p *peer) {
		p.serve = func(pc *peerConn) {
			for {
				req, err := pc.read()
				if err != nil {
					return
				}
				if req.key != kmsg.ApiVersions.Int16() {
					return
				}
				mu.Lock()
				seen = append(seen, req.version)
				mu.Unlock()
				if req.version > 2 {
					// An old broker: answer v0 with UNSUPPORTED_VERSION and its own range.
					resp := kmsg.NewPtrApiVersionsResponse()
					resp.Version = 0
					resp.ErrorCode = kerr.UnsupportedVersion.Code
					ak := kmsg.NewApiVersionsResponseApiKey()
					ak.ApiKey, ak.MaxVersion = kmsg.ApiVersions.Int16(), 2
					resp.ApiKeys = append(resp.ApiKeys, ak)
					_ = pc.write(req, resp)
					continue
				}
				_ = pc.write(req, p.apiVersions(req))
			}
		}
	})
	c, err := dialConn(context.Background(), testNetConfig(t, p.addr), p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close(nil)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[1] != 2 {
		t.Fatalf("ApiVersions versions sent %v, want [%d 2]", seen, (&kmsg.ApiVersionsRequest{}).MaxVersion())
	}
	if c.version(kmsg.Metadata.Int16()) < 1 {
		t.Fatal("no Metadata version negotiated after fallback")
	}
}

// TestConnPipelinesAndMatchesInOrder has the peer read every request before answering any,
// which only completes if the client really has them all in flight at once.
func TestConnPipelinesAndMatchesInOrder(t *testing.T) {
	const n = 20
	p := newPeer(t, func(p *peer) {
		p.serve = func(pc *peerConn) {
			var held []*peerReq
			for {
				req, err := pc.read()
				if err != nil {
					return
				}
				if req.key == kmsg.ApiVersions.Int16() {
					_ = pc.write(req, p.apiVersions(req))
					continue
				}
				held = append(held, req)
				if len(held) < n {
					continue
				}
				for _, r := range held {
					// Flexible header with a non-empty tag section: one tag (7) of 2 bytes.
					if err := pc.writeRaw(r.corr, r.body.IsFlexible(), []byte{1, 7, 2, 0xaa, 0xbb}, metadataEcho(pc, r)); err != nil {
						return
					}
				}
				held = held[:0]
			}
		}
	})
	c, err := dialConn(context.Background(), testNetConfig(t, p.addr), p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close(nil)
	if c.version(kmsg.Metadata.Int16()) < 9 {
		t.Fatal("want a flexible Metadata version for the header test")
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(fmt.Sprint("t", i))
			req.Topics = append(req.Topics, rt)
			resp, err := c.do(context.Background(), req)
			if err != nil {
				errs <- err
				return
			}
			if got := resp.(*kmsg.MetadataResponse).ClusterID; got == nil || *got != *rt.Topic {
				errs <- fmt.Errorf("request %s got response for %v", *rt.Topic, got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestConnCorrelationMismatchClosesConn(t *testing.T) {
	p := newPeer(t, func(p *peer) {
		p.serve = func(pc *peerConn) {
			for {
				req, err := pc.read()
				if err != nil {
					return
				}
				if req.key == kmsg.ApiVersions.Int16() {
					_ = pc.write(req, p.apiVersions(req))
					continue
				}
				_ = pc.writeRaw(req.corr+100, req.body.IsFlexible(), nil, metadataEcho(pc, req))
			}
		}
	})
	c, err := dialConn(context.Background(), testNetConfig(t, p.addr), p.addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.do(context.Background(), kmsg.NewPtrMetadataRequest())
	if err == nil {
		t.Fatal("mismatched correlation id accepted")
	}
	if !c.closed() {
		t.Fatal("connection still open after a correlation mismatch")
	}
}

func TestConnAbandonedRequestClosesConnAndClusterRedials(t *testing.T) {
	// Requests on the first connection are never answered. (Keyed by connection, not by
	// "the first request read": the client may close that connection before the peer
	// reads its request, and the request on the next connection must be answered.)
	p := newPeer(t, func(p *peer) {
		p.handle = func(pc *peerConn, req *peerReq) kmsg.Response {
			p.mu.Lock()
			first := p.conns[0] == pc
			p.mu.Unlock()
			if first {
				return nil
			}
			return metadataEcho(pc, req)
		}
	})
	cl := newCluster(testNetConfig(t, p.addr))
	defer cl.close()
	c, err := cl.anyConn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	call, err := c.send(ctx, versioned(c, kmsg.NewPtrMetadataRequest()))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := call.wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v, want context.Canceled", err)
	}
	if !c.closed() {
		t.Fatal("abandoned request left the connection open")
	}
	// The cluster notices the dead connection and dials a new one.
	if _, err := cl.do(context.Background(), anyBroker(), kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("after reconnect: %v", err)
	}
	c2, _ := cl.anyConn(context.Background())
	if c2 == c {
		t.Fatal("cluster reused the closed connection")
	}
}

func TestClusterRetriesOnDroppedConnection(t *testing.T) {
	var mu sync.Mutex
	drops := 1
	p := newPeer(t, func(p *peer) {
		p.handle = func(pc *peerConn, req *peerReq) kmsg.Response {
			mu.Lock()
			defer mu.Unlock()
			if drops > 0 {
				drops--
				_ = pc.nc.Close()
				return nil
			}
			return metadataEcho(pc, req)
		}
	})
	cl := newCluster(testNetConfig(t, p.addr))
	defer cl.close()
	if _, err := cl.do(context.Background(), anyBroker(), kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("request did not survive one dropped connection: %v", err)
	}
}

func TestSkipTags(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		rest int
		ok   bool
	}{
		{[]byte{0, 9}, 1, true},
		{[]byte{2, 0, 1, 5, 1, 0, 9}, 1, true},
		{[]byte{1, 0, 5, 1}, 0, false},
		{[]byte{}, 0, false},
	} {
		rest, err := skipTags(tc.in)
		if (err == nil) != tc.ok || (tc.ok && len(rest) != tc.rest) {
			t.Errorf("skipTags(%v) = %v, %v", tc.in, rest, err)
		}
	}
}

// versioned sets req to c's negotiated version.
func versioned(c *conn, req kmsg.Request) kmsg.Request {
	req.SetVersion(c.version(req.Key()))
	return req
}
