package compat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/exactq/exactq/internal/testbroker"
)

// saramaTxnProducer is a transactional SyncProducer (idempotent, acks=all, one request in
// flight, as sarama requires for transactions).
func saramaTxnProducer(t *testing.T, addr string, v sarama.KafkaVersion, txnID string) sarama.SyncProducer {
	t.Helper()
	cfg := saramaConfig(v)
	cfg.ClientID = "exactq-compat-sarama-" + txnID
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = txnID
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond
	cfg.Producer.Transaction.Retry.Backoff = 50 * time.Millisecond
	p, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("NewSyncProducer (transactional %s, %s): %v", txnID, v, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestSaramaTransactions: sarama's transactional producer and its read_committed consumer
// group, at the newest protocol version sarama knows and at its default (2.8); both speak
// transaction protocol version 1 (EndTxn below v5), which the broker must keep serving.
//
//  1. A transactional SyncProducer commits 50 records, aborts 50, commits 50 more to a
//     2-partition topic; kgo read_committed reads exactly the 100 committed ones,
//     read_uncommitted all 150.
//  2. A consume-transform-produce pipeline: a sarama ConsumerGroup with
//     Consumer.IsolationLevel=ReadCommitted (never shown an aborted record) reads that
//     topic, and per batch of 30 a second transactional producer sends the transformed
//     records and AddMessageToTxnWithGroupMetadata (TxnOffsetCommit with the session's
//     generation and member id) and commits. Its 2nd batch is aborted instead and the
//     session restarted, so those inputs are fetched again from the committed offsets.
//     kgo read_committed then sees each committed input's output exactly once, read_
//     uncommitted the aborted copies too, and the group's offsets are past the last input.
func TestSaramaTransactions(t *testing.T) {
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	for _, sv := range saramaVersions[:2] {
		t.Run(sv.name, func(t *testing.T) {
			start := time.Now()
			src, out, group := "sarama-txn-src-"+sv.name, "sarama-txn-out-"+sv.name, "sarama-eos-"+sv.name
			createTopic(t, adm, src, 2, nil)
			createTopic(t, adm, out, 2, nil)

			// 1. committed, aborted, committed.
			p := saramaTxnProducer(t, tb.Addr, sv.version, "sarama-src-"+sv.name)
			committedKeys := map[string]bool{}
			for i, tx := range []struct {
				prefix string
				commit bool
			}{{"c1", true}, {"ab", false}, {"c2", true}} {
				if err := p.BeginTxn(); err != nil {
					t.Fatalf("BeginTxn %d: %v", i, err)
				}
				var msgs []*sarama.ProducerMessage
				for j := 0; j < 50; j++ {
					k := fmt.Sprintf("%s-%03d", tx.prefix, j)
					msgs = append(msgs, &sarama.ProducerMessage{Topic: src, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder("v-" + k)})
					if tx.commit {
						committedKeys[k] = true
					}
				}
				if err := p.SendMessages(msgs); err != nil {
					t.Fatalf("SendMessages in transaction %d: %v", i, err)
				}
				if p.TxnStatus()&sarama.ProducerTxnFlagInTransaction == 0 {
					t.Fatalf("transaction %d: status %v, want in transaction", i, p.TxnStatus())
				}
				end, endName := p.CommitTxn, "CommitTxn"
				if !tx.commit {
					end, endName = p.AbortTxn, "AbortTxn"
				}
				if err := end(); err != nil {
					t.Fatalf("%s %d: %v (status %v)", endName, i, err, p.TxnStatus())
				}
			}
			stableOutput(t, adm, src)
			rc := readAllRecords(t, tb.Addr, src, true)
			if len(rc) != 100 {
				t.Fatalf("read_committed reads %d records of %s, want the 100 committed", len(rc), src)
			}
			lastData := map[int32]int64{} // the group will commit last-consumed+1
			for _, r := range rc {
				if !committedKeys[string(r.Key)] {
					t.Fatalf("read_committed returned %q at %d@%d from the aborted transaction", r.Key, r.Partition, r.Offset)
				}
				lastData[r.Partition] = r.Offset + 1
			}
			if ru := readAllRecords(t, tb.Addr, src, false); len(ru) != 150 {
				t.Fatalf("read_uncommitted reads %d records of %s, want 150", len(ru), src)
			}

			// 2. the pipeline.
			h := &saramaPipe{
				t: t, prod: saramaTxnProducer(t, tb.Addr, sv.version, "sarama-pipe-"+sv.name),
				group: group, out: out, batchSize: 30, abortAt: 2,
			}
			cfg := saramaConfig(sv.version)
			cfg.ClientID = "exactq-compat-sarama-group"
			cfg.Consumer.IsolationLevel = sarama.ReadCommitted
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			cfg.Consumer.Offsets.AutoCommit.Enable = false
			cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
			cg, err := sarama.NewConsumerGroup([]string{tb.Addr}, group, cfg)
			if err != nil {
				t.Fatalf("NewConsumerGroup: %v", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			consumed := make(chan error, 1)
			go func() {
				for ctx.Err() == nil {
					if err := cg.Consume(ctx, []string{src}, h); err != nil {
						consumed <- err
						return
					}
				}
				consumed <- nil
			}()
			go func() {
				for err := range cg.Errors() {
					h.fail(fmt.Errorf("consumer group: %w", err))
				}
			}()
			stopped := false
			stop := func() {
				if stopped {
					return
				}
				stopped = true
				cancel()
				if err := <-consumed; err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("Consume: %v", err)
				}
				if err := cg.Close(); err != nil {
					t.Errorf("close consumer group: %v", err)
				}
			}
			t.Cleanup(stop)
			waitGroupCaughtUp(t, adm, group, src, lastData, 60*time.Second, h.failed)
			stop()
			if err := h.failed(); err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			aborted, commits, sessions := h.abortedKeys, h.commits, h.sessions
			h.mu.Unlock()
			if len(aborted) == 0 || sessions < 2 {
				t.Fatalf("the injected abort did not happen (aborted %d records, %d sessions)", len(aborted), sessions)
			}

			stableOutput(t, adm, out)
			outC := readAllRecords(t, tb.Addr, out, true)
			seen := map[string]int{}
			for _, r := range outC {
				k := strings.TrimPrefix(string(r.Key), "out-")
				if !committedKeys[k] || string(r.Value) != "T(v-"+k+")" {
					t.Fatalf("output %d@%d: key %q value %q is no transformed committed input", r.Partition, r.Offset, r.Key, r.Value)
				}
				seen[k]++
			}
			for k := range committedKeys {
				if seen[k] != 1 {
					t.Fatalf("read_committed sees the output of %s %d times, want exactly once (%d outputs for %d inputs)", k, seen[k], len(outC), len(committedKeys))
				}
			}
			outU := readAllRecords(t, tb.Addr, out, false)
			all := map[string]int{}
			for _, r := range outU {
				all[strings.TrimPrefix(string(r.Key), "out-")]++
			}
			for _, k := range aborted {
				if all[k] < 2 {
					t.Fatalf("read_uncommitted sees %s %d times; it was aborted once and then committed", k, all[k])
				}
			}
			if len(outU) != len(outC)+len(aborted) {
				t.Fatalf("read_uncommitted reads %d outputs, want %d committed + %d aborted", len(outU), len(outC), len(aborted))
			}
			t.Logf("%d committed pipeline transactions, %d aborted outputs redone, %d sessions (%v)", commits, len(aborted), sessions, time.Since(start).Round(time.Millisecond))
		})
	}
}

// saramaPipe is a sarama ConsumerGroupHandler that transforms batches of records in
// transactions of one shared transactional producer (one transaction at a time).
type saramaPipe struct {
	t         *testing.T
	prod      sarama.SyncProducer
	group     string
	out       string
	batchSize int
	abortAt   int // the batch that is aborted (then redone from the committed offsets)

	mu          sync.Mutex // one transaction at a time; guards the fields below
	batches     int
	commits     int
	sessions    int
	abortedKeys []string
	err         error
}

func (h *saramaPipe) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

func (h *saramaPipe) failed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *saramaPipe) Setup(sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	h.sessions++
	h.mu.Unlock()
	return nil
}

func (h *saramaPipe) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaPipe) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	var batch []*sarama.ConsumerMessage
	tick := time.NewTicker(200 * time.Millisecond) // flushes a partial last batch
	defer tick.Stop()
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil // session over; the unprocessed batch is fetched again later
			}
			if strings.HasPrefix(string(m.Key), "ab-") {
				h.fail(fmt.Errorf("read_committed consumer group got %q at %s[%d]@%d from an aborted transaction", m.Key, m.Topic, m.Partition, m.Offset))
				return nil
			}
			batch = append(batch, m)
			if len(batch) < h.batchSize {
				continue
			}
		case <-tick.C:
			if len(batch) == 0 {
				continue
			}
		case <-sess.Context().Done():
			return nil
		}
		restart, err := h.process(sess, batch)
		batch = nil
		if err != nil {
			h.fail(err)
			return err
		}
		if restart {
			return nil // ends the session: the next one resumes from the committed offsets
		}
	}
}

// process runs one transaction for batch; restart says the session must be restarted
// because the transaction was aborted.
func (h *saramaPipe) process(sess sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) (restart bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.prod.BeginTxn(); err != nil {
		return false, fmt.Errorf("BeginTxn: %w", err)
	}
	h.batches++
	var msgs []*sarama.ProducerMessage
	for _, m := range batch {
		msgs = append(msgs, &sarama.ProducerMessage{
			Topic: h.out,
			Key:   sarama.StringEncoder("out-" + string(m.Key)),
			Value: sarama.StringEncoder("T(" + string(m.Value) + ")"),
		})
	}
	abort := func(why error) (bool, error) {
		if err := h.prod.AbortTxn(); err != nil {
			return false, fmt.Errorf("AbortTxn after %v: %w", why, err)
		}
		for _, m := range batch {
			h.abortedKeys = append(h.abortedKeys, string(m.Key))
		}
		return true, nil
	}
	if err := h.prod.SendMessages(msgs); err != nil {
		if h.prod.TxnStatus()&sarama.ProducerTxnFlagAbortableError != 0 {
			return abort(err)
		}
		return false, fmt.Errorf("SendMessages (status %v): %w", h.prod.TxnStatus(), err)
	}
	last := batch[len(batch)-1]
	md := sarama.NewConsumerGroupMetadataFromSession(sess, h.group, nil)
	if err := h.prod.AddMessageToTxnWithGroupMetadata(last, md, nil); err != nil {
		if h.prod.TxnStatus()&sarama.ProducerTxnFlagAbortableError != 0 {
			return abort(err) // e.g. a rebalance fenced this generation
		}
		return false, fmt.Errorf("AddMessageToTxn %s[%d]@%d (generation %d): %w", last.Topic, last.Partition, last.Offset, md.GenerationID, err)
	}
	if h.batches == h.abortAt {
		return abort(errors.New("injected abort"))
	}
	if err := h.prod.CommitTxn(); err != nil {
		if h.prod.TxnStatus()&sarama.ProducerTxnFlagAbortableError != 0 {
			return abort(err)
		}
		return false, fmt.Errorf("CommitTxn (status %v): %w", h.prod.TxnStatus(), err)
	}
	h.commits++
	return false, nil
}
