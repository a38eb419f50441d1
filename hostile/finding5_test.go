package hostile

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// Finding 5: idle connections from one address took every connection slot, and no new
// client could connect while they were held. The broker runs with max.connections scaled
// down (CI 1000; -hostile-full the default 10000) and no other setting: the per-address
// limit must protect the victim by default.
func TestIdleConnectionsFromOneAddress(t *testing.T) {
	maxConns := sized(1000, 10000)
	runAttack(t, attack{
		name: "#5 idle connections from one address", rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		broker: brokerOpts{args: []string{"--max-connections", strconv.Itoa(maxConns)}},
		run: func(t *testing.T, h *harness) {
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for range maxConns {
				c, err := dialAttacker(h.addr())
				if err != nil {
					break
				}
				held = append(held, c)
			}
			// A new client from another address must still be served while they are held.
			for i := range 3 {
				if err := brokerAnswers(h.addr(), 5*time.Second); err != nil {
					t.Errorf("new client %d while %d attacker connections are held: %v", i, len(held), err)
				}
			}
			createTopic(t, h.addr(), "after-lockout", 1, nil)
			produceValues(t, h.addr(), "after-lockout", 5)
		},
	})
}
