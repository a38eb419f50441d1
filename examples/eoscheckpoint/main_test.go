package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exactq/exactq/eos"
	"github.com/exactq/exactq/eos/eostest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The program is stopped like a kill twice, once after preparing a checkpoint it never
// stored (the restart must abort that transaction and count its inputs again) and once
// after storing a checkpoint it never committed (the restart must commit it), then runs to
// the end. The committed outputs are key=1..key=n exactly once for every key, the stored
// counts are n, and every input was acknowledged (the group holds nothing).
func TestCheckpointLoopExactlyOnceAcrossCrashes(t *testing.T) {
	b := eostest.Start(t, eostest.TwoPhaseCommit())
	const parts, keys, perKey = 2, 5, 12
	eostest.CreateTopic(t, b.Addr, "lines", parts)
	eostest.CreateTopic(t, b.Addr, "counts", 1)
	var recs []*kgo.Record
	for i := range keys * perKey {
		recs = append(recs, &kgo.Record{Topic: "lines", Partition: int32(i % parts), Key: fmt.Appendf(nil, "k%d", i%keys), Value: []byte("x")})
	}
	eostest.ProduceRecords(t, b.Addr, recs)
	state := filepath.Join(t.TempDir(), "counter.ckpt")
	args := func(extra ...string) []string {
		return append([]string{"-brokers", b.Addr, "-in", "lines", "-out", "counts", "-group", "counters", "-txn-id", "counter-1",
			"-state", state, "-checkpoint-interval", "100ms", "-from-earliest"}, extra...)
	}
	ctx := eostest.Context(t)

	for _, point := range []string{"prepared", "stored"} {
		if err := run(ctx, args("-crash-after", "1", "-crash-point", point), io.Discard); !errors.Is(err, errCrash) {
			t.Fatalf("run crashing at %s: %v", point, err)
		}
	}
	// The second crash left a stored checkpoint whose transaction is prepared, not committed.
	stored, err := loadCheckpoint(state)
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := eos.DecodeSnapshot(stored.EOS); err != nil || !snap.Prepared {
		t.Fatalf("stored checkpoint %d holds snapshot %+v, %v; want a prepared transaction", stored.ID, snap, err)
	}

	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(rctx, args(), io.Discard) }()
	eostest.WaitDrained(t, b.Addr, "counters", "lines", parts)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("final run: %v", err)
	}

	var want []string
	for k := range keys {
		for n := 1; n <= perKey; n++ {
			want = append(want, fmt.Sprintf("k%d=%d", k, n))
		}
	}
	eostest.ExactlyOnce(t, eostest.Committed(t, b.Addr, "counts", 1), want)
	final, err := loadCheckpoint(state)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		if n := final.Counts[fmt.Sprintf("k%d", k)]; n != perKey {
			t.Fatalf("stored count of k%d is %d, want %d (counts %v)", k, n, perKey, final.Counts)
		}
	}
}

// Bad flags are refused before anything connects.
func TestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-in", "lines"}, "-out"},
		{[]string{"-in", "a", "-out", "b", "-crash-point", "later"}, "crash-point"},
	} {
		if _, err := parse(c.args, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parse(%q) = %v, want an error about %s", c.args, err, c.want)
		}
	}
}
