package log

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkOpen opens a 256 MiB log (64 KiB batches, one segment: a P7 partition's shape,
// larger) from the page cache: after a clean Close ("clean"), and as a crash leaves it with
// no clean-shutdown marker and no recovery point ("crash": the whole segment is scanned).
func BenchmarkOpen(b *testing.B) {
	const logBytes = 256 << 20
	dir := b.TempDir()
	cfg := DefaultConfig()
	l := openT(b, dir, cfg, nil)
	bb := valueBatch(64, 1000, 1_700_000_000_000)
	for n := 0; n < logBytes/len(bb); n++ {
		appendT(b, l, append([]byte(nil), bb...))
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"clean", "crash"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(logBytes)
			for i := 0; i < b.N; i++ {
				if mode == "crash" {
					b.StopTimer()
					for _, name := range []string{"clean-shutdown", "recovery-point"} {
						if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
							b.Fatal(err)
						}
					}
					b.StartTimer()
				}
				l, err := Open(dir, cfg, Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if l.EndOffset() != int64(logBytes/len(bb))*64 {
					b.Fatalf("end offset %d", l.EndOffset())
				}
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
