package driver

import (
	"context"
	"io"
	"net"
	"time"
)

// LoopbackResult is the throughput of one TCP stream over 127.0.0.1: the ceiling
// BENCHMARKS.md compares produce and consume throughput against.
type LoopbackResult struct {
	Bytes   int64
	Elapsed time.Duration
}

// MBps is throughput in MB/s (10^6 bytes).
func (r LoopbackResult) MBps() float64 { return mbps(r.Bytes, r.Elapsed) }

// Loopback sends total bytes in 1 MiB writes over one loopback TCP connection to a reader
// that discards them, and times it from the first write to the reader's last byte.
func Loopback(ctx context.Context, total int64) (LoopbackResult, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return LoopbackResult{}, err
	}
	defer ln.Close()
	type result struct {
		n   int64
		end time.Time
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		buf := make([]byte, 1<<20)
		var n int64
		for n < total {
			k, err := c.Read(buf)
			n += int64(k)
			if err != nil {
				if err == io.EOF {
					break
				}
				got <- result{n: n, err: err}
				return
			}
		}
		got <- result{n: n, end: time.Now()}
	}()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return LoopbackResult{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	buf := make([]byte, 1<<20)
	start := time.Now()
	for sent := int64(0); sent < total; {
		n := min(int64(len(buf)), total-sent)
		if _, err := c.Write(buf[:n]); err != nil {
			return LoopbackResult{}, err
		}
		sent += n
	}
	r := <-got
	if r.err != nil {
		return LoopbackResult{}, r.err
	}
	return LoopbackResult{Bytes: r.n, Elapsed: r.end.Sub(start)}, nil
}
