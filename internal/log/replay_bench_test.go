package log

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkReplayScan reads what rebuilding producer state needs from a 256 MiB log of
// 64 KiB batches (page cache): every batch header, from the start.
func BenchmarkReplayScan(b *testing.B) {
	const logBytes = 256 << 20
	l := openT(b, b.TempDir(), DefaultConfig(), nil)
	defer l.Close()
	bb := valueBatch(64, 1000, 1_700_000_000_000)
	for n := 0; n < logBytes/len(bb); n++ {
		appendT(b, l, append([]byte(nil), bb...))
	}
	b.SetBytes(logBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		if err := l.ScanHeaders(0, func(h *kmsg.RecordBatch) error {
			n++
			return nil
		}); err != nil || n != logBytes/len(bb) {
			b.Fatalf("%d batches, %v", n, err)
		}
	}
}
