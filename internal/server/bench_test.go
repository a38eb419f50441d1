package server

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchProduce builds a Produce v9 request carrying recordBytes of (opaque) batch bytes.
func benchProduce(recordBytes int) *kmsg.ProduceRequest {
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	p.Acks = -1
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "bench"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = bytes.Repeat([]byte{0x5a}, recordBytes)
	t.Partitions = append(t.Partitions, pp)
	p.Topics = append(p.Topics, t)
	return p
}

// produceHandler answers Produce with a one-partition response, like a broker would.
func produceHandler() *testHandler {
	h := newTestHandler()
	h.ended = nil
	h.handle = func(ctx context.Context, req *Request) Reply {
		r, ok := req.Body.(*kmsg.ProduceRequest)
		if !ok {
			return Reply{Resp: req.Body.ResponseKind()}
		}
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return Reply{Resp: resp}
	}
	return h
}

// BenchmarkRoundTrip measures one request/response at a time over loopback: the latency
// floor of the wire layer (decode, Handle, encode, two syscalls each way).
func BenchmarkRoundTrip(b *testing.B) {
	for _, size := range []int{0, 1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("produce=%dB", size), func(b *testing.B) {
			s := startServer(b, Config{}, produceHandler())
			c := dial(b, s)
			_ = c.nc.SetDeadline(time.Time{}) // no safety deadline in benchmarks
			req := benchProduce(size)
			frame := c.f.AppendRequest(nil, req, 1)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				c.write(frame)
				if _, _, err := c.readFrame(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPipelined keeps many requests in flight on one connection: the throughput of a
// connection's reader/writer pair.
func BenchmarkPipelined(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("produce=%dB", size), func(b *testing.B) {
			const window = 64
			s := startServer(b, Config{}, produceHandler())
			c := dial(b, s)
			_ = c.nc.SetDeadline(time.Time{}) // no safety deadline in benchmarks
			frame := c.f.AppendRequest(nil, benchProduce(size), 1)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			done := make(chan error, 1)
			n := b.N
			go func() {
				for i := 0; i < n; i++ {
					if _, _, err := c.readFrame(); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			b.ResetTimer()
			batch := bytes.Repeat(frame, window)
			for sent := 0; sent < n; {
				k := min(window, n-sent)
				if _, err := c.nc.Write(batch[:k*len(frame)]); err != nil {
					b.Fatal(err)
				}
				sent += k
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
