package crashtest

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestEOSDBProcessKill runs examples/eosdb (exactly once from a share group into SQLite,
// consume-only) as a process and SIGKILLs it (its -crash-at) at checkpoint 2, before the
// SQL transaction holding the rows and the snapshot commits and after; then runs it again
// until the group is drained and stops it with SIGTERM. The table holds every input
// exactly once, the group is drained (every input acknowledged once), and the restart's
// Recover did what the database said: abort (the inputs of checkpoint 2 came back, stored
// with delivery count 2) or commit (checkpoint 2's rows all have delivery count 1).
func TestEOSDBProcessKill(t *testing.T) {
	e := newLCEnv(t)
	bin := buildProgram(t, "./examples/eosdb")
	const n = 60
	for _, point := range []string{"before-sql-commit", "after-sql-commit"} {
		t.Run(point, func(t *testing.T) {
			topic, group := "eosdb-"+point, "eosdb-"+point
			createTopic(t, e.addr, topic, 1, nil)
			setGroupConfig(t, e.raw, group, "share.record.lock.duration.ms", strconv.Itoa(lcLockMs))
			produceInputs(t, e.addr, topic, rand.New(rand.NewPCG(2, 2)), inputValues(0, n), 5)
			path := filepath.Join(t.TempDir(), "events.db")
			args := []string{"-brokers", e.addr, "-group", group, "-topic", topic, "-db", path, "-txn-id", "eosdb-" + point,
				"-batch", "10", "-checkpoint-interval", "100ms", "-from-earliest"}

			crash := exec.Command(bin, append(args, "-crash-at", point+":2")...)
			out, err := crash.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
				t.Fatalf("eosdb -crash-at %s:2 ended %v, want SIGKILL; output:\n%s", point, err, out)
			}

			var log bytes.Buffer
			again := exec.Command(bin, args...)
			again.Stdout, again.Stderr = &log, &log
			if err := again.Start(); err != nil {
				t.Fatal(err)
			}
			st, lag, took := awaitShareDrained(t, e.adm, group, topic, n, 30*time.Second)
			_ = again.Process.Signal(syscall.SIGTERM)
			werr := again.Wait()
			if st != n || lag != 0 {
				t.Fatalf("share start offset %d lag %d after %v, want %d and 0; eosdb output:\n%s", st, lag, took, n, log.String())
			}
			if werr != nil {
				t.Fatalf("eosdb after SIGTERM: %v; output:\n%s", werr, log.String())
			}
			want := map[string]string{
				"before-sql-commit": "database at checkpoint 1; open broker transaction found: true, committed: false",
				"after-sql-commit":  "database at checkpoint 2; open broker transaction found: true, committed: true",
			}[point]
			if !strings.Contains(log.String(), want) {
				t.Errorf("restart: want %q; output:\n%s", want, log.String())
			}

			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rows, err := db.Query(`SELECT CAST(v AS TEXT), delivery_count, checkpoint FROM inputs`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			times := map[string]int{}
			redelivered, ckpt2 := 0, 0
			for rows.Next() {
				var v string
				var count, ckpt int
				if err := rows.Scan(&v, &count, &ckpt); err != nil {
					t.Fatal(err)
				}
				times[v]++
				if count > 1 {
					redelivered++
				}
				if ckpt == 2 {
					ckpt2++
					if point == "after-sql-commit" && count != 1 {
						t.Errorf("input %s of the committed checkpoint 2 stored with delivery count %d", v, count)
					}
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			var bad []string
			for _, v := range inputValues(0, n) {
				if times[v] != 1 {
					bad = append(bad, fmt.Sprintf("%s %d times", v, times[v]))
				}
			}
			if len(times) != n {
				bad = append(bad, fmt.Sprintf("%d distinct values, want %d", len(times), n))
			}
			if len(bad) > 0 {
				t.Errorf("table inputs: %s", strings.Join(bad, ", "))
			}
			if point == "before-sql-commit" && redelivered == 0 {
				t.Errorf("no input stored with a delivery count above 1: the rolled-back checkpoint's inputs did not come back")
			}
			checkLog(t, 0, e.sb.logs)
			t.Logf("%s: %d rows, each input once; %d stored after a redelivery; checkpoint 2 holds %d", point, len(times), redelivered, ckpt2)
		})
	}
}
