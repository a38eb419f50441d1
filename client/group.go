package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer group defaults (the Java consumer's).
const (
	defaultSessionTimeout     = 45 * time.Second
	defaultRebalanceTimeout   = time.Minute
	defaultHeartbeatInterval  = 3 * time.Second
	defaultAutoCommitInterval = 5 * time.Second
)

// ErrNoGroup is returned by the group methods of a Consumer without ConsumerConfig.Group.
var ErrNoGroup = errors.New("client: consumer has no group")

// errSessionLost means no heartbeat succeeded for a whole session timeout: the coordinator
// has certainly removed the member, so its partitions are lost.
var errSessionLost = errors.New("client: no successful heartbeat within the session timeout")

// groupMgr runs a Consumer's membership in a classic consumer group: one goroutine (run)
// joins, syncs, applies assignments (running the callbacks), heartbeats in a second
// goroutine, auto-commits, and rejoins when the coordinator or Subscribe asks. Fields
// after the comment are guarded by Consumer.mu; the callbacks run on run's goroutine
// with no lock held.
type groupMgr struct {
	c           *Consumer
	co          *coordinator
	balancers   []Balancer
	cooperative bool
	instanceID  *string

	rejoin chan struct{} // capacity 1: Subscribe asks for a rejoin

	// Guarded by Consumer.mu.
	started    bool
	topics     []string
	memberID   string
	generation int32
	owned      map[TopicPartition]bool
	committed  map[TopicPartition]int64 // last committed (or fetched) offset per owned partition
}

func newGroupMgr(c *Consumer) *groupMgr {
	g := &groupMgr{
		c:           c,
		co:          newCoordinator(c.cl, coordinatorGroup, c.cfg.Group),
		balancers:   c.cfg.Balancers,
		cooperative: true,
		rejoin:      make(chan struct{}, 1),
		generation:  -1,
		owned:       map[TopicPartition]bool{},
		committed:   map[TopicPartition]int64{},
	}
	for _, b := range g.balancers {
		// As in Java: cooperative only when every offered balancer supports it.
		g.cooperative = g.cooperative && b.cooperative()
	}
	if c.cfg.GroupInstanceID != "" {
		g.instanceID = &c.cfg.GroupInstanceID
	}
	return g
}

// Subscribe joins the consumer group (ConsumerConfig.Group) for topics, replacing an
// earlier subscription (which triggers a rebalance). Partitions are assigned by the group
// and their positions start at the group's committed offsets, or at ResetOffset for
// partitions without one. Do not mix with Assign.
func (c *Consumer) Subscribe(topics ...string) error {
	g := c.group
	if g == nil {
		return ErrNoGroup
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	g.topics = dedupe(topics)
	sort.Strings(g.topics)
	start := !g.started
	g.started = true
	c.mu.Unlock()
	if start {
		c.wg.Add(1)
		go g.run(c.ctx)
		return nil
	}
	select {
	case g.rejoin <- struct{}{}:
	default:
	}
	return nil
}

// GroupMetadata returns the consumer's current group membership, for
// Producer.SendOffsetsToTransaction. GenerationID is -1 and MemberID "" while the
// consumer is not in a generation.
func (c *Consumer) GroupMetadata() GroupMetadata {
	c.mu.Lock()
	defer c.mu.Unlock()
	gm := GroupMetadata{GroupID: c.cfg.Group, GenerationID: -1, GroupInstanceID: c.cfg.GroupInstanceID}
	if c.group != nil {
		gm.GenerationID, gm.MemberID = c.group.generation, c.group.memberID
	}
	return gm
}

// UncommittedOffsets returns, per assigned partition whose position moved since the last
// commit, the position: the offset after the last record Poll returned. These are the
// offsets to commit for what was consumed (CommitUncommitted, SendOffsetsToTransaction).
func (c *Consumer) UncommittedOffsets() map[TopicPartition]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.uncommittedLocked(nil)
}

func (c *Consumer) uncommittedLocked(only map[TopicPartition]bool) map[TopicPartition]int64 {
	out := map[TopicPartition]int64{}
	if c.group == nil {
		return out
	}
	for tp := range c.group.owned {
		if only != nil && !only[tp] {
			continue
		}
		cp, ok := c.parts[tp]
		if !ok || cp.offset < 0 {
			continue
		}
		if prev, ok := c.group.committed[tp]; ok && prev == cp.offset {
			continue
		}
		out[tp] = cp.offset
	}
	return out
}

// CommitUncommitted commits UncommittedOffsets.
func (c *Consumer) CommitUncommitted(ctx context.Context) error {
	return c.CommitOffsets(ctx, c.UncommittedOffsets())
}

// CommitOffsets commits offsets (the next offset to consume per partition) for the group
// in the consumer's current generation. A commit during a rebalance fails with
// kerr.RebalanceInProgress, one from a stale generation with kerr.IllegalGeneration or
// kerr.UnknownMemberID.
func (c *Consumer) CommitOffsets(ctx context.Context, offsets map[TopicPartition]int64) error {
	g := c.group
	if g == nil {
		return ErrNoGroup
	}
	if len(offsets) == 0 {
		return nil
	}
	left := make(map[TopicPartition]int64, len(offsets))
	for tp, o := range offsets {
		left[tp] = o
	}
	return retryCoordinator(ctx, g.co, func() (bool, error) {
		c.mu.Lock()
		gen, member := g.generation, g.memberID
		c.mu.Unlock()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID, req.InstanceID = c.cfg.Group, gen, member, g.instanceID
		req.RetentionTimeMillis = -1
		for _, tp := range sortedTPs(left) {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic = tp.Topic
				req.Topics = append(req.Topics, rt)
			}
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Timestamp = tp.Partition, left[tp], -1, -1
			rt := &req.Topics[len(req.Topics)-1]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp, err := g.co.do(ctx, req, reqOpts{maxVersion: -1})
		if err != nil {
			return retriableCoordinatorErr(err), err
		}
		var retry, other []error
		c.mu.Lock()
		for _, rt := range resp.(*kmsg.OffsetCommitResponse).Topics {
			for _, rp := range rt.Partitions {
				tp := TopicPartition{rt.Topic, rp.Partition}
				switch err := kerr.ErrorForCode(rp.ErrorCode); {
				case err == nil:
					g.committed[tp] = left[tp]
					delete(left, tp)
				case retriableCoordinatorErr(err):
					retry = append(retry, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, err))
				default:
					other = append(other, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, err))
				}
			}
		}
		c.mu.Unlock()
		if len(other) > 0 {
			return false, fmt.Errorf("client: OffsetCommit group %q: %w", c.cfg.Group, errors.Join(other...))
		}
		if len(retry) > 0 {
			return true, fmt.Errorf("client: OffsetCommit group %q: %w", c.cfg.Group, errors.Join(retry...))
		}
		return false, nil
	})
}

// ---- the membership loop ----

// run is the group goroutine.
func (g *groupMgr) run(ctx context.Context) {
	defer g.c.wg.Done()
	c := g.c
	for ctx.Err() == nil {
		if !g.cooperative {
			// Eager: give everything up before joining (Java's onJoinPrepare).
			g.revoke(ctx, g.ownedList())
		}
		assigned, err := g.joinAndSync(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !g.retriableJoinErr(err) {
				c.mu.Lock()
				c.pollErr = err
				c.mu.Unlock()
				return
			}
			_ = sleepCtx(ctx, c.cl.cfg.retryBackoff)
			continue
		}
		hbCtx, stopHB := context.WithCancel(ctx)
		hbErr := make(chan error, 1)
		c.mu.Lock()
		gen, member := g.generation, g.memberID
		c.mu.Unlock()
		hbDone := make(chan struct{})
		go func() {
			defer close(hbDone)
			hbErr <- g.heartbeat(hbCtx, gen, member)
		}()
		err = g.stable(ctx, assigned, hbErr)
		stopHB()
		<-hbDone
		if ctx.Err() != nil {
			return // closing: Close revokes and leaves
		}
		switch {
		case err == nil, errors.Is(err, kerr.RebalanceInProgress):
		case errors.Is(err, kerr.FencedInstanceID):
			g.lose(ctx)
			c.mu.Lock()
			c.pollErr = fmt.Errorf("client: group %q: %w", c.cfg.Group, err)
			c.mu.Unlock()
			return
		case errors.Is(err, kerr.UnknownMemberID):
			g.lose(ctx)
			c.mu.Lock()
			g.memberID = ""
			c.mu.Unlock()
		default: // ILLEGAL_GENERATION, session lost, other heartbeat errors
			g.lose(ctx)
		}
	}
}

// stable applies the assignment and waits until a rejoin is needed: the heartbeat
// reports one, Subscribe asks for one, or a cooperative round revoked partitions (the
// second phase of KIP-429). Auto-commits run here. It returns why it stopped (nil for a
// plain rejoin).
func (g *groupMgr) stable(ctx context.Context, assigned []TopicPartition, hbErr <-chan error) error {
	if g.apply(ctx, assigned) {
		return nil
	}
	var tick <-chan time.Time
	if !g.c.cfg.DisableAutoCommit {
		t := time.NewTicker(g.c.cfg.AutoCommitInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case err := <-hbErr:
			return err
		case <-g.rejoin:
			return nil
		case <-tick:
			_ = g.c.CommitUncommitted(ctx) // failures: the next tick (or revocation) retries
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// retriableJoinErr reports join errors after which the member tries again.
func (g *groupMgr) retriableJoinErr(err error) bool {
	return retriableCoordinatorErr(err) ||
		errors.Is(err, kerr.RebalanceInProgress) ||
		errors.Is(err, kerr.IllegalGeneration) ||
		errors.Is(err, kerr.UnknownMemberID) ||
		errors.Is(err, errUnknownBroker)
}

func (g *groupMgr) ownedList() []TopicPartition {
	g.c.mu.Lock()
	defer g.c.mu.Unlock()
	out := make([]TopicPartition, 0, len(g.owned))
	for tp := range g.owned {
		out = append(out, tp)
	}
	return sortTPs(out)
}

// revoke gives up partitions the member still owns: commit what was consumed (with auto
// commit), tell the application, stop fetching them.
func (g *groupMgr) revoke(ctx context.Context, tps []TopicPartition) {
	if len(tps) == 0 {
		return
	}
	c := g.c
	if !c.cfg.DisableAutoCommit {
		only := map[TopicPartition]bool{}
		for _, tp := range tps {
			only[tp] = true
		}
		c.mu.Lock()
		offsets := c.uncommittedLocked(only)
		c.mu.Unlock()
		_ = c.CommitOffsets(ctx, offsets) // as Java: a failed commit does not stop the revocation
	}
	if c.cfg.OnRevoked != nil {
		c.cfg.OnRevoked(ctx, tps)
	}
	g.drop(tps)
}

// lose drops every partition without committing: the member is no longer in the
// generation that owned them, so another member may already consume them.
func (g *groupMgr) lose(ctx context.Context) {
	tps := g.ownedList()
	g.c.mu.Lock()
	g.generation = -1
	g.c.mu.Unlock()
	if len(tps) == 0 {
		return
	}
	if g.c.cfg.OnLost != nil {
		g.c.cfg.OnLost(ctx, tps)
	}
	g.drop(tps)
}

func (g *groupMgr) drop(tps []TopicPartition) {
	c := g.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range tps {
		delete(g.owned, tp)
		delete(g.committed, tp)
		delete(c.parts, tp)
	}
}

// apply installs an assignment. It reports whether the member must rejoin at once
// (cooperative: it revoked partitions, which the next round gives to their new owners).
func (g *groupMgr) apply(ctx context.Context, assigned []TopicPartition) bool {
	c := g.c
	now := map[TopicPartition]bool{}
	for _, tp := range assigned {
		now[tp] = true
	}
	var revoked, added []TopicPartition
	for _, tp := range g.ownedList() {
		if !now[tp] {
			revoked = append(revoked, tp)
		}
	}
	c.mu.Lock()
	for _, tp := range assigned {
		if !g.owned[tp] {
			added = append(added, tp)
		}
	}
	c.mu.Unlock()
	g.revoke(ctx, revoked) // eager: nothing left to revoke here
	if len(added) > 0 {
		offsets := g.fetchCommitted(ctx, added)
		c.mu.Lock()
		for _, tp := range added {
			g.owned[tp] = true
			start := c.cfg.ResetOffset
			if o, ok := offsets[tp]; ok && o >= 0 {
				start = Offset(o)
				g.committed[tp] = o
			}
			c.parts[tp] = newCpart(tp, start)
		}
		c.mu.Unlock()
		if c.cfg.OnAssigned != nil {
			c.cfg.OnAssigned(ctx, sortTPs(added))
		}
	}
	return g.cooperative && len(revoked) > 0
}

// fetchCommitted reads the group's committed offsets for tps (OffsetFetch; with
// read_committed it asks for stable offsets only, KIP-447, and waits out
// UNSTABLE_OFFSET_COMMIT). Partitions without a commit are missing from the result; on
// failure (ctx done) the result is empty and the partitions start at ResetOffset.
func (g *groupMgr) fetchCommitted(ctx context.Context, tps []TopicPartition) map[TopicPartition]int64 {
	c := g.c
	out := map[TopicPartition]int64{}
	_ = retryCoordinator(ctx, g.co, func() (bool, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = c.cfg.IsolationLevel == ReadCommitted
		req.Group = c.cfg.Group
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = c.cfg.Group
		for _, tp := range sortTPs(tps) {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
				rt := kmsg.NewOffsetFetchRequestTopic()
				rt.Topic = tp.Topic
				req.Topics = append(req.Topics, rt)
				gt := kmsg.NewOffsetFetchRequestGroupTopic()
				gt.Topic = tp.Topic
				rg.Topics = append(rg.Topics, gt)
			}
			req.Topics[len(req.Topics)-1].Partitions = append(req.Topics[len(req.Topics)-1].Partitions, tp.Partition)
			rg.Topics[len(rg.Topics)-1].Partitions = append(rg.Topics[len(rg.Topics)-1].Partitions, tp.Partition)
		}
		req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
		resp, err := g.co.do(ctx, req, reqOpts{maxVersion: -1})
		if err != nil {
			return retriableCoordinatorErr(err), err
		}
		r := resp.(*kmsg.OffsetFetchResponse)
		type part struct {
			tp     TopicPartition
			offset int64
			code   int16
		}
		var parts []part
		groupCode := r.ErrorCode
		if r.Version >= 8 {
			for _, rg := range r.Groups {
				groupCode = rg.ErrorCode
				for _, rt := range rg.Topics {
					for _, rp := range rt.Partitions {
						parts = append(parts, part{TopicPartition{rt.Topic, rp.Partition}, rp.Offset, rp.ErrorCode})
					}
				}
			}
		} else {
			for _, rt := range r.Topics {
				for _, rp := range rt.Partitions {
					parts = append(parts, part{TopicPartition{rt.Topic, rp.Partition}, rp.Offset, rp.ErrorCode})
				}
			}
		}
		if err := kerr.ErrorForCode(groupCode); err != nil {
			return retriableCoordinatorErr(err), fmt.Errorf("client: OffsetFetch group %q: %w", c.cfg.Group, err)
		}
		for _, p := range parts {
			if err := kerr.ErrorForCode(p.code); err != nil {
				// UNSTABLE_OFFSET_COMMIT: a transaction with offsets for the partition is
				// not finished; ask again.
				return retriableCoordinatorErr(err), fmt.Errorf("client: OffsetFetch %s[%d]: %w", p.tp.Topic, p.tp.Partition, err)
			}
			if p.offset >= 0 {
				out[p.tp] = p.offset
			}
		}
		return false, nil
	})
	return out
}

// ---- join and sync ----

// joinAndSync runs JoinGroup (retrying MEMBER_ID_REQUIRED at once with the member id the
// coordinator handed out), computes the assignment when this member leads, and runs
// SyncGroup. It returns this member's assignment.
func (g *groupMgr) joinAndSync(ctx context.Context) ([]TopicPartition, error) {
	c := g.c
	for {
		c.mu.Lock()
		member, gen, topics := g.memberID, g.generation, g.topics
		owned := make([]TopicPartition, 0, len(g.owned))
		for tp := range g.owned {
			owned = append(owned, tp)
		}
		c.mu.Unlock()

		req := kmsg.NewPtrJoinGroupRequest()
		req.Group = c.cfg.Group
		req.SessionTimeoutMillis = int32(c.cfg.SessionTimeout.Milliseconds())
		req.RebalanceTimeoutMillis = int32(c.cfg.RebalanceTimeout.Milliseconds())
		req.MemberID, req.InstanceID = member, g.instanceID
		req.ProtocolType = consumerProtocolType
		for _, b := range g.balancers {
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name = b.Name()
			p.Metadata = encodeSubscription(b, topics, owned, gen)
			req.Protocols = append(req.Protocols, p)
		}
		resp, err := g.co.do(ctx, req, reqOpts{maxVersion: -1, extra: c.cfg.RebalanceTimeout})
		if err != nil {
			return nil, err
		}
		jr := resp.(*kmsg.JoinGroupResponse)
		if err := kerr.ErrorForCode(jr.ErrorCode); err != nil {
			switch {
			case errors.Is(err, kerr.MemberIDRequired):
				c.mu.Lock()
				g.memberID = jr.MemberID
				c.mu.Unlock()
				continue
			case errors.Is(err, kerr.UnknownMemberID):
				c.mu.Lock()
				g.memberID = ""
				c.mu.Unlock()
			case coordinatorMoved(err):
				g.co.invalidate()
			}
			return nil, fmt.Errorf("client: JoinGroup %q: %w", c.cfg.Group, err)
		}
		c.mu.Lock()
		g.memberID, g.generation = jr.MemberID, jr.Generation
		c.mu.Unlock()
		protocol := ""
		if jr.Protocol != nil {
			protocol = *jr.Protocol
		}

		var plan []kmsg.SyncGroupRequestGroupAssignment
		if jr.LeaderID == jr.MemberID && !jr.SkipAssignment {
			if plan, err = g.leaderAssign(ctx, protocol, jr.Members); err != nil {
				return nil, err
			}
		}
		sreq := kmsg.NewPtrSyncGroupRequest()
		sreq.Group, sreq.Generation, sreq.MemberID, sreq.InstanceID = c.cfg.Group, jr.Generation, jr.MemberID, g.instanceID
		sreq.ProtocolType = kmsg.StringPtr(consumerProtocolType)
		sreq.Protocol = jr.Protocol
		sreq.GroupAssignment = plan
		sresp, err := g.co.do(ctx, sreq, reqOpts{maxVersion: -1, extra: c.cfg.RebalanceTimeout})
		if err != nil {
			return nil, err
		}
		sr := sresp.(*kmsg.SyncGroupResponse)
		if err := kerr.ErrorForCode(sr.ErrorCode); err != nil {
			switch {
			case errors.Is(err, kerr.UnknownMemberID):
				c.mu.Lock()
				g.memberID = ""
				c.mu.Unlock()
			case coordinatorMoved(err):
				g.co.invalidate()
			}
			return nil, fmt.Errorf("client: SyncGroup %q: %w", c.cfg.Group, err)
		}
		return decodeAssignment(sr.MemberAssignment)
	}
}

// leaderAssign runs the chosen balancer over the members' subscriptions.
func (g *groupMgr) leaderAssign(ctx context.Context, protocol string, members []kmsg.JoinGroupResponseMember) ([]kmsg.SyncGroupRequestGroupAssignment, error) {
	var bal Balancer
	for _, b := range g.balancers {
		if b.Name() == protocol {
			bal = b
		}
	}
	if bal == nil {
		return nil, fmt.Errorf("client: group %q chose protocol %q, which this member does not offer: %w", g.c.cfg.Group, protocol, kerr.InconsistentGroupProtocol)
	}
	subs := make([]groupMember, 0, len(members))
	topicSet := map[string]bool{}
	for _, m := range members {
		gm, err := decodeSubscription(m.MemberID, m.InstanceID, m.ProtocolMetadata)
		if err != nil {
			return nil, err
		}
		subs = append(subs, gm)
		for _, t := range gm.topics {
			topicSet[t] = true
		}
	}
	topics := mapKeys(topicSet)
	counts := map[string]int32{}
	if len(topics) > 0 {
		if _, err := g.c.cl.refreshMetadata(ctx, topics); err != nil {
			return nil, err
		}
		for _, t := range topics {
			if tm := g.c.cl.topic(t); tm != nil && tm.err == nil {
				counts[t] = int32(len(tm.partitions))
			}
		}
	}
	plan, err := bal.assign(subs, counts)
	if err != nil {
		return nil, err
	}
	out := make([]kmsg.SyncGroupRequestGroupAssignment, 0, len(subs))
	for _, m := range subs {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = m.id, encodeAssignment(plan[m.id])
		out = append(out, a)
	}
	return out, nil
}

// ---- heartbeat ----

// heartbeat sends Heartbeat every HeartbeatInterval until ctx is done or the coordinator
// answers something that needs a rejoin; it returns that error. Coordinator moves and
// transport errors are retried until a session timeout passes without a success.
func (g *groupMgr) heartbeat(ctx context.Context, gen int32, member string) error {
	c := g.c
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID, req.InstanceID = c.cfg.Group, gen, member, g.instanceID
		resp, err := g.co.do(ctx, req, reqOpts{maxVersion: -1})
		if err == nil {
			err = kerr.ErrorForCode(resp.(*kmsg.HeartbeatResponse).ErrorCode)
		}
		switch {
		case err == nil:
			lastOK = time.Now()
			continue
		case ctx.Err() != nil:
			return nil
		case coordinatorMoved(err), isTransportError(err), errors.Is(err, kerr.CoordinatorLoadInProgress):
			if coordinatorMoved(err) {
				g.co.invalidate()
			}
			if time.Since(lastOK) >= c.cfg.SessionTimeout {
				return fmt.Errorf("%w: %w", errSessionLost, err)
			}
			continue
		}
		return fmt.Errorf("client: Heartbeat %q: %w", c.cfg.Group, err)
	}
}

// leave ends the membership on Close: revoke (committing with auto commit) and, for a
// dynamic member, LeaveGroup so the group rebalances at once. A static member stays
// registered until its session times out, so a restart with the same instance id gets
// its partitions back without a rebalance (as Java's static members).
func (g *groupMgr) leave(ctx context.Context) {
	c := g.c
	c.mu.Lock()
	started, member := g.started, g.memberID
	c.mu.Unlock()
	if !started {
		return
	}
	g.revoke(ctx, g.ownedList())
	if member == "" || g.instanceID != nil {
		return
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = c.cfg.Group, member
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = member
	m.Reason = kmsg.StringPtr("the consumer is closing")
	req.Members = []kmsg.LeaveGroupRequestMember{m}
	_, _ = g.co.do(ctx, req, reqOpts{maxVersion: -1}) // best effort: the session timeout covers a failure
}
