package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/await"
)

// ctxFor returns a context that ends after d or at test cleanup, whichever comes first.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newClient returns a kgo client for addr, closed at test cleanup.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns a kadm client for addr, closed at test cleanup.
func newAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, addr))
}

// createTopic creates topic with the given partitions and configs and fails the test if
// the broker refuses.
func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(ctxFor(t, 30*time.Second), partitions, 1, configs, topic)
	if err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
	if resp.Err != nil {
		t.Fatalf("CreateTopic %s: %v (%s)", topic, resp.Err, resp.ErrMessage)
	}
}

// eventually polls cond until it returns nil or the deadline passes, then fails with the
// last error. It is for conditions another party makes true (metadata propagation), not
// for waiting out time.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	if err := await.Until(d, 20*time.Millisecond, cond); err != nil {
		t.Fatalf("%s: still not true after %v: %v", what, d, err)
	}
}

// endOffsets returns the high watermark of every partition of topic.
func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	lo, err := adm.ListEndOffsets(ctxFor(t, 30*time.Second), topic)
	if err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	if err := lo.Error(); err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// fmtKey and fmtValue make record i's key and a compressible value of varying length.
func fmtKey(i int) string { return fmt.Sprintf("key-%06d", i) }

func fmtValue(tag string, i int) string {
	v := fmt.Sprintf("value-%s-%06d|", tag, i)
	for n := i % 17; n > 0; n-- {
		v += "the quick brown fox jumps over the lazy dog "
	}
	return v
}
