// Package crashtest holds end-to-end crash-safety tests of the exactq binary: a broker is
// run as a child process, killed with SIGKILL (or stopped with SIGTERM) while producers
// write to it, restarted on the same data directory, and then read back to check that every
// acknowledged record is present exactly once at its acknowledged offset. Torn-tail tests
// damage the last segment file between runs and check recovery keeps every complete batch.
//
// The package has no non-test code; it exists for `go test ./crashtest/...`:
//
//	go test ./crashtest/                        # CI default: 25 kill/restart cycles
//	go test ./crashtest/ -run TestCrash -cycles 200 -v
//	go test ./crashtest/ -run TestCrash -seed 1234 -v   # replay a failing seed
//	EXACTQ_CRASH_CYCLES=100 EXACTQ_CRASH_SEED=1234 go test ./crashtest/
//	EXACTQ_TEST_LOG=1 go test ./crashtest/ -v   # echo the brokers' stderr
//
// TestEOSPipelineCrashCycles kills the broker under a running exactly-once pipeline (kgo's
// GroupTransactSession, consumer group + transactions + read_committed) and checks that the
// committed output holds each input at most once (exactly once after a final drain), that
// the group's committed offsets match it, and that transactions left open by a kill are
// aborted at their timeout:
//
//	go test ./crashtest/ -run TestEOS -v                         # CI default: 30 cycles
//	go test ./crashtest/ -run TestEOS -eos-cycles 300 -timeout 60m -v
//	EXACTQ_EOS_CYCLES=300 EXACTQ_CRASH_SEED=1234 go test ./crashtest/ -run TestEOS -timeout 60m
//
// TestShareStateSurvivesKill (share groups, KIP-932) SIGKILLs the broker while share
// consumers ACCEPT, RELEASE, REJECT and hold records, and checks after the restart that
// confirmed ACCEPTs and REJECTs stick, released and in-flight records come back, and the
// group drains to start offset N with lag 0. TestTxnShareAckCrashCycles (transactional share
// acknowledgements, KIP-1289) kills the broker under the example share-consume →
// transactional-produce pipeline (examples/sharepipeline) and checks every input is acknowledged or archived with its output committed
// exactly once (none for rejected inputs), nothing stuck TX_PENDING, no aborted output visible:
//
//	go test ./crashtest/ -run TestShareStateSurvivesKill -share-cycles 100 -v   # CI default: 6
//	go test ./crashtest/ -run TestTxnShareAckCrashCycles -txnshare-cycles 1000 -timeout 3h -v   # CI default: 20
//	EXACTQ_TXNSHARE_CYCLES=1000 go test ./crashtest/ -run TestTxnShareAckCrashCycles -timeout 3h
//
// The share tests' clients are kgoext's share consumer (explicit acknowledgements, so a
// RENEWed record stays held across polls) over plain kgo clients and, for KIP-1289, over
// the example pipeline's transactional kgo client, with kgoext.SendShareAcksToTransaction
// and kgoext.EndTransaction;
// the lifecycle tests' worker process (internal/eosworker) runs package eos. A test that
// waits for a condition it cannot be told about polls through internal/await; a sleep in
// this package paces a fault on purpose.
//
// A seed fixes the sequence of decisions (kill delays, SIGKILL or SIGTERM, whether the
// producers survive the restart, fsync policy, damage positions); the interleaving of
// producer goroutines and the broker is not deterministic, so a replay reproduces the
// schedule of faults, not every byte.
//
// fuzz-smoke.sh in this directory runs every fuzz target of the module briefly.
package crashtest
