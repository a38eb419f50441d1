package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMetadataRoundTrip(t *testing.T) {
	h := newTestHandler()
	s := startServer(t, Config{}, h)
	for _, v := range []int16{0, 8, 9, 13} { // v9+ is flexible: response header has tags
		c := dial(t, s)
		req := metadataReq(v)
		c.send(req, 77)
		corr, resp := c.recv(req)
		if corr != 77 {
			t.Fatalf("v%d: correlation id %d, want 77", v, corr)
		}
		if got := resp.GetVersion(); got != v {
			t.Fatalf("response version %d, want %d", got, v)
		}
	}
}

func TestApiVersionsWithKgo(t *testing.T) {
	h := newTestHandler()
	s := startServer(t, Config{}, h)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kresp, err := cl.Request(context.Background(), kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("error code %d", resp.ErrorCode)
	}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[int16][2]int16{
		0:  {0, 13}, // Produce advertised from 0, as Kafka 4.x does (KAFKA-18659)
		3:  {0, 13},
		12: {0, 4},
		18: {0, 5},
	}
	if len(got) != len(want) {
		t.Fatalf("api keys %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("key %d: %v, want %v", k, got[k], w)
		}
	}
	if resp.Version >= 3 {
		if len(resp.FinalizedFeatures) != 1 || resp.FinalizedFeaturesEpoch != 1 {
			t.Fatalf("finalized features %+v epoch %d", resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch)
		}
	}
	if resp.Version >= 4 && len(resp.SupportedFeatures) != 2 {
		t.Fatalf("v%d supported features %+v, want both", resp.Version, resp.SupportedFeatures)
	}
}

func TestApiVersionsVersions(t *testing.T) {
	h := newTestHandler()
	s := startServer(t, Config{}, h)
	for v := int16(0); v <= 5; v++ {
		c := dial(t, s)
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "exactq-test", "1.0.0"
		c.send(req, 1000+int32(v))
		corr, r := c.recv(req)
		resp := r.(*kmsg.ApiVersionsResponse)
		if corr != 1000+int32(v) || resp.ErrorCode != 0 || len(resp.ApiKeys) != 4 {
			t.Fatalf("v%d: corr %d error %d keys %d", v, corr, resp.ErrorCode, len(resp.ApiKeys))
		}
		switch {
		case v == 3 && len(resp.SupportedFeatures) != 1:
			// v3 omits features whose MinVersion is 0 (KAFKA-17492).
			t.Fatalf("v3 supported features %+v, want only metadata.version", resp.SupportedFeatures)
		case v >= 4 && len(resp.SupportedFeatures) != 2:
			t.Fatalf("v%d supported features %+v", v, resp.SupportedFeatures)
		}
	}
}

// TestApiVersionsFallback: an ApiVersions version above what we serve gets Kafka's
// KIP-511 answer: a v0 body, UNSUPPORTED_VERSION, ApiKeys holding only ApiVersions's range,
// response header v0, the client's correlation id; the connection stays usable.
func TestApiVersionsFallback(t *testing.T) {
	h := newTestHandler()
	s := startServer(t, Config{}, h)
	for _, v := range []int16{6, 99, 32767, -1} {
		c := dial(t, s)
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		frame := c.f.AppendRequest(nil, req, 4242)
		// A future version's body is not parsed: append bytes kmsg would not expect.
		frame = append(frame, 0xde, 0xad, 0xbe, 0xef)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		c.write(frame)

		v0 := kmsg.NewPtrApiVersionsRequest()
		v0.SetVersion(0)
		corr, r := c.recv(v0)
		resp := r.(*kmsg.ApiVersionsResponse)
		if corr != 4242 {
			t.Fatalf("v%d: correlation id %d", v, corr)
		}
		if resp.ErrorCode != 35 {
			t.Fatalf("v%d: error code %d, want 35", v, resp.ErrorCode)
		}
		if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 5 {
			t.Fatalf("v%d: api keys %+v", v, resp.ApiKeys)
		}

		// The client retries at our max on the same connection.
		req = kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(resp.ApiKeys[0].MaxVersion)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "x", "1"
		c.send(req, 4243)
		corr, r = c.recv(req)
		if corr != 4243 || r.(*kmsg.ApiVersionsResponse).ErrorCode != 0 {
			t.Fatalf("retry: corr %d error %d", corr, r.(*kmsg.ApiVersionsResponse).ErrorCode)
		}
	}
}

func TestApiVersionsInvalid(t *testing.T) {
	h := newTestHandler()
	s := startServer(t, Config{ClusterID: "cluster-a", NodeID: 1}, h)
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		version int16
		swName  string
		cluster *string
		node    int32
		want    int16
	}{
		{"bad software name", 3, "-bad", nil, -1, 42},
		{"empty software name", 4, "", nil, -1, 42},
		{"cluster without node", 5, "ok", str("cluster-a"), -1, 42},
		{"node without cluster", 5, "ok", nil, 1, 42},
		{"other cluster", 5, "ok", str("cluster-b"), 1, 129},
		{"other node", 5, "ok", str("cluster-a"), 2, 129},
		{"ours", 5, "ok", str("cluster-a"), 1, 0},
	} {
		c := dial(t, s)
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(tc.version)
		req.ClientSoftwareName, req.ClientSoftwareVersion = tc.swName, "1.0"
		req.ClusterID, req.NodeID = tc.cluster, tc.node
		c.send(req, 9)
		_, r := c.recv(req)
		resp := r.(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != tc.want {
			t.Fatalf("%s: error %d, want %d", tc.name, resp.ErrorCode, tc.want)
		}
		if tc.want != 0 && len(resp.ApiKeys) != 0 {
			t.Fatalf("%s: api keys listed with an error", tc.name)
		}
	}
}

// TestBadInput feeds protocol violations over real connections. Kafka 4.4 closes the
// connection for every one of them (see decode.go); so do we, after answering the valid
// requests that came before. A well-behaved connection keeps working throughout.
func TestBadInput(t *testing.T) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bad"))
	valid := f.AppendRequest(nil, metadataReq(4), 1)
	frame := func(payload ...byte) []byte {
		return binary.BigEndian.AppendUint32(nil, uint32(len(payload))) // then payload
	}
	withPayload := func(p []byte) []byte { return append(frame(p...), p...) }
	header := func(key, version int16, corr int32) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, uint32(corr))
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	reqAt := func(r kmsg.Request, v int16) []byte { r.SetVersion(v); return f.AppendRequest(nil, r, 5) }

	cases := []struct {
		name  string
		bytes []byte
	}{
		{"negative size", []byte{0xff, 0xff, 0xff, 0xff}},
		{"size above max", binary.BigEndian.AppendUint32(nil, 1<<20+1)},
		{"huge size", []byte{0x7f, 0xff, 0xff, 0xff}},
		{"zero size", []byte{0, 0, 0, 0}},
		{"garbage", withPayload([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))},
		{"truncated header", withPayload([]byte{0, 3, 0})},
		{"unknown key", withPayload(header(1000, 0, 7))},
		{"negative key", withPayload(header(-2, 0, 7))},
		{"key kmsg knows but not served", reqAt(kmsg.NewPtrFindCoordinatorRequest(), 3)},
		{"version above range", append(withPayload(header(3, 14, 7)), 0)},
		{"Produce v2 (removed in 4.0)", reqAt(kmsg.NewPtrProduceRequest(), 2)},
		{"negative version", withPayload(header(3, -1, 7))},
		{"truncated body", func() []byte {
			r := kmsg.NewPtrMetadataRequest()
			r.SetVersion(4)
			tp := kmsg.NewMetadataRequestTopic()
			tp.Topic = kmsg.StringPtr("some-topic")
			r.Topics = append(r.Topics, tp)
			b := f.AppendRequest(nil, r, 5)
			b = b[:len(b)-5]
			binary.BigEndian.PutUint32(b, uint32(len(b)-4))
			return b
		}()},
		{"bad client id length", withPayload(append(header(3, 0, 7)[:8], 0x7f, 0x00))},
		{"bad header tags", withPayload(append(header(3, 9, 7), 0x05, 0x01))},
		{"valid then garbage", append(append([]byte{}, valid...), withPayload([]byte{1, 2, 3, 4, 5, 6})...)},
	}
	h := newTestHandler()
	s := startServer(t, Config{MaxRequestBytes: 1 << 20}, h)
	good := dial(t, s)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s)
			c.write(tc.bytes)
			if tc.name == "valid then garbage" {
				if corr, _ := c.recv(metadataReq(4)); corr != 1 {
					t.Fatalf("correlation id %d", corr)
				}
			}
			c.expectClosed()
			if <-h.ended == 0 {
				t.Fatal("ConnClosed with id 0")
			}

			req := metadataReq(9)
			good.send(req, int32(i))
			if corr, _ := good.recv(req); corr != int32(i) {
				t.Fatalf("good connection: correlation id %d", corr)
			}
		})
	}
}

func TestWrongResponseKindClosesConnection(t *testing.T) {
	h := newTestHandler()
	h.handle = func(ctx context.Context, req *Request) Reply {
		return Reply{Resp: kmsg.NewPtrHeartbeatResponse()}
	}
	s := startServer(t, Config{}, h)
	c := dial(t, s)
	c.send(metadataReq(1), 1)
	c.expectClosed()
}

func TestReplyClose(t *testing.T) {
	h := newTestHandler()
	h.handle = func(ctx context.Context, req *Request) Reply {
		return Reply{Resp: req.Body.ResponseKind(), Close: true}
	}
	s := startServer(t, Config{}, h)
	c := dial(t, s)
	req := metadataReq(1)
	c.send(req, 31)
	if corr, _ := c.recv(req); corr != 31 {
		t.Fatalf("correlation id %d", corr)
	}
	c.expectClosed()
}

func TestIdleTimeoutClosesConnection(t *testing.T) {
	h := newTestHandler()
	s := startServer(t, Config{IdleTimeout: 1}, h) // 1ns: idle at once
	c := dial(t, s)
	c.expectClosed()
}

// TestIdleTimeoutWaitsForInFlight: a connection whose request is still waiting (a long
// poll) is not idle. The socket is scripted so the read timeouts happen exactly when the test
// says, not on a clock.
func TestIdleTimeoutWaitsForInFlight(t *testing.T) {
	h, handled, release := parkedHandler()
	sc := newScriptConn()
	s := New(Config{}, h, quietLogger(t))
	ln := &oneConnListener{c: sc, done: make(chan struct{})}
	go s.Serve(ln)
	defer s.Close()

	req := metadataReq(1)
	sc.reads <- readEvent{data: kmsg.NewRequestFormatter().AppendRequest(nil, req, 8)}
	<-handled
	sc.reads <- readEvent{err: os.ErrDeadlineExceeded} // idle timeout while in flight: ignored
	sc.reads <- readEvent{err: os.ErrDeadlineExceeded}
	close(release)
	corr, _ := readResponseFrom(t, sc.out)
	if corr != 8 {
		t.Fatalf("correlation id %d", corr)
	}
	// Nothing in flight any more: the next timeout is idleness.
	sc.reads <- readEvent{err: os.ErrDeadlineExceeded}
	if id := <-h.ended; id == 0 {
		t.Fatal("ConnClosed with id 0")
	}
	<-sc.closed
}

func TestShutdownFinishesInFlight(t *testing.T) {
	h, handled, release := parkedHandler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, h, quietLogger(t))
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()

	c := dial(t, s)
	req := metadataReq(1)
	c.send(req, 55)
	<-handled

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("serve: %v", err)
	}
	close(release)
	if corr, _ := c.recv(req); corr != 55 {
		t.Fatalf("correlation id %d", corr)
	}
	c.expectClosed()
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if got := h.closedCounts(); len(got) != 1 {
		t.Fatalf("ConnClosed calls %v", got)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("listener still accepting after Shutdown")
	}
}

func TestShutdownContextExpiry(t *testing.T) {
	h, handled, release := parkedHandler()
	defer close(release)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, h, quietLogger(t))
	go s.Serve(ln)
	c := dial(t, s)
	c.send(metadataReq(1), 1)
	<-handled
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("shutdown: %v", err)
	}
	c.expectClosed()
}

func TestHandlerContextCancelledAtShutdown(t *testing.T) {
	h := newTestHandler()
	handled := make(chan context.Context, 1)
	h.handle = func(ctx context.Context, req *Request) Reply {
		handled <- ctx
		return Reply{Wait: func() kmsg.Response {
			<-ctx.Done() // a long poll that ends early at shutdown
			return req.Body.ResponseKind()
		}}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, h, quietLogger(t))
	go s.Serve(ln)
	c := dial(t, s)
	req := metadataReq(1)
	c.send(req, 3)
	<-handled
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if corr, _ := c.recv(req); corr != 3 {
		t.Fatalf("correlation id %d", corr)
	}
	c.expectClosed()
}

func TestConnClosedOncePerConnection(t *testing.T) {
	h := newTestHandler()
	s := startServer(t, Config{}, h)
	const n = 10
	for i := 0; i < n; i++ {
		c := dial(t, s)
		req := metadataReq(1)
		c.send(req, int32(i))
		c.recv(req)
		c.nc.Close()
		<-h.ended
	}
	got := h.closedCounts()
	if len(got) != n {
		t.Fatalf("ConnClosed for %d connections, want %d", len(got), n)
	}
	for id, calls := range got {
		if calls != 1 {
			t.Fatalf("conn %d: ConnClosed called %d times", id, calls)
		}
	}
}

func TestServeAfterShutdown(t *testing.T) {
	s := New(Config{}, newTestHandler(), quietLogger(t))
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("serve: %v", err)
	}
	if s.Addr() != nil {
		t.Fatal("Addr after shutdown without Serve")
	}
}

func TestClientSoftwareRecorded(t *testing.T) {
	h := newTestHandler()
	seen := make(chan [2]string, 1)
	h.handle = func(ctx context.Context, req *Request) Reply {
		seen <- [2]string{req.Conn.ClientSoftwareName, req.Conn.ClientSoftwareVersion}
		return Reply{Resp: req.Body.ResponseKind()}
	}
	s := startServer(t, Config{}, h)
	c := dial(t, s)
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(4)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "exactq-go", "0.1.0"
	c.send(av, 1)
	c.recv(av)
	md := metadataReq(12)
	c.send(md, 2)
	c.recv(md)
	if got := <-seen; got != [2]string{"exactq-go", "0.1.0"} {
		t.Fatalf("client software %q", got)
	}
}

func TestListenAndServe(t *testing.T) {
	s := New(Config{}, newTestHandler(), quietLogger(t))
	served := make(chan error, 1)
	go func() { served <- s.ListenAndServe("127.0.0.1:0") }()
	c := dial(t, s) // Addr waits for the listener
	req := metadataReq(1)
	c.send(req, 5)
	if corr, _ := c.recv(req); corr != 5 {
		t.Fatalf("correlation id %d", corr)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("serve: %v", err)
	}
	c.expectClosed()
}

// TestWriteFailureDrainsWaits: when writing fails (a client that stopped reading hits the
// write deadline), the connection closes, every Wait already handed out is still called (so
// handler work such as a pending fsync completes), and ConnClosed is called once.
func TestWriteFailureDrainsWaits(t *testing.T) {
	h := newTestHandler()
	var handled, waited atomic.Int32
	h.handle = func(ctx context.Context, req *Request) Reply {
		handled.Add(1)
		return Reply{Wait: func() kmsg.Response {
			waited.Add(1)
			return req.Body.ResponseKind()
		}}
	}
	sc := newScriptConn()
	sc.failWrites.Store(true)
	s := New(Config{}, h, quietLogger(t))
	ln := &oneConnListener{c: sc, done: make(chan struct{})}
	go s.Serve(ln)
	defer s.Close()

	f := kmsg.NewRequestFormatter()
	var frames []byte
	for i := 0; i < 5; i++ {
		frames = append(frames, f.AppendRequest(nil, metadataReq(1), int32(i))...)
	}
	sc.reads <- readEvent{data: frames}
	<-h.ended
	<-sc.closed
	if handled.Load() == 0 || handled.Load() != waited.Load() {
		t.Fatalf("handled %d, waited %d", handled.Load(), waited.Load())
	}
}

// TestLargeFrame sends a produce request larger than the read chunk, so the frame is read
// in growing pieces, and checks the record bytes arrive intact.
func TestLargeFrame(t *testing.T) {
	h := newTestHandler()
	got := make(chan []byte, 1)
	h.handle = func(ctx context.Context, req *Request) Reply {
		got <- req.Body.(*kmsg.ProduceRequest).Topics[0].Partitions[0].Records
		return Reply{Resp: req.Body.ResponseKind()}
	}
	s := startServer(t, Config{MaxRequestBytes: 8 << 20}, h)
	c := dial(t, s)
	records := make([]byte, 3<<20+17)
	for i := range records {
		records[i] = byte(i * 7)
	}
	req := benchProduce(0)
	req.Topics[0].Partitions[0].Records = records
	frame := c.f.AppendRequest(nil, req, 1)
	go c.nc.Write(frame) // the server reads while we write; a failure shows up below
	if b := <-got; !bytes.Equal(b, records) {
		t.Fatal("records corrupted")
	}
	if corr, _ := c.recv(req); corr != 1 {
		t.Fatalf("correlation id %d", corr)
	}
}
