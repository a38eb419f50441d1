package twopc_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/kgoext/twopc"
)

// begin returns a producer on a fresh broker with topic out, inside a transaction.
func begin(t *testing.T, id string, opts ...kgo.Opt) (*twopc.Producer, string, func()) {
	t.Helper()
	b := startBroker(t, true)
	createTopics(t, b.Addr, "out")
	p, err := twopc.NewProducer(newClient(t, b.Addr, opts...), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.InitTransactions(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	return p, b.Addr, b.Restart
}

// wantReadOnce checks that read_committed readers read exactly values, each once, in
// this order.
func wantReadOnce(t *testing.T, addr string, values ...string) {
	t.Helper()
	got := readCommitted(t, addr, "out")
	if len(got) != len(values) {
		t.Fatalf("read %v, want %v", got, values)
	}
	last := int64(-1)
	for _, v := range values {
		offs := got[v]
		if len(offs) != 1 || offs[0] <= last {
			t.Fatalf("%s read at %v (previous value at %d): %v", v, offs, last, got)
		}
		last = offs[0]
	}
}

// TestBatchMaxBytesSendsOnProduce: a record that would make its partition's batch larger
// than the kgo client's ProducerBatchMaxBytes makes Produce send what is buffered first
// (their promises have run when it returns), so one transaction writes several batches
// of a partition, in order.
func TestBatchMaxBytesSendsOnProduce(t *testing.T) {
	p, addr, _ := begin(t, "tx-batch", kgo.ProducerBatchMaxBytes(512)) // two 200-byte records a batch
	ctx := testCtx(t)
	var values []string
	written := 0
	for i, want := range []int{0, 0, 2, 2, 4, 4} {
		v := fmt.Sprintf("big-%d-%0194d", i, i)
		values = append(values, v)
		p.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte(v)}, func(r *kgo.Record, err error) {
			if err == nil && r.Offset >= 0 {
				written++
			}
		})
		if written != want {
			t.Fatalf("after producing record %d: %d written, want %d", i, written, want)
		}
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	wantReadOnce(t, addr, values...)
}

// TestFlushInterruptedResumes: a Flush whose ctx ends leaves the records buffered (their
// promises not run); records produced afterwards queue behind them, and the commit writes
// all of them once, in produce order.
func TestFlushInterruptedResumes(t *testing.T) {
	p, addr, _ := begin(t, "tx-resume")
	ctx := testCtx(t)
	answered := 0
	count := func(*kgo.Record, error) { answered++ }
	p.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte("a")}, count)
	p.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte("b")}, count)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Flush(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("flush with an ended ctx: %v", err)
	}
	if answered != 0 {
		t.Fatalf("%d promises ran for records whose outcome is unknown", answered)
	}
	p.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte("c")}, count)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if answered != 3 {
		t.Fatalf("%d promises ran, want 3", answered)
	}
	wantReadOnce(t, addr, "a", "b", "c")
}

// TestBrokerRestartMidTransaction: the broker restarts between two writes of one
// transaction; the kgo client reconnects, the producer's sequences still line up with the
// broker's recovered producer state, and the commit makes both writes readable once.
func TestBrokerRestartMidTransaction(t *testing.T) {
	p, addr, restart := begin(t, "tx-restart")
	ctx := testCtx(t)
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	restart()
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	wantReadOnce(t, addr, "before", "after")
}

// TestAbortDropsBuffered: AbortTransaction fails the buffered records with
// ErrTransactionAborted and hides the written ones; the next transaction commits.
func TestAbortDropsBuffered(t *testing.T) {
	p, addr, _ := begin(t, "tx-abort")
	ctx := testCtx(t)
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("written")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var dropped error
	p.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte("buffered")}, func(_ *kgo.Record, err error) { dropped = err })
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(dropped, twopc.ErrTransactionAborted) {
		t.Fatalf("buffered record's outcome: %v", dropped)
	}
	commitOne(t, p, "next")
	wantReadOnce(t, addr, "next")
}

// TestPartitionerIsKgos: records are partitioned by the kgo client's partitioner, so a
// key lands where kgo's own producer puts it.
func TestPartitionerIsKgos(t *testing.T) {
	b := startBroker(t, true)
	ctx := testCtx(t)
	createTopicsN(t, b.Addr, 8, "keyed")
	p, err := twopc.NewProducer(newClient(t, b.Addr), "tx-keys")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	plain := newClient(t, b.Addr)
	spread := map[int32]bool{}
	for i := range 20 {
		key := fmt.Appendf(nil, "key-%d", i)
		ours := &kgo.Record{Topic: "keyed", Key: key}
		theirs := &kgo.Record{Topic: "keyed", Key: key}
		if err := p.ProduceSync(ctx, ours).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := plain.ProduceSync(ctx, theirs).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if ours.Partition != theirs.Partition {
			t.Fatalf("%s: partition %d, kgo's producer chose %d", key, ours.Partition, theirs.Partition)
		}
		spread[ours.Partition] = true
	}
	if len(spread) < 2 {
		t.Fatalf("20 keys all in partitions %v", spread)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFailedRecordAbortable: a record the broker refuses (MESSAGE_TOO_LARGE) makes the
// transaction abortable: its promise and the commit say so, the abort succeeds (under v1
// with a KIP-360 epoch bump, since the partition's sequences are out of step), and the
// next transaction commits; only its record is readable.
func TestFailedRecordAbortable(t *testing.T) {
	for _, v1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v1=%v", v1), func(t *testing.T) {
			b := startBroker(t, true)
			ctx := testCtx(t)
			adm := kadm.NewClient(newClient(t, b.Addr))
			maxBytes := "200"
			resp, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{"max.message.bytes": &maxBytes}, "out")
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatal(err)
			}
			p := newProducer(t, b.Addr, "tx-fail")
			if v1 {
				twopc.ForceTransactionsV1(p)
			}
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := p.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("small")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			big := &kgo.Record{Topic: "out", Value: make([]byte, 400)}
			if err := p.ProduceSync(ctx, big).FirstErr(); !errors.Is(err, twopc.ErrTransactionAbortable) || !errors.Is(err, kerr.MessageTooLarge) {
				t.Fatalf("too large a record: %v", err)
			}
			if err := p.CommitTransaction(ctx); !errors.Is(err, twopc.ErrTransactionAbortable) {
				t.Fatalf("commit after a failed record: %v", err)
			}
			_, before := p.ProducerID()
			if err := p.AbortTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if _, after := p.ProducerID(); after == before {
				t.Fatalf("epoch %d kept after aborting with sequences out of step", after)
			}
			commitOne(t, p, "next")
			wantReadOnce(t, b.Addr, "next")
		})
	}
}

// TestConcurrentProduce: goroutines producing into one transaction over four partitions
// (the producer serialises them), with Produce and Flush or with ProduceSync: the commit makes every record readable once, each
// partition's records in the order their goroutine produced them.
func TestConcurrentProduce(t *testing.T) {
	const goroutines, each = 4, 200
	b := startBroker(t, true)
	ctx := testCtx(t)
	createTopicsN(t, b.Addr, 4, "multi")
	p := newProducer(t, b.Addr, "tx-conc")
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// The key keeps a goroutine's records on one partition.
				r := &kgo.Record{Topic: "multi", Key: fmt.Appendf(nil, "g%d", g), Value: fmt.Appendf(nil, "g%d-%04d", g, i)}
				if g%2 == 1 {
					// ProduceSync's answer is the record's, even when another
					// goroutine's Flush wrote it.
					if res := p.ProduceSync(ctx, r); res.FirstErr() != nil || r.Offset < 0 {
						errs <- fmt.Errorf("ProduceSync %s: offset %d, %v", r.Value, r.Offset, res.FirstErr())
					}
					continue
				}
				p.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil {
						errs <- err
					}
				})
				if i%50 == 49 {
					if err := p.Flush(ctx); err != nil {
						errs <- err
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rd := newClient(t, b.Addr, kgo.ConsumeTopics("multi"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := map[string]int{}
	for read := 0; read < goroutines*each; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", read, goroutines*each)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			if want := fmt.Sprintf("%s-%04d", r.Key, next[string(r.Key)]); string(r.Value) != want {
				t.Fatalf("read %s, want %s", r.Value, want)
			}
			next[string(r.Key)]++
		})
	}
}

// TestCompressionIsKgos: batches are compressed with the kgo client's
// ProducerBatchCompression codec (kgo's default: snappy), as a consumer sees.
func TestCompressionIsKgos(t *testing.T) {
	b := startBroker(t, true)
	ctx := testCtx(t)
	createTopics(t, b.Addr, "out")
	cases := []struct {
		opts  []kgo.Opt
		codec uint8 // the batch attribute's codec bits
	}{{nil, 2}, {[]kgo.Opt{kgo.ProducerBatchCompression(kgo.ZstdCompression().WithLevel(2))}, 4},
		{[]kgo.Opt{kgo.ProducerBatchCompression(kgo.GzipCompression())}, 1}, {[]kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression())}, 0}}
	for i, c := range cases {
		p, err := twopc.NewProducer(newClient(t, b.Addr, c.opts...), fmt.Sprintf("tx-codec-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.InitTransactions(ctx); err != nil {
			t.Fatal(err)
		}
		commitOne(t, p, fmt.Sprintf("codec-%d", i))
	}
	rd := newClient(t, b.Addr, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]uint8{}
	for len(got) < len(cases) {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = r.Attrs.CompressionType() })
	}
	for i, c := range cases {
		if codec := got[fmt.Sprintf("codec-%d", i)]; codec != c.codec {
			t.Errorf("producer %d: codec %d, want %d", i, codec, c.codec)
		}
	}
}

// TestUnknownTopic: a record for a topic the broker does not have fails at Produce with
// UNKNOWN_TOPIC_OR_PARTITION (after kgo.UnknownTopicRetries lookups) and leaves the
// transaction committable; with kgo.AllowAutoTopicCreation the lookup creates the topic.
func TestUnknownTopic(t *testing.T) {
	p, addr, _ := begin(t, "tx-unknown")
	ctx := testCtx(t)
	res := p.ProduceSync(ctx, &kgo.Record{Topic: "missing", Value: []byte("lost")})
	if err := res.FirstErr(); !errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, twopc.ErrTransactionAbortable) {
		t.Fatalf("record for a missing topic: %v", err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("kept")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	wantReadOnce(t, addr, "kept")

	auto, err := twopc.NewProducer(newClient(t, addr, kgo.AllowAutoTopicCreation()), "tx-auto")
	if err != nil {
		t.Fatal(err)
	}
	if err := auto.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := auto.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: "created", Value: []byte("new")}
	if err := auto.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := auto.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readCommitted(t, addr, "created"); len(got["new"]) != 1 || got["new"][0] != r.Offset {
		t.Fatalf("auto-created topic read %v, record at %d", got, r.Offset)
	}
}

// TestTopicDeletedMidTransaction: the topic of buffered records is deleted before they
// are sent: the lookups of its leaders give up after kgo.UnknownTopicRetries, the records
// fail, the transaction is abortable (not the producer fatal), and the next transaction
// commits.
func TestTopicDeletedMidTransaction(t *testing.T) {
	p, addr, _ := begin(t, "tx-deleted")
	ctx := testCtx(t)
	createTopics(t, addr, "doomed")
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "doomed", Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var lost error
	p.Produce(ctx, &kgo.Record{Topic: "doomed", Value: []byte("b")}, func(_ *kgo.Record, err error) { lost = err })
	resp, err := kadm.NewClient(newClient(t, addr)).DeleteTopics(ctx, "doomed")
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	err = p.Flush(ctx)
	if !errors.Is(err, twopc.ErrTransactionAbortable) || !errors.Is(err, kerr.UnknownTopicOrPartition) || !errors.Is(lost, twopc.ErrTransactionAbortable) {
		t.Fatalf("flush to a deleted topic: %v (record: %v)", err, lost)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	commitOne(t, p, "next")
	wantReadOnce(t, addr, "next")
}
