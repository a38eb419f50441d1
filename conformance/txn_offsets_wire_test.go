package conformance

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestOffsetsOnlyTransaction: a consume-transform-produce transaction whose inputs produce
// no output holds only the group's offsets (Kafka: AddOffsetsToTxn and TxnOffsetCommit
// under transactions v1, TxnOffsetCommit v5 alone under v2, then EndTxn). It commits for
// real under both versions: the transaction completes, the group's committed offsets move
// to the end of the input, and under v2 the commit bumps the producer epoch while under v1
// it does not (KIP-890), which shows the version path taken. kgo's GroupTransactSession is the client; a client whose
// MaxVersions stop Produce at v11 speaks v1 whatever the broker finalized.
func TestOffsetsOnlyTransaction(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []kgo.Opt
		wantBump bool
	}{
		{"v2", nil, true},
		{"v1", []kgo.Opt{kgo.MaxVersions(kversion.V3_8_0())}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			const in, n = "oo-in", 10
			e.createTopic(in, 1)
			e.produce(in, 0, n)
			group, txnID := "oo-group-"+tc.name, "oo-txn-"+tc.name
			s, err := kgo.NewGroupTransactSession(append([]kgo.Opt{
				kgo.SeedBrokers(e.tb.Addr),
				kgo.TransactionalID(txnID),
				kgo.ConsumerGroup(group),
				kgo.ConsumeTopics(in),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.RequireStableFetchOffsets(),
			}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)

			txnEpoch := func() int16 {
				t.Helper()
				ds, err := e.adm.DescribeTransactions(e.ctx(), txnID)
				if err != nil {
					t.Fatal(err)
				}
				d, err := ds.On(txnID, nil)
				if err != nil || d.Err != nil {
					t.Fatalf("describe %s: %v %v", txnID, err, d.Err)
				}
				return d.ProducerEpoch
			}
			if err := s.Begin(); err != nil {
				t.Fatal(err)
			}
			got := 0
			for got < n {
				fs := s.PollFetches(e.ctx())
				if err := fs.Err(); err != nil {
					t.Fatalf("poll after %d records: %v", got, err)
				}
				got += fs.NumRecords()
			}
			before := txnEpoch()
			committed, err := s.End(e.ctx(), kgo.TryCommit)
			if err != nil || !committed {
				t.Fatalf("End(TryCommit) of an offsets-only transaction: committed %v, %v", committed, err)
			}

			// The coordinator completes the transaction once the markers are written,
			// and the offsets are the group's from the marker on (kadm's OffsetFetch does
			// not set RequireStable: before the marker it sees the last stable commit).
			waitTxnState(t, e, txnID, "CompleteCommit")
			offs, err := e.adm.FetchOffsets(e.ctx(), group)
			if err != nil || offs.Error() != nil {
				t.Fatalf("fetch offsets: %v %v", err, offs.Error())
			}
			if o, ok := offs.Lookup(in, 0); !ok || o.At != n {
				t.Fatalf("committed offset of %s/0: %+v (found %v), want %d", in, o, ok, n)
			}
			if after := txnEpoch(); (after != before) != tc.wantBump {
				t.Fatalf("producer epoch %d -> %d across the commit; want a bump: %v", before, after, tc.wantBump)
			}
		})
	}
}

// waitTxnState polls DescribeTransactions until id is in state want: EndTxn is answered
// before the markers are written and the transaction completes.
func waitTxnState(t *testing.T, e *env, id, want string) {
	t.Helper()
	eventually(t, "transaction "+id+" in state "+want, func() (bool, string) {
		ds, err := e.adm.DescribeTransactions(e.ctx(), id)
		if err != nil {
			return false, err.Error()
		}
		d, err := ds.On(id, nil)
		if err != nil {
			return false, err.Error()
		}
		return d.State == want, "state " + d.State
	})
}
