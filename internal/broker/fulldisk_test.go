package broker_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/internal/testdisk"
)

// syncBuffer is a log sink tests read while the broker writes to it.
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

// A broker whose disk is full starts (it needs to write nothing to start), serves what it
// has, refuses writes with KAFKA_STORAGE_ERROR and says so in its log at error level; once
// space returns, writes work again. Before the fix it could not start
// ("producer-ids.json.tmp: no space left on device") and a full disk logged nothing.
func TestStartWithFullDisk(t *testing.T) {
	disk := testdisk.Small(t, 16<<20)
	data := filepath.Join(disk, "data")
	var logs syncBuffer
	withLog := func(c *broker.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	tb := testbroker.Start(t, testbroker.WithDataDir(data), withLog)
	cl := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctxT(t), 2, 1, nil, "full"); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "full", 100)
	if _, err := adm.CommitOffsets(ctxT(t), "g", kadm.OffsetsFromRecords(kgo.Record{Topic: "full", Partition: 0, Offset: 5})); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	tb.Stop()

	free := testdisk.Fill(t, disk, "filler", 0)
	tb.Restart()
	got := consumeAll(t, tb.Addr, "full", 100)
	if n := len(got[0]) + len(got[1]); n != 100 {
		t.Fatalf("read %d records on a full disk, want 100", n)
	}
	// Starting removed files (the clean-shutdown markers): fill what they freed.
	freeMore := testdisk.Fill(t, disk, "filler2", 0)
	prod := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0),
		kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	rnd := make([]byte, 100<<10)
	rand.Read(rnd)
	err := prod.ProduceSync(ctxT(t), &kgo.Record{Topic: "full", Value: rnd}).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce on a full disk: %v, want KAFKA_STORAGE_ERROR", err)
	}
	// The start (the metadata log cannot take its new term, so the producer-id
	// reservation fails) and the refused write are all in the log, with their cause.
	for _, want := range []string{"metadata log stopped", "log write failed"} {
		if !hasErrorLine(logs.String(), want, "no space left on device") {
			t.Fatalf("no error-level line %q with the cause in the log:\n%s", want, logs.String())
		}
	}
	if !hasErrorLine(logs.String(), "storage error: reserve producer ids", "") {
		t.Fatalf("the failed producer-id reservation is not logged:\n%s", logs.String())
	}
	// A stop on the full disk is clean too: the snapshot it cannot write is only logged.
	// (The metadata log reopening itself after its failed election may have freed a few
	// bytes of its torn tail: fill them first.)
	prod.Close()
	freeLast := testdisk.Fill(t, disk, "filler3", 0)
	tb.Stop()
	if !hasErrorLine(logs.String(), "storage error: producer-state snapshot", "no space left on device") {
		t.Fatalf("the snapshot that could not be written was not logged:\n%s", logs.String())
	}
	tb.Restart()
	free()
	freeMore()
	freeLast()
	prod = newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod.ProduceSync(ctxT(t), &kgo.Record{Topic: "full", Value: rnd}).FirstErr(); err != nil {
		t.Fatalf("produce once space returned: %v", err)
	}
	if got := consumeAll(t, tb.Addr, "full", 101); len(got[0])+len(got[1]) != 101 {
		t.Fatalf("after space returned: %d records, want 101", len(got[0])+len(got[1]))
	}
}

// hasErrorLine reports whether logs has an error-level line with msg and cause.
func hasErrorLine(logs, msg, cause string) bool {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, msg) && strings.Contains(line, cause) {
			return true
		}
	}
	return false
}
