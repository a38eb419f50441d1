package peer

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The decision in docs/architecture.md ("Own connections, not kgo") measured: round trips
// of a Heartbeat to one peer (the fake, answering at once), 32 callers in flight, through
// this transport and through a *kgo.Client seeded with only that peer.
func BenchmarkRoundTrip(b *testing.B) {
	fp := startFake(b, nil)
	run := func(b *testing.B, send func(ctx context.Context) error) {
		ctx := context.Background()
		b.ResetTimer()
		var wg sync.WaitGroup
		per := b.N/MaxInFlight + 1
		for range MaxInFlight {
			wg.Go(func() {
				for range per {
					if err := send(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(per*MaxInFlight)/b.Elapsed().Seconds(), "rt/s")
	}
	b.Run("peer", func(b *testing.B) {
		tr := newTCP(b, fp.addr)
		run(b, func(ctx context.Context) error { _, err := tr.Send(ctx, 1, Control, heartbeat(1)); return err })
	})
	b.Run("kgo", func(b *testing.B) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(fp.addr))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		br := cl.SeedBrokers()[0]
		run(b, func(ctx context.Context) error { _, err := br.Request(ctx, heartbeat(1)); return err })
	})
}
