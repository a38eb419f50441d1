package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/eos/eostest"
)

// syncBuffer is a log shared by the program's goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// dbRows returns, per value, how many rows hold it and the highest delivery count.
func dbRows(t *testing.T, path string) (map[string]int, map[string]int) {
	t.Helper()
	d, err := openDB(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	rs, err := d.sql.Query(`SELECT CAST(v AS TEXT), COUNT(*), MAX(delivery_count) FROM inputs GROUP BY v`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	times, counts := map[string]int{}, map[string]int{}
	for rs.Next() {
		var v string
		var n, c int
		if err := rs.Scan(&v, &n, &c); err != nil {
			t.Fatal(err)
		}
		times[v], counts[v] = n, c
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return times, counts
}

// The program is crashed (the Checkpointer abandoned, nothing closed) at checkpoint 2,
// before its SQL transaction commits and after, on a real SQLite file; then it runs until
// the group is drained. Every input is in the table exactly once and the group holds
// nothing (each input acknowledged exactly once). Before the SQL commit, Recover (with
// checkpoint 1's snapshot, from the database) aborts the prepared broker transaction and
// the checkpoint's inputs are delivered again; after it, Recover (with checkpoint 2's
// snapshot) commits it and they never come back.
func TestExactlyOnceIntoSQLiteAcrossCrashes(t *testing.T) {
	b := eostest.Start(t, eostest.TwoPhaseCommit())
	const n = 60
	inputs := eostest.Inputs(n)
	for _, point := range []string{crashBeforeSQLCommit, crashAfterSQLCommit} {
		t.Run(point, func(t *testing.T) {
			topic, group := "events-"+point, "loader-"+point
			eostest.CreateTopic(t, b.Addr, topic, 1)
			// Small produce calls make small log batches, so checkpoints of a few inputs.
			for i := 0; i < n; i += 5 {
				eostest.Produce(t, b.Addr, topic, 1, inputs[i:i+5])
			}
			path := filepath.Join(t.TempDir(), "events.db")
			o := options{brokers: []string{b.Addr}, group: group, topic: topic, txnID: "eosdb-" + point, dbPath: path,
				checkpointInterval: 100 * time.Millisecond, batch: 10, fromEarliest: true}
			ctx := eostest.Context(t)

			var crashed []row
			crashing := o
			crashing.crash = func(p string, k int64, rows []row) error {
				if p == point && k == 2 {
					crashed = rows
					return errCrash
				}
				return nil
			}
			var log1 syncBuffer
			if err := run(ctx, crashing, &log1); !errors.Is(err, errCrash) {
				t.Fatalf("run crashing %s checkpoint 2: %v; log:\n%s", point, err, log1.String())
			}
			before, _ := dbRows(t, path)
			want := 0 // rows of each input of checkpoint 2 in the table after the crash
			if point == crashAfterSQLCommit {
				want = 1
			}
			if len(crashed) == 0 {
				t.Fatal("checkpoint 2 had no inputs")
			}
			for _, r := range crashed {
				if before[string(r.value)] != want {
					t.Fatalf("after the crash the table holds input %s %d times", r.value, before[string(r.value)])
				}
			}

			rctx, stop := context.WithCancel(ctx)
			var log2 syncBuffer
			done := make(chan error, 1)
			go func() { done <- run(rctx, o, &log2) }()
			eostest.WaitDrained(t, b.Addr, group, topic, 1)
			stop()
			if err := <-done; err != nil {
				t.Fatalf("final run: %v; log:\n%s", err, log2.String())
			}

			times, counts := dbRows(t, path)
			var bad []string
			for _, v := range inputs {
				if times[v] != 1 {
					bad = append(bad, fmt.Sprintf("%s %d times", v, times[v]))
				}
			}
			if len(times) != n {
				bad = append(bad, fmt.Sprintf("%d distinct values, want %d", len(times), n))
			}
			if len(bad) > 0 {
				t.Fatalf("table inputs: %s", strings.Join(bad, ", "))
			}
			wantRecovery := "found: true, committed: false"
			if point == crashAfterSQLCommit {
				wantRecovery = "found: true, committed: true"
			}
			if !strings.Contains(log2.String(), "checkpoint "+map[string]string{crashBeforeSQLCommit: "1", crashAfterSQLCommit: "2"}[point]+"; open broker transaction "+wantRecovery) {
				t.Errorf("recovery: want %q; log:\n%s", wantRecovery, log2.String())
			}
			for _, r := range crashed {
				c := counts[string(r.value)]
				if point == crashBeforeSQLCommit && c < 2 {
					t.Errorf("input %s of the rolled-back checkpoint stored with delivery count %d: it did not come back", r.value, c)
				}
				if point == crashAfterSQLCommit && c != 1 {
					t.Errorf("input %s of the committed checkpoint stored with delivery count %d: it came back", r.value, c)
				}
			}
			t.Logf("%s: checkpoint 2 had %d inputs; recovery %s", point, len(crashed), wantRecovery)
		})
	}
}
