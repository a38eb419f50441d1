package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// WriteTxnMarkers from a client (as kafka-transactions abort sends it) ends a transaction
// the coordinator left open: read_committed sees past it. The producer-epoch, coordinator
// epoch and transaction-version-2 checks refuse stale markers, and partitions not here
// are answered by routing.
func TestWriteTxnMarkersAbortsOpenTransaction(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	ctx := ctxT(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "hang"); err != nil {
		t.Fatal(err)
	}
	// A producer that begins a transaction and never ends it; its second InitProducerId
	// bumps the epoch to 1, so epoch 0 is stale.
	var pid int64
	var epoch int16
	for range 2 {
		req := kmsg.NewPtrInitProducerIDRequest()
		id := "txn-test" // produceTxn's transactional id
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = 600_000
		r, err := req.RequestWith(ctx, cl)
		if err != nil || r.ErrorCode != 0 {
			t.Fatalf("init: %v %+v", err, r)
		}
		pid, epoch = r.ProducerID, r.ProducerEpoch
	}
	if epoch != 1 {
		t.Fatalf("epoch after two inits %d, want 1", epoch)
	}
	produceTxn(t, cl, "hang", txnBatch(t, pid, epoch, 0, "h1", "h2")) // offsets 0-1, open
	lso := func() int64 {
		t.Helper()
		o, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, "hang")
		if err != nil {
			t.Fatal(err)
		}
		return o["hang"][0].Offset
	}
	if got := lso(); got != 0 {
		t.Fatalf("last stable offset with the transaction open: %d, want 0", got)
	}

	type marker struct {
		epoch            int16
		coordinatorEpoch int32
		tv               int8
		parts            map[string][]int32
	}
	write := func(ms ...marker) map[string]map[int32]int16 {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		for _, m := range ms {
			rm := kmsg.NewWriteTxnMarkersRequestMarker()
			rm.ProducerID, rm.ProducerEpoch, rm.Committed = pid, m.epoch, false
			rm.CoordinatorEpoch, rm.TransactionVersion = m.coordinatorEpoch, m.tv
			for topic, ps := range m.parts {
				rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				rt.Topic, rt.Partitions = topic, ps
				rm.Topics = append(rm.Topics, rt)
			}
			req.Markers = append(req.Markers, rm)
		}
		resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Markers) != 1 || resp.Markers[0].ProducerID != pid {
			t.Fatalf("want one entry for producer %d: %+v", pid, resp.Markers)
		}
		out := map[string]map[int32]int16{}
		for _, rt := range resp.Markers[0].Topics {
			out[rt.Topic] = map[int32]int16{}
			for _, rp := range rt.Partitions {
				out[rt.Topic][rp.Partition] = rp.ErrorCode
			}
		}
		return out
	}
	hang := map[string][]int32{"hang": {0}}
	expect := func(what string, got map[string]map[int32]int16, topic string, p int32, want *kerr.Error) {
		t.Helper()
		code, ok := got[topic][p]
		wantCode := int16(0)
		if want != nil {
			wantCode = want.Code
		}
		if !ok || code != wantCode {
			t.Fatalf("%s: %s/%d answered %v (present %v), want %v", what, topic, p, kerr.ErrorForCode(code), ok, want)
		}
	}

	expect("stale producer epoch", write(marker{epoch: 0, coordinatorEpoch: 5, parts: hang}), "hang", 0, kerr.InvalidProducerEpoch)
	expect("transaction version 2 at the current epoch, transaction open",
		write(marker{epoch: 1, coordinatorEpoch: 5, tv: 2, parts: hang}), "hang", 0, kerr.InvalidProducerEpoch)
	if got := lso(); got != 0 {
		t.Fatalf("refused markers moved the last stable offset to %d", got)
	}

	got := write(marker{epoch: 1, coordinatorEpoch: 5, parts: map[string][]int32{"hang": {0, 7}, "nowhere": {0}}})
	expect("abort", got, "hang", 0, nil)
	expect("abort", got, "hang", 7, kerr.UnknownTopicOrPartition)
	expect("abort", got, "nowhere", 0, kerr.UnknownTopicOrPartition)
	if got := lso(); got != 3 {
		t.Fatalf("last stable offset after the abort marker: %d, want 3", got)
	}
	if got := readValues(t, tb.Addr, "hang", true); len(got) != 0 {
		t.Fatalf("read_committed after the abort: %v, want nothing", got)
	}
	if got := readValues(t, tb.Addr, "hang", false); len(got) != 2 {
		t.Fatalf("read_uncommitted after the abort: %v, want h1 h2", got)
	}

	expect("older coordinator epoch", write(marker{epoch: 1, coordinatorEpoch: 4, parts: hang}), "hang", 0, kerr.TransactionCoordinatorFenced)
	// Kafka's KAFKA-19999: a version-2 marker retried at the epoch it was written with,
	// nothing open any more, is accepted.
	expect("transaction version 2 retry", write(marker{epoch: 1, coordinatorEpoch: 5, tv: 2, parts: hang}), "hang", 0, nil)
}
