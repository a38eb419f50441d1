package server

import (
	"math/bits"
	"sync"
)

// Request frames of pooledFrameMin to pooledFrameMax bytes are read into buffers of a
// power-of-two capacity, and a handler that keeps no reference into its request
// (Reply.BodyDone) gives the buffer back for later frames. Produce requests are the case:
// a kgo producer sends ~1 MB frames back to back, and allocating (zeroing, faulting in,
// collecting) each one cost about a quarter of the broker's produce CPU.
//
// A buffer is only ever reused after the handler said it is done with the body, so a
// handler that keeps request bytes (a JoinGroup's member metadata, say) simply does not say
// so and gets a fresh buffer each time, as before.
const (
	pooledFrameMinShift = 16 // 64 KiB
	pooledFrameMaxShift = 24 // 16 MiB
	pooledFrameMin      = 1 << pooledFrameMinShift
	pooledFrameMax      = 1 << pooledFrameMaxShift
)

// framePools[i] holds *[]byte of capacity 1<<(pooledFrameMinShift+i).
var framePools [pooledFrameMaxShift - pooledFrameMinShift + 1]sync.Pool

// frameClassCap returns the pooled capacity for a frame of n bytes, or n when frames of
// that size are not pooled.
func frameClassCap(n int) int {
	if n < pooledFrameMin || n > pooledFrameMax {
		return n
	}
	return 1 << bits.Len(uint(n-1))
}

// getFrame returns a pooled buffer of length n, or nil when none is free.
func getFrame(n int) []byte {
	if n < pooledFrameMin || n > pooledFrameMax {
		return nil
	}
	p, _ := framePools[bits.Len(uint(frameClassCap(n)))-1-pooledFrameMinShift].Get().(*[]byte)
	if p == nil {
		return nil
	}
	return (*p)[:n]
}

// putFrame gives a frame buffer back for reuse, if it has a pooled capacity. The caller no
// longer references it.
func putFrame(b []byte) {
	c := cap(b)
	if c < pooledFrameMin || c > pooledFrameMax || c&(c-1) != 0 {
		return
	}
	b = b[:c]
	framePools[bits.Len(uint(c))-1-pooledFrameMinShift].Put(&b)
}
