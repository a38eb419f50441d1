// Package hostile is the hostile-client suite (#17): each test starts a real `exactq serve`
// binary, runs a well-behaved victim beside it (an idempotent acks=all kgo producer, a kgo
// consumer, and a share consumer where the attack concerns share groups), measures the
// victim's baseline, runs one attack from 127.0.0.2 (so per-address limits never hit the
// victim on 127.0.0.1), and asserts that
//
//   - the broker process stays up,
//   - its peak resident memory (VmHWM) stays under the attack's bound,
//   - the victim keeps at least the attack's fraction of its baseline rate, and its p99
//     latency (produce requests; end to end for the consumers) stays under a bound,
//   - after a SIGTERM and restart, every record acknowledged to the victim is there,
//
// plus each attack's own checks (a consumer of an attacked topic reads every offset, a new
// client still connects, and so on). Every broker runs under ulimit -v 4 GiB, so an attack
// that makes it allocate tens of gigabytes kills that process, not its neighbours.
//
// Each test prints one summary line (attack, broker peak RSS, victim p99, victim
// throughput ratio under attack / baseline):
//
//	go test ./hostile/                          # CI: every attack scaled down (a few minutes)
//	go test -v ./hostile/ | grep '^hostile:'    # the summary lines (go test hides them without -v)
//	go test ./hostile/ -v -run TestSlowloris    # one attack, with the victim's figures
//	go test ./hostile/ -hostile-full -timeout 60m   # the sizes #17 reported
//	EXACTQ_TEST_LOG=1 go test ./hostile/ -v     # echo the brokers' stderr
//
// CI sizes are the smallest that still showed each defect before its fix; -hostile-full
// uses the sizes (20,000-connection storms, 50 MB transactional ids, 30 s floods).
// The package has no non-test code.
package hostile
