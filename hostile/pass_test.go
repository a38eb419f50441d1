package hostile

// Attacks the broker already withstood when #17 was filed; these tests keep it that way.

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	defaultRSSBound = 512 << 20
	// defaultRatio and defaultP99 are loose on purpose: CI shares two cores among many
	// processes, and the attacks themselves take CPU. A broker that wedges, crashes or
	// stalls a victim for a second misses them by far.
	defaultRatio = 0.25
	defaultP99   = 750 * time.Millisecond
	// floodRatio is for attacks that spin as fast as the attacker's goroutines can: on two
	// shared cores the attacker itself takes CPU the victim would have had.
	floodRatio = 0.15
)

// repeat runs workers goroutines calling f(worker, iteration) until d has passed.
func repeat(d time.Duration, workers int, f func(worker, i int)) {
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				f(w, i)
			}
		}()
	}
	wg.Wait()
}

// sendAndDrain writes b on a new attacker connection and reads whatever comes back until
// the broker closes it or timeout passes.
func sendAndDrain(addr string, b []byte, timeout time.Duration) {
	c, err := dialAttacker(addr)
	if err != nil {
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	_, _ = c.Write(b)
	_, _ = io.Copy(io.Discard, c)
}

func TestGarbageFrames(t *testing.T) {
	runAttack(t, attack{
		name: "garbage frames", rssBytes: defaultRSSBound, minRatio: floodRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			repeat(sized(1500*time.Millisecond, 30*time.Second), 2, func(w, i int) {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(i)))
				var b []byte
				switch i % 4 {
				case 0: // random bytes, size prefix included
					b = make([]byte, 1+rng.IntN(4096))
					for j := range b {
						b[j] = byte(rng.Uint32())
					}
				case 1: // a negative size
					b = binary.BigEndian.AppendUint32(nil, 0x80000000|rng.Uint32())
				case 2: // a size over --max-request-bytes
					b = binary.BigEndian.AppendUint32(nil, 200<<20)
				case 3: // a valid frame of a known key whose body is garbage
					body := make([]byte, rng.IntN(512))
					for j := range body {
						body[j] = byte(rng.Uint32())
					}
					keys := []int16{0, 1, 3, 8, 9, 10, 19, 22, 32, 76, 78, 79}
					b = rawRequest(keys[rng.IntN(len(keys))], int16(rng.IntN(13)), 1, false, body)
				}
				sendAndDrain(h.addr(), b, 200*time.Millisecond)
			})
			if err := brokerAnswers(h.addr(), 5*time.Second); err != nil {
				t.Errorf("a new client after the garbage: %v", err)
			}
		},
	})
}

func TestUnknownKeysAndVersions(t *testing.T) {
	runAttack(t, attack{
		name: "unknown keys and versions", rssBytes: defaultRSSBound, minRatio: floodRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			// ApiVersions at an unknown version is answered (v0, UNSUPPORTED_VERSION) as Kafka
			// does, so that a client can retry lower.
			c := dialRaw(t, h.addr())
			if _, err := c.Write(rawRequest(18, 99, 7, true, nil)); err != nil {
				t.Fatal(err)
			}
			resp, err := c.readFrame(5 * time.Second)
			if err != nil {
				t.Fatalf("ApiVersions v99: %v", err)
			}
			if len(resp) < 6 || binary.BigEndian.Uint16(resp[4:]) != 35 {
				t.Errorf("ApiVersions v99 answered % x, want error code 35 (UNSUPPORTED_VERSION)", resp[:min(len(resp), 8)])
			}
			repeat(sized(1500*time.Millisecond, 30*time.Second), 2, func(w, i int) {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(i)))
				key, version := int16(rng.IntN(32767)), int16(rng.IntN(32767))
				if i%2 == 0 { // a known key at an unknown version
					key = int16(rng.IntN(90))
					version = int16(20 + rng.IntN(1000))
				}
				sendAndDrain(h.addr(), rawRequest(key, version, int32(i), false, []byte{0, 0, 0, 0}), 200*time.Millisecond)
			})
		},
	})
}

func TestSlowloris(t *testing.T) {
	conns := sized(300, 5000)
	runAttack(t, attack{
		name: "slowloris", rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			// conns connections each trickle a 1 MiB Produce frame a few bytes at a time.
			var open []net.Conn
			defer func() {
				for _, c := range open {
					c.Close()
				}
			}()
			for range conns {
				c, err := dialAttacker(h.addr())
				if err != nil {
					t.Fatalf("slowloris dial: %v", err)
				}
				open = append(open, c)
				_, _ = c.Write(binary.BigEndian.AppendUint32(nil, 1<<20))
			}
			deadline := time.Now().Add(sized(2*time.Second, 60*time.Second))
			for time.Now().Before(deadline) {
				for _, c := range open {
					_ = c.SetWriteDeadline(time.Now().Add(time.Millisecond))
					_, _ = c.Write([]byte{0})
				}
				time.Sleep(50 * time.Millisecond) // one byte per connection every 50 ms: a slow client, not a flood
			}
			if err := brokerAnswers(h.addr(), 5*time.Second); err != nil {
				t.Errorf("a new client during the slowloris: %v", err)
			}
		},
	})
}

func TestConnectCloseStorm(t *testing.T) {
	total := sized(3000, 20000)
	runAttack(t, attack{
		name: "connect/close storm", rssBytes: defaultRSSBound, minRatio: floodRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			var mu sync.Mutex
			n := 0
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						mu.Lock()
						if n >= total {
							mu.Unlock()
							return
						}
						n++
						mu.Unlock()
						c, err := dialAttacker(h.addr())
						if err == nil {
							// RST at close (linger 0) leaves no TIME_WAIT behind, so the storm
							// does not run out of ephemeral ports.
							_ = c.(*net.TCPConn).SetLinger(0)
							c.Close()
						}
					}
				}()
			}
			wg.Wait()
			if err := brokerAnswers(h.addr(), 5*time.Second); err != nil {
				t.Errorf("a new client after the storm: %v", err)
			}
		},
	})
}

func TestMetadataManyNamesNoAutoCreate(t *testing.T) {
	names := sized(100000, 100000)
	runAttack(t, attack{
		name: "100k-name Metadata, no auto-create", rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		broker: brokerOpts{args: []string{"--auto-create-topics=false"}},
		run: func(t *testing.T, h *harness) {
			c := dialRaw(t, h.addr())
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(12)
			for i := range names {
				topic := kmsg.NewMetadataRequestTopic()
				topic.Topic = kmsg.StringPtr(fmt.Sprintf("no-such-topic-%06d", i))
				req.Topics = append(req.Topics, topic)
			}
			for range sized(3, 20) {
				resp, err := c.roundTrip(req, 30*time.Second)
				if err != nil {
					t.Fatalf("Metadata of %d names: %v", names, err)
				}
				m := resp.(*kmsg.MetadataResponse)
				if len(m.Topics) != names {
					t.Fatalf("Metadata answered %d topics, want %d", len(m.Topics), names)
				}
				if code := m.Topics[0].ErrorCode; code != 3 {
					t.Errorf("unknown topic answered error %d, want 3 (UNKNOWN_TOPIC_OR_PARTITION)", code)
				}
			}
		},
		after: func(t *testing.T, h *harness) {
			if n := countTopics(t, h.addr()); n != 1 {
				t.Errorf("%d topics after the attack, want only the victim's", n)
			}
		},
	})
}

func TestHugeTransactionalID(t *testing.T) {
	idBytes := sized(10<<20, 50<<20)
	runAttack(t, attack{
		name: "huge transactional ids", rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			id := strings.Repeat("t", idBytes)
			for i := range sized(4, 10) {
				c := dialRaw(t, h.addr())
				var req kmsg.Request
				if i%2 == 0 {
					r := kmsg.NewPtrInitProducerIDRequest()
					r.SetVersion(4)
					r.TransactionalID, r.TransactionTimeoutMillis = &id, 60000
					req = r
				} else {
					r := kmsg.NewPtrFindCoordinatorRequest()
					r.SetVersion(4)
					r.CoordinatorType, r.CoordinatorKeys = 1, []string{id}
					req = r
				}
				// The answer may be an error or a closed connection; what matters is the
				// broker's memory and the victim.
				_, _ = c.roundTrip(req, 10*time.Second)
				c.Close()
			}
		},
	})
}

func TestGarbageTxnShareAcknowledge(t *testing.T) {
	runAttack(t, attack{
		name: "garbage TxnShareAcknowledge", share: true, rssBytes: defaultRSSBound, minRatio: floodRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			// One connection at a time: the share-group victim is the heaviest, and two
			// spinning attackers took most of both CPUs from it without exposing anything.
			repeat(sized(1500*time.Millisecond, 30*time.Second), 1, func(w, i int) {
				rng := rand.New(rand.NewPCG(uint64(w)+100, uint64(i)))
				body := make([]byte, rng.IntN(2048))
				for j := range body {
					body[j] = byte(rng.Uint32())
				}
				if i%3 == 0 { // plausible prefixes: a short transactional id then junk
					body = append([]byte{0, 3, 't', 'x', 'n', 0, 0, 0, 1, 0, 0}, body...)
				}
				sendAndDrain(h.addr(), rawRequest(95, 0, int32(i), true, body), 200*time.Millisecond)
			})
		},
	})
}
