package kgoext

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Close ends the member: in implicit mode delivered records are accepted; in explicit mode
// the unacknowledged ones are released, as are records fetched but never returned by Poll.
// Every share session is closed with those acknowledgements (ShareAcknowledge epoch -1,
// which also releases anything else the member holds there), then the member leaves the
// group (heartbeat epoch -1). The kgo client stays open: it is the caller's. It waits for
// fetches in flight (at most ShareMaxWait) unless ctx ends first. It returns the
// acknowledgement failures.
func (c *ShareConsumer) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	if !c.cfg.explicit {
		c.ackDeliveredLocked(AckAccept)
	} else {
		for tp, m := range c.delivered {
			for off, h := range m {
				c.addPendingLocked(h.leader, tp, off, AckRelease)
			}
		}
		c.delivered = map[TopicPartition]map[int64]*heldRec{}
	}
	c.mu.Unlock()
	c.hbStop()
	<-c.hbDone

	// Fetches in flight finish; their records were never returned: release them. A
	// fetch that outlives ctx is abandoned (its connection closes, which releases).
	fetched := make(chan struct{})
	go func() {
		c.fetchWG.Wait()
		close(fetched)
	}()
	for waiting := true; waiting; {
		select {
		case res := <-c.results:
			c.handleResult(res, false)
		case <-fetched:
			waiting = false
		case <-ctx.Done():
			c.cancel()
			<-fetched
			waiting = false
		}
	}
	for drained := false; !drained; {
		select {
		case res := <-c.results:
			c.handleResult(res, false)
		default:
			drained = true
		}
	}

	c.mu.Lock()
	leaders := map[int32]bool{}
	for l := range c.pending {
		leaders[l] = true
	}
	for l := range c.sessions {
		leaders[l] = true
	}
	joined := c.joined
	epoch := c.memberEpoch
	c.mu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for l := range leaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.acknowledge(ctx, l, true)
			emu.Lock()
			defer emu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			for tp, e := range res {
				if e != nil {
					errs = append(errs, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, e))
				}
			}
		}()
	}
	wg.Wait()

	if joined || epoch != 0 {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = c.group, c.memberID, -1
		if _, err := c.coord.do(ctx, req); err != nil && ctx.Err() != nil {
			errs = append(errs, err)
		}
	}
	c.cancel()
	c.wg.Wait()
	return errors.Join(errs...)
}
