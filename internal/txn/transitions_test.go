package txn

import (
	"testing"
)

// These tests name the rules of Kafka 4.4's TransactionCoordinator.scala and
// TransactionMetadata.java they check, one row per (state, request) pair.

var (
	tp0 = tp("t", 0)
	tp1 = tp("t", 1)
)

// setup brings id "x" into state s and returns its producer id and epoch. Prepare* states
// are reached by failing every marker, so the id stays in the marker phase.
func setup(t *testing.T, e *env, s State) (int64, int16) {
	t.Helper()
	pid, epoch, code := e.init("x", 60000)
	if code != 0 {
		t.Fatalf("init: %d", code)
	}
	switch s {
	case Empty:
		return pid, epoch
	}
	if c := e.add1("x", pid, epoch, tp0, tp1); c != 0 {
		t.Fatalf("add: %d", c)
	}
	switch s {
	case Ongoing:
		return pid, epoch
	case PrepareCommit, PrepareAbort:
		e.b.setFail(func(TopicPartition) error { return errDisk })
	}
	commit := s == PrepareCommit || s == CompleteCommit
	if c, _, _ := e.end(3, "x", pid, epoch, commit); c != 0 {
		t.Fatalf("end: %d", c)
	}
	if got := e.state("x"); got != s {
		t.Fatalf("setup reached %v, want %v", got, s)
	}
	return pid, epoch
}

func TestEndTxnV1Table(t *testing.T) {
	const (
		none = 0
	)
	rows := []struct {
		name   string
		from   State
		commit bool
		code   int16
		to     State
	}{
		{"Ongoing commit -> PrepareCommit -> CompleteCommit", Ongoing, true, none, CompleteCommit},
		{"Ongoing abort -> PrepareAbort -> CompleteAbort", Ongoing, false, none, CompleteAbort},
		{"CompleteCommit commit is a successful retry", CompleteCommit, true, none, CompleteCommit},
		{"CompleteCommit abort is INVALID_TXN_STATE", CompleteCommit, false, codeInvalidTxnState, CompleteCommit},
		{"CompleteAbort abort is a successful retry", CompleteAbort, false, none, CompleteAbort},
		{"CompleteAbort commit is INVALID_TXN_STATE", CompleteAbort, true, codeInvalidTxnState, CompleteAbort},
		{"Empty commit is INVALID_TXN_STATE", Empty, true, codeInvalidTxnState, Empty},
		{"Empty abort is INVALID_TXN_STATE with TV1", Empty, false, codeInvalidTxnState, Empty},
		{"PrepareCommit commit is CONCURRENT_TRANSACTIONS", PrepareCommit, true, codeConcurrentTxns, PrepareCommit},
		{"PrepareCommit abort is CONCURRENT_TRANSACTIONS (pending Complete)", PrepareCommit, false, codeConcurrentTxns, PrepareCommit},
		{"PrepareAbort abort is CONCURRENT_TRANSACTIONS", PrepareAbort, false, codeConcurrentTxns, PrepareAbort},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			e := newEnv(t, 1)
			pid, epoch := setup(t, e, r.from)
			before := len(e.logged("x"))
			code, rpid, repoch := e.end(3, "x", pid, epoch, r.commit)
			if code != r.code {
				t.Fatalf("code %d, want %d", code, r.code)
			}
			if rpid != -1 || repoch != -1 {
				t.Fatalf("TV1 response carries %d/%d", rpid, repoch)
			}
			if got := e.state("x"); got != r.to {
				t.Fatalf("state %v, want %v", got, r.to)
			}
			if r.code != 0 || r.from != Ongoing {
				if after := len(e.logged("x")); after != before {
					t.Fatalf("log grew %d -> %d on a refused/no-op EndTxn", before, after)
				}
			}
			m, _, _ := e.meta("x")
			if m.ProducerEpoch != epoch {
				t.Fatalf("TV1 changed the epoch %d -> %d", epoch, m.ProducerEpoch)
			}
		})
	}
}

func TestEndTxnProducerChecks(t *testing.T) {
	e := newEnv(t, 1)
	pid, epoch := setup(t, e, Ongoing)
	if c, _, _ := e.end(3, "nope", pid, epoch, true); c != codeInvalidPIDMapping {
		t.Fatalf("unknown id: %d", c)
	}
	if c, _, _ := e.end(3, "x", pid+1, epoch, true); c != codeInvalidPIDMapping {
		t.Fatalf("wrong pid: %d", c)
	}
	if c, _, _ := e.end(3, "x", pid, epoch+1, true); c != codeProducerFenced {
		t.Fatalf("wrong epoch v3: %d", c)
	}
	if c, _, _ := e.end(1, "x", pid, epoch+1, true); c != codeInvalidProducerEpoch {
		t.Fatalf("wrong epoch v1 must be INVALID_PRODUCER_EPOCH: %d", c)
	}
	if c, _, _ := e.end(3, "", pid, epoch, true); c != codeInvalidRequest {
		t.Fatalf("empty id: %d", c)
	}
}

// The TV2 table in TransactionCoordinator.scala (endTransaction): Retry means the
// request's epoch is one below the current; EB means success with an epoch bump.
func TestEndTxnV2Table(t *testing.T) {
	const (
		PF  = -1
		ITS = -2
		OK  = -3 // success, no change
		EB  = -4 // success, epoch bump
	)
	rows := []struct {
		from   State
		commit bool
		retry  bool
		want   int
	}{
		{Empty, false, true, PF}, {Empty, false, false, EB}, {Empty, true, true, PF}, {Empty, true, false, ITS},
		{CompleteAbort, false, true, OK}, {CompleteAbort, false, false, EB}, {CompleteAbort, true, true, ITS}, {CompleteAbort, true, false, ITS},
		{CompleteCommit, false, true, ITS}, {CompleteCommit, false, false, EB}, {CompleteCommit, true, true, OK}, {CompleteCommit, true, false, ITS},
		{Ongoing, true, false, EB}, {Ongoing, false, false, EB},
	}
	for _, r := range rows {
		name := r.from.String()
		if r.commit {
			name += "/commit"
		} else {
			name += "/abort"
		}
		if r.retry {
			name += "/retry"
		} else {
			name += "/current"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 1)
			pid, _, _ := e.init("x", 60000)
			// Reach r.from with TV2 requests, so Complete* carry a bumped epoch and a
			// retry (epoch-1) is meaningful.
			pid, epoch := pid, int16(0)
			if r.from != Empty {
				if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, true); c != 0 {
					t.Fatalf("add: %d", c)
				}
				e.idle()
			}
			if r.from == CompleteAbort || r.from == CompleteCommit {
				c, p, ep := e.end(5, "x", pid, epoch, r.from == CompleteCommit)
				if c != 0 || p != pid || ep != epoch+1 {
					t.Fatalf("end: %d %d/%d", c, p, ep)
				}
				epoch = ep
			}
			if e.state("x") != r.from {
				t.Fatalf("setup state %v", e.state("x"))
			}
			reqEpoch := epoch
			if r.retry {
				reqEpoch = epoch - 1
			}
			code, rpid, repoch := e.end(5, "x", pid, reqEpoch, r.commit)
			m, _, _ := e.meta("x")
			switch r.want {
			case PF:
				if code != codeProducerFenced {
					t.Fatalf("code %d, want PRODUCER_FENCED", code)
				}
			case ITS:
				if code != codeInvalidTxnState {
					t.Fatalf("code %d, want INVALID_TXN_STATE", code)
				}
			case OK:
				if code != 0 || rpid != pid || repoch != epoch || m.ProducerEpoch != epoch || m.State != r.from {
					t.Fatalf("retry: code %d resp %d/%d meta %d %v", code, rpid, repoch, m.ProducerEpoch, m.State)
				}
			case EB:
				want := CompleteAbort
				if r.commit {
					want = CompleteCommit
				}
				if code != 0 || rpid != pid || repoch != epoch+1 || m.ProducerEpoch != epoch+1 || m.State != want {
					t.Fatalf("bump: code %d resp %d/%d meta %d %v", code, rpid, repoch, m.ProducerEpoch, m.State)
				}
			}
		})
	}
}

func TestAddPartitionsTable(t *testing.T) {
	t.Run("unknown id is INVALID_PRODUCER_ID_MAPPING", func(t *testing.T) {
		e := newEnv(t, 1)
		if c := e.add1("nope", 1, 0, tp0); c != codeInvalidPIDMapping {
			t.Fatal(c)
		}
	})
	t.Run("wrong producer id is INVALID_PRODUCER_ID_MAPPING", func(t *testing.T) {
		e := newEnv(t, 1)
		pid, epoch := setup(t, e, Empty)
		if c := e.add1("x", pid+1, epoch, tp0); c != codeInvalidPIDMapping {
			t.Fatal(c)
		}
	})
	t.Run("wrong epoch is PRODUCER_FENCED, INVALID_PRODUCER_EPOCH before v2", func(t *testing.T) {
		e := newEnv(t, 1)
		pid, epoch := setup(t, e, Empty)
		if c := e.add1("x", pid, epoch+1, tp0); c != codeProducerFenced {
			t.Fatal(c)
		}
		if c := e.add(1, "x", pid, epoch+1, tp0); c[0] != codeInvalidProducerEpoch {
			t.Fatal(c)
		}
	})
	for _, s := range []State{PrepareCommit, PrepareAbort} {
		t.Run(s.String()+" is CONCURRENT_TRANSACTIONS", func(t *testing.T) {
			e := newEnv(t, 1)
			pid, epoch := setup(t, e, s)
			if c := e.add1("x", pid, epoch, tp0); c != codeConcurrentTxns {
				t.Fatal(c)
			}
		})
	}
	for _, s := range []State{Empty, CompleteCommit, CompleteAbort} {
		t.Run(s.String()+" -> Ongoing starts the transaction now", func(t *testing.T) {
			e := newEnv(t, 1)
			pid, epoch := setup(t, e, s)
			e.clock.Advance(1000)
			if c := e.add1("x", pid, epoch, tp("u", 3)); c != 0 {
				t.Fatal(c)
			}
			m, _, _ := e.meta("x")
			if m.State != Ongoing || m.StartMs != e.clock.Now().UnixMilli() || len(m.Partitions) != 1 {
				t.Fatalf("%+v", m)
			}
		})
	}
	t.Run("Ongoing with known partitions answers without a record", func(t *testing.T) {
		e := newEnv(t, 1)
		pid, epoch := setup(t, e, Ongoing)
		n := len(e.logged("x"))
		if c := e.add1("x", pid, epoch, tp0); c != 0 {
			t.Fatal(c)
		}
		if len(e.logged("x")) != n {
			t.Fatal("wrote a record")
		}
	})
	t.Run("Ongoing with new partitions keeps the start time", func(t *testing.T) {
		e := newEnv(t, 1)
		pid, epoch := setup(t, e, Ongoing)
		m0, _, _ := e.meta("x")
		e.clock.Advance(5000)
		if c := e.add1("x", pid, epoch, tp("u", 0)); c != 0 {
			t.Fatal(c)
		}
		m, _, _ := e.meta("x")
		if m.StartMs != m0.StartMs || len(m.Partitions) != 3 {
			t.Fatalf("%+v", m)
		}
	})
	t.Run("unknown partition fails the request, others OPERATION_NOT_ATTEMPTED", func(t *testing.T) {
		e := newEnv(t, 1)
		pid, epoch := setup(t, e, Empty)
		e.b.missing = map[TopicPartition]bool{tp1: true}
		codes := e.add(3, "x", pid, epoch, tp0, tp1)
		if codes[0] != codeOperationNotAttempted || codes[1] != codeUnknownTopicOrPartition {
			t.Fatal(codes)
		}
		if e.state("x") != Empty {
			t.Fatal("added")
		}
	})
	t.Run("v4 verify-only: added ok, missing TRANSACTION_ABORTABLE, nothing written", func(t *testing.T) {
		e := newEnv(t, 1)
		pid, epoch := setup(t, e, Empty)
		e.add1("x", pid, epoch, tp0)
		n := len(e.logged("x"))
		req := e.verifyReq("x", pid, epoch, tp0, tp1)
		r := e.c.AddPartitionsToTxn(ctx, 4, req)
		ps := r.Transactions[0].Topics[0].Partitions
		if ps[0].ErrorCode != 0 || ps[1].ErrorCode != codeTransactionAbortable {
			t.Fatalf("%+v", ps)
		}
		if len(e.logged("x")) != n {
			t.Fatal("verify wrote")
		}
	})
	t.Run("v4 add is transaction version 2", func(t *testing.T) {
		e := newEnv(t, 1)
		pid, epoch := setup(t, e, Empty)
		if c := e.add(4, "x", pid, epoch, tp0); c[0] != 0 {
			t.Fatal(c)
		}
		m, _, _ := e.meta("x")
		if m.ClientTV != 2 {
			t.Fatal(m.ClientTV)
		}
	})
}

func TestAddOffsetsToTxn(t *testing.T) {
	e := newEnv(t, 1)
	e.c.cfg.GroupPartition = func(g string) TopicPartition { return tp("__consumer_offsets", 7) }
	pid, epoch := setup(t, e, Empty)
	req := newAddOffsets("x", pid, epoch, "g")
	if r := e.c.AddOffsetsToTxn(ctx, 3, req); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	m, _, _ := e.meta("x")
	if m.State != Ongoing || len(m.Partitions) != 1 || m.Partitions[0] != tp("__consumer_offsets", 7) || m.ClientTV != 0 {
		t.Fatalf("%+v", m)
	}
	req.ProducerEpoch++
	if r := e.c.AddOffsetsToTxn(ctx, 1, req); r.ErrorCode != codeInvalidProducerEpoch {
		t.Fatal(r.ErrorCode)
	}
	if r := e.c.AddOffsetsToTxn(ctx, 2, req); r.ErrorCode != codeProducerFenced {
		t.Fatal(r.ErrorCode)
	}
}

func TestInitProducerIDTable(t *testing.T) {
	t.Run("empty id is INVALID_REQUEST", func(t *testing.T) {
		e := newEnv(t, 1)
		if _, _, c := e.init("", 1000); c != codeInvalidRequest {
			t.Fatal(c)
		}
	})
	t.Run("timeout above max or not positive is INVALID_TRANSACTION_TIMEOUT", func(t *testing.T) {
		e := newEnv(t, 1)
		for _, ms := range []int32{0, -1, 900001} {
			if _, _, c := e.init("x", ms); c != codeInvalidTxnTimeout {
				t.Fatal(ms, c)
			}
		}
		if _, _, c := e.init("x", 900000); c != 0 {
			t.Fatal(c)
		}
	})
	t.Run("half a KIP-360 producer is INVALID_REQUEST", func(t *testing.T) {
		e := newEnv(t, 1)
		if _, _, c := e.initV(4, "x", 1000, 5, -1); c != codeInvalidRequest {
			t.Fatal(c)
		}
	})
	t.Run("new id gets epoch 0, then bumps from Empty and Complete*", func(t *testing.T) {
		e := newEnv(t, 1)
		pid, epoch := setup(t, e, CompleteAbort)
		p2, e2, c := e.init("x", 1000)
		if c != 0 || p2 != pid || e2 != epoch+1 {
			t.Fatal(p2, e2, c)
		}
		p3, e3, _ := e.init("x", 1000)
		if p3 != pid || e3 != epoch+2 {
			t.Fatal(p3, e3)
		}
		m, _, _ := e.meta("x")
		if m.TimeoutMs != 1000 || m.State != Empty || m.LastProducerEpoch != -1 {
			t.Fatalf("%+v", m)
		}
	})
	for _, s := range []State{PrepareCommit, PrepareAbort} {
		t.Run(s.String()+" is CONCURRENT_TRANSACTIONS", func(t *testing.T) {
			e := newEnv(t, 1)
			setup(t, e, s)
			if _, _, c := e.init("x", 1000); c != codeConcurrentTxns {
				t.Fatal(c)
			}
		})
	}
	t.Run("exhausted epoch rotates the producer id", func(t *testing.T) {
		e := newEnv(t, 1)
		pid, _ := setup(t, e, Empty)
		e.c.core.entries["x"].meta.ProducerEpoch = maxEpoch - 1
		p2, e2, c := e.init("x", 1000)
		if c != 0 || p2 == pid || e2 != 0 {
			t.Fatal(p2, e2, c)
		}
		m, _, _ := e.meta("x")
		if m.PrevProducerID != pid {
			t.Fatalf("prev %d", m.PrevProducerID)
		}
	})
	t.Run("KIP-360: expected epoch current bumps, last epoch is a retry, other fenced", func(t *testing.T) {
		e := newEnv(t, 1)
		pid, epoch := setup(t, e, Empty)
		_, e1, c := e.initV(4, "x", 1000, pid, epoch)
		if c != 0 || e1 != epoch+1 {
			t.Fatal(e1, c)
		}
		_, e2, c := e.initV(4, "x", 1000, pid, epoch) // retry of the same request
		if c != 0 || e2 != e1 {
			t.Fatal("retry", e2, c)
		}
		_, _, c = e.initV(4, "x", 1000, pid+7, epoch)
		if c != codeProducerFenced {
			t.Fatal("other pid", c)
		}
		_, _, c = e.initV(3, "x", 1000, pid+7, epoch)
		if c != codeInvalidProducerEpoch {
			t.Fatal("v3 other pid", c)
		}
		e.init("x", 1000) // a new producer: last epoch forgotten
		_, _, c = e.initV(4, "x", 1000, pid, e1)
		if c != codeProducerFenced {
			t.Fatal("stale epoch", c)
		}
	})
	t.Run("KIP-360 on an unknown id returns the fresh producer", func(t *testing.T) {
		e := newEnv(t, 1)
		p, ep, c := e.initV(4, "y", 1000, 99, 3)
		if c != 0 || ep != 0 || p == 99 {
			t.Fatal(p, ep, c)
		}
	})
}
