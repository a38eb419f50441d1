package batch

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/compress"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceBatch is a ~1 MiB batch as a producer sends it: records of valueBytes with a
// short key, compressed with codec.
func produceBatch(tb testing.TB, codec int8, valueBytes int) []byte {
	n := (1 << 20) / (valueBytes + 16)
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i].Key = fmt.Appendf(nil, "key-%06d", i)
		recs[i].Value = fmt.Appendf(nil, "%0*d", valueBytes, i)
	}
	return mustEncode(tb, idempotentHeader(), recs, codec)
}

// BenchmarkValidateProduce is the produce path's validation of one ~1 MiB (uncompressed
// size) batch, with the options the broker passes. b.SetBytes is the uncompressed size, so
// MB/s compares codecs by the records they carry.
func BenchmarkValidateProduce(b *testing.B) {
	for _, codec := range allCodecs {
		for _, valueBytes := range []int{100, 1000} {
			raw := produceBatch(b, codec, valueBytes)
			b.Run(fmt.Sprintf("%s/%dB", compress.Name(codec), valueBytes), func(b *testing.B) {
				b.SetBytes(1 << 20)
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					if _, err := Validate(raw, ValidateOptions{MaxBatchBytes: 16 << 20}); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, cpu0)
			})
		}
	}
}

// processCPU is the CPU time the process used so far. On a shared machine wall time per
// op swings with the load; CPU time per op ("cpu-ns/op") much less.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(processCPU()-since)/float64(b.N), "cpu-ns/op")
}
