package peer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// raftRequest stands in for RaftMessage (its generated type is not in wire/ yet): a
// Heartbeat body under the private key, which is all the transport looks at.
type raftRequest struct{ kmsg.HeartbeatRequest }

func (*raftRequest) Key() int16 { return RaftMessageKey }
func (r *raftRequest) ResponseKind() kmsg.Response {
	return &raftResponse{kmsg.HeartbeatResponse{Version: r.Version}}
}

type raftResponse struct{ kmsg.HeartbeatResponse }

func (*raftResponse) Key() int16                { return RaftMessageKey }
func (*raftResponse) RequestKind() kmsg.Request { return &raftRequest{} }

// fakeReq is one request a fakePeer read.
type fakeReq struct {
	key, version int16
	clientID     string
	body         kmsg.Request
}

// fakePeer is a small Kafka-protocol server for what a real broker cannot be made to do on
// cue: hold answers, count what is in flight, go away and come back. Each connection has a
// reader and an answering goroutine; answers leave in request order, so a slow one delays
// the answers behind it on that connection, as Kafka's do.
type fakePeer struct {
	t    testing.TB
	addr string
	apis []kmsg.ApiVersionsResponseApiKey
	// handle answers a request other than ApiVersions; nil answers Heartbeat and the raft
	// stand-in with ThrottleMillis = Generation, so a caller can see it got its own answer.
	handle func(fakeReq) kmsg.Response

	mu       sync.Mutex
	ln       net.Listener
	conns    []net.Conn
	wg       sync.WaitGroup
	received atomic.Int64 // requests read, ApiVersions excluded
	open     atomic.Int64 // read and not answered
	maxOpen  atomic.Int64
	dials    atomic.Int64 // connections accepted
}

func defaultAPIs() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 18, MinVersion: 0, MaxVersion: 4},
		{ApiKey: 12, MinVersion: 0, MaxVersion: 4},
		{ApiKey: RaftMessageKey, MinVersion: 0, MaxVersion: 4},
	}
}

func startFake(t testing.TB, handle func(fakeReq) kmsg.Response) *fakePeer {
	t.Helper()
	fp := &fakePeer{t: t, apis: defaultAPIs(), handle: handle}
	fp.listen("127.0.0.1:0")
	t.Cleanup(fp.stop)
	return fp
}

func (fp *fakePeer) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fp.t.Fatal(err)
	}
	fp.mu.Lock()
	fp.ln, fp.addr = ln, ln.Addr().String()
	fp.mu.Unlock()
	fp.wg.Add(1)
	go func() {
		defer fp.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			fp.dials.Add(1)
			fp.mu.Lock()
			fp.conns = append(fp.conns, nc)
			fp.mu.Unlock()
			fp.wg.Add(1)
			go fp.serve(nc)
		}
	}()
}

// stop closes the listener and every connection and waits for them.
func (fp *fakePeer) stop() {
	fp.mu.Lock()
	ln, conns := fp.ln, fp.conns
	fp.ln, fp.conns = nil, nil
	fp.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	fp.wg.Wait()
}

func (fp *fakePeer) serve(nc net.Conn) {
	defer fp.wg.Done()
	type job struct {
		corr int32
		req  fakeReq
	}
	jobs := make(chan job, 4096)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		bw := bufio.NewWriter(nc)
		for j := range jobs {
			var resp kmsg.Response
			if j.req.key == 18 {
				r := kmsg.NewPtrApiVersionsResponse()
				r.Version = j.req.version
				r.ApiKeys = fp.apis
				resp = r
			} else {
				resp = fp.answer(j.req)
				fp.open.Add(-1)
			}
			resp.SetVersion(j.req.version)
			frame := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 0}, uint32(j.corr))
			if j.req.key != 18 && resp.IsFlexible() {
				frame = append(frame, 0)
			}
			frame = resp.AppendTo(frame)
			binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
			if _, err := bw.Write(frame); err != nil {
				return
			}
			if len(jobs) == 0 {
				if bw.Flush() != nil {
					return
				}
			}
		}
	}()
	defer func() { close(jobs); <-answered; nc.Close() }()
	br := bufio.NewReader(nc)
	for {
		body, err := readFrame(br)
		if err != nil {
			return
		}
		corr, req, err := decodeFakeRequest(body)
		if err != nil {
			fp.t.Errorf("fake peer: %v", err)
			return
		}
		if req.key != 18 {
			fp.received.Add(1)
			n := fp.open.Add(1)
			for m := fp.maxOpen.Load(); n > m && !fp.maxOpen.CompareAndSwap(m, n); m = fp.maxOpen.Load() {
			}
		}
		jobs <- job{corr, req}
	}
}

func (fp *fakePeer) answer(r fakeReq) kmsg.Response {
	if fp.handle != nil {
		return fp.handle(r)
	}
	return echo(r)
}

// echo answers Heartbeat and the raft stand-in with ThrottleMillis = Generation.
func echo(r fakeReq) kmsg.Response {
	switch b := r.body.(type) {
	case *kmsg.HeartbeatRequest:
		return &kmsg.HeartbeatResponse{ThrottleMillis: b.Generation}
	case *raftRequest:
		return &raftResponse{kmsg.HeartbeatResponse{ThrottleMillis: b.Generation}}
	}
	panic(fmt.Sprintf("fake peer: no answer for %T", r.body))
}

// decodeFakeRequest decodes a request frame's body: header v1 or v2, then the message.
func decodeFakeRequest(body []byte) (int32, fakeReq, error) {
	r := kbin.Reader{Src: body}
	key, version, corr := r.Int16(), r.Int16(), r.Int32()
	cid := r.NullableString()
	var req kmsg.Request
	if key == RaftMessageKey {
		req = &raftRequest{}
	} else if req = kmsg.RequestForKey(key); req == nil {
		return 0, fakeReq{}, fmt.Errorf("key %d", key)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if !r.Ok() {
		return 0, fakeReq{}, errors.New("short header")
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return 0, fakeReq{}, err
	}
	fr := fakeReq{key: key, version: version, body: req}
	if cid != nil {
		fr.clientID = *cid
	}
	return corr, fr, nil
}

// heartbeat is a small request whose answer names it (see echo).
func heartbeat(gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID, r.Generation = "g", "m", gen
	return r
}

func raftMsg(gen int32) *raftRequest {
	return &raftRequest{*heartbeat(gen)}
}
