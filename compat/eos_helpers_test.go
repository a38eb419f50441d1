package compat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoLogOpts returns a kgo logger option when EXACTQ_TEST_LOG is set (the same switch that
// makes the test broker log), so a failing EOS run can be read from both sides.
func kgoLogOpts(prefix string) []kgo.Opt {
	if os.Getenv("EXACTQ_TEST_LOG") == "" {
		return nil
	}
	return []kgo.Opt{kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string {
		return time.Now().Format("15:04:05.000 ") + prefix + " "
	}))}
}

// killableDialer hands kgo its connections and can cut them all at once, after which
// every dial fails: the client is gone from the broker's point of view exactly as if its
// process had been killed (no LeaveGroup, no EndTxn, nothing).
type killableDialer struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (d *killableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("killableDialer: client was killed")
	}
	c, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	d.conns = append(d.conns, c)
	return c, nil
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// readAllRecords reads every partition of topic from its start up to the high watermark
// taken when it is called, with the given isolation, and returns the data records (control
// records are read, to know where a partition ends, but not returned). With read_committed
// the caller must have made sure the last stable offset equals the high watermark.
func readAllRecords(t *testing.T, addr, topic string, readCommitted bool) []*kgo.Record {
	t.Helper()
	adm := newAdmin(t, addr)
	ends := endOffsets(t, adm, topic)
	assign := map[int32]kgo.Offset{}
	for p := range ends {
		assign[p] = kgo.NewOffset().AtStart()
	}
	iso := kgo.ReadUncommitted()
	if readCommitted {
		iso = kgo.ReadCommitted()
	}
	cl := newClient(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	defer cl.Close()
	next := map[int32]int64{}
	done := func() bool {
		for p, e := range ends {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	ctx := ctxFor(t, 90*time.Second)
	var out []*kgo.Record
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s (read_committed=%v): reached %v of end offsets %v before the deadline", topic, readCommitted, next, ends)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("reading %s (read_committed=%v): fetch error on %s[%d]: %v", topic, readCommitted, fe.Topic, fe.Partition, fe.Err)
		}
		for _, r := range fs.Records() {
			if r.Offset < next[r.Partition] {
				t.Fatalf("reading %s: offset %d of partition %d after %d", topic, r.Offset, r.Partition, next[r.Partition]-1)
			}
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		}
	}
	return out
}

// stableOutput waits until the topic has no open transaction (LSO == high watermark on
// every partition) and returns the high watermarks.
func stableOutput(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	var hw map[int32]int64
	eventually(t, 30*time.Second, topic+": last stable offsets reach the high watermarks", func() error {
		hw = endOffsets(t, adm, topic)
		lso, err := adm.ListCommittedOffsets(ctxFor(t, 10*time.Second), topic)
		if err != nil {
			return err
		}
		if err := lso.Error(); err != nil {
			return err
		}
		var bad []string
		lso.Each(func(o kadm.ListedOffset) {
			if o.Offset != hw[o.Partition] {
				bad = append(bad, fmt.Sprintf("p%d lso %d hw %d", o.Partition, o.Offset, hw[o.Partition]))
			}
		})
		if len(bad) > 0 {
			return fmt.Errorf("%v", bad)
		}
		return nil
	})
	return hw
}

// groupOffsets returns the committed offsets of group on topic.
func groupOffsets(t *testing.T, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	t.Helper()
	resp, err := adm.FetchOffsets(ctxFor(t, 10*time.Second), group)
	if err != nil {
		return nil, err
	}
	if err := resp.Error(); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		out[p] = o.At
	}
	return out, nil
}

// waitGroupCaughtUp polls until group's committed offsets on topic equal want.
func waitGroupCaughtUp(t *testing.T, adm *kadm.Client, group, topic string, want map[int32]int64, d time.Duration, failed func() error) {
	t.Helper()
	eventually(t, d, "group "+group+" committed offsets reach the input end offsets", func() error {
		if failed != nil {
			if err := failed(); err != nil {
				t.Fatalf("pipeline failed while waiting for it to finish: %v", err)
			}
		}
		got, err := groupOffsets(t, adm, group, topic)
		if err != nil {
			return err
		}
		for p, e := range want {
			if got[p] != e {
				return fmt.Errorf("committed %v, want %v", got, want)
			}
		}
		return nil
	})
}
