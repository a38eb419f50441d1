package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sharePeer scripts a one-node cluster serving one share group on topic "t" (one
// partition): FindCoordinator, Metadata with topic ids, ShareGroupHeartbeat,
// ShareFetch and ShareAcknowledge. It checks share session epochs the way a broker does
// and reports every share request on a channel, so tests wait for protocol events instead
// of time. The first fetch of a session that asks for partition 0 gets offsets 0..3
// ("a".."d") and a commit marker at 4, all acquired (4 is a gap); later fetches wait
// MaxWaitMs (a long poll) and return nothing.
type sharePeer struct {
	*peer
	t       *testing.T
	topicID [16]byte

	mu        sync.Mutex
	epoch     int32 // member epoch the coordinator hands out
	hbFault   []int16
	sessEpoch int32 // expected next share session epoch; 0 when there is no session
	served    bool  // records were delivered once
	ackFault  int16 // partition error for the next ShareAcknowledge
	events    chan any
	log       []string
}

func newSharePeer(t *testing.T) *sharePeer {
	sp := &sharePeer{t: t, topicID: [16]byte{1, 2, 3}, epoch: 5, events: make(chan any, 1024)}
	sp.peer = newPeer(t, func(p *peer) { p.handle = sp.handle })
	return sp
}

func (sp *sharePeer) logf(format string, args ...any) {
	sp.log = append(sp.log, fmt.Sprintf(format, args...))
}

func (sp *sharePeer) logged() []string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return append([]string(nil), sp.log...)
}

// next returns the next share request of type T, skipping others.
func nextEvent[T any](t *testing.T, sp *sharePeer) T {
	t.Helper()
	ctx := testCtx(t)
	for {
		select {
		case e := <-sp.events:
			if v, ok := e.(T); ok {
				return v
			}
		case <-ctx.Done():
			var zero T
			t.Fatalf("no %T", zero)
			return zero
		}
	}
}

func (sp *sharePeer) handle(pc *peerConn, req *peerReq) kmsg.Response {
	host, port, _ := net.SplitHostPort(sp.addr)
	pn, _ := strconv.Atoi(port)
	switch r := req.body.(type) {
	case *kmsg.FindCoordinatorRequest:
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = r.CoordinatorKey, 1, host, int32(pn)
		if r.Version >= 4 {
			c.Key = r.CoordinatorKeys[0]
		}
		resp.Coordinators = append(resp.Coordinators, c)
		resp.NodeID, resp.Host, resp.Port = 1, host, int32(pn)
		return resp
	case *kmsg.MetadataRequest:
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 1, host, int32(pn)
		resp.Brokers = append(resp.Brokers, b)
		for _, rt := range r.Topics {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			if rt.Topic == nil || *rt.Topic != "t" {
				mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				mt.TopicID = sp.topicID
				for i := int32(0); i < 2; i++ {
					mp := kmsg.NewMetadataResponseTopicPartition()
					mp.Partition, mp.Leader, mp.Replicas, mp.ISR = i, 1, []int32{1}, []int32{1}
					mt.Partitions = append(mt.Partitions, mp)
				}
			}
			resp.Topics = append(resp.Topics, mt)
		}
		return resp
	case *kmsg.ShareGroupHeartbeatRequest:
		return sp.heartbeat(r)
	case *kmsg.ShareFetchRequest:
		return sp.fetch(r)
	case *kmsg.ShareAcknowledgeRequest:
		return sp.ack(r)
	}
	sp.t.Errorf("unexpected request %s", kmsg.NameForKey(req.key))
	return nil
}

func (sp *sharePeer) heartbeat(r *kmsg.ShareGroupHeartbeatRequest) kmsg.Response {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.logf("heartbeat epoch=%d", r.MemberEpoch)
	sp.events <- r
	resp := r.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	if len(sp.hbFault) > 0 {
		resp.ErrorCode = sp.hbFault[0]
		sp.hbFault = sp.hbFault[1:]
		return resp
	}
	if r.MemberEpoch == -1 {
		resp.MemberEpoch = -1
		return resp
	}
	resp.MemberID = kmsg.StringPtr(r.MemberID)
	resp.MemberEpoch = sp.epoch
	resp.HeartbeatIntervalMillis = 50
	if r.MemberEpoch == 0 {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		tp.TopicID, tp.Partitions = sp.topicID, []int32{0}
		a.TopicPartitions = append(a.TopicPartitions, tp)
		resp.Assignment = &a
	}
	return resp
}

// checkSession applies the broker's session epoch rules; it returns a top-level error code.
func (sp *sharePeer) checkSession(epoch int32, fetch bool, hasAcks bool) int16 {
	switch {
	case epoch == 0 && !fetch:
		return kerr.InvalidShareSessionEpoch.Code
	case epoch == 0 && hasAcks:
		return kerr.InvalidRequest.Code
	case epoch == 0:
		sp.sessEpoch = 1
	case sp.sessEpoch == 0:
		return kerr.ShareSessionNotFound.Code
	case epoch == -1:
		sp.sessEpoch = 0
	case epoch != sp.sessEpoch:
		sp.t.Errorf("session epoch %d, want %d", epoch, sp.sessEpoch)
		return kerr.InvalidShareSessionEpoch.Code
	default:
		sp.sessEpoch++
	}
	return 0
}

func (sp *sharePeer) fetch(r *kmsg.ShareFetchRequest) kmsg.Response {
	sp.mu.Lock()
	hasAcks, wants0 := false, false
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			hasAcks = hasAcks || len(p.AcknowledgementBatches) > 0
			wants0 = wants0 || p.Partition == 0
		}
	}
	sp.logf("fetch epoch=%d", r.ShareSessionEpoch)
	sp.events <- r
	resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
	if code := sp.checkSession(r.ShareSessionEpoch, true, hasAcks); code != 0 {
		sp.mu.Unlock()
		resp.ErrorCode = code
		return resp
	}
	rt := kmsg.NewShareFetchResponseTopic()
	rt.TopicID = sp.topicID
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) > 0 {
				rp := kmsg.NewShareFetchResponseTopicPartition()
				rp.Partition, rp.Records = p.Partition, []byte{}
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
	}
	serve := wants0 && !sp.served && r.MaxRecords > 0
	if serve {
		sp.served = true
	}
	sp.mu.Unlock()
	if serve {
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition = 0
		rp.Records = append(encodeAt(sp.t, 0, -1, false, "a", "b", "c", "d"), marker(4, 9, true)...)
		ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
		ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = 0, 4, 1
		rp.AcquiredRecords = append(rp.AcquiredRecords, ar)
		rt.Partitions = append(rt.Partitions, rp)
	} else if r.MaxWaitMillis > 0 && !hasAcks {
		// An empty long poll (a broker holds it up to MaxWaitMs).
		tm := time.NewTimer(time.Duration(r.MaxWaitMillis) * time.Millisecond)
		<-tm.C
	}
	if len(rt.Partitions) > 0 {
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (sp *sharePeer) ack(r *kmsg.ShareAcknowledgeRequest) kmsg.Response {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.logf("ack epoch=%d renew=%v", r.ShareSessionEpoch, r.IsRenewAck)
	sp.events <- r
	resp := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	if code := sp.checkSession(r.ShareSessionEpoch, false, true); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	for _, t := range r.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, sp.ackFault
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	sp.ackFault = 0
	return resp
}

// ackBatchesOf flattens a request's acknowledgement batches of partition 0 to
// "first-last:types".
func fetchAcks(r *kmsg.ShareFetchRequest) []string {
	var out []string
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			for _, b := range p.AcknowledgementBatches {
				out = append(out, fmt.Sprintf("%d:%d-%d:%v", p.Partition, b.FirstOffset, b.LastOffset, b.AcknowledgeTypes))
			}
		}
	}
	return out
}

func ackAcks(r *kmsg.ShareAcknowledgeRequest) []string {
	var out []string
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			for _, b := range p.AcknowledgementBatches {
				out = append(out, fmt.Sprintf("%d:%d-%d:%v", p.Partition, b.FirstOffset, b.LastOffset, b.AcknowledgeTypes))
			}
		}
	}
	return out
}

func newPeerShareConsumer(t *testing.T, sp *sharePeer, mode AckMode, mod func(*ShareConsumerConfig)) *ShareConsumer {
	t.Helper()
	cfg := ShareConsumerConfig{Brokers: []string{sp.addr}, Group: "g", Topics: []string{"t"}, AckMode: mode,
		MaxWait: 50 * time.Millisecond, Net: NetConfig{RetryBackoff: 10 * time.Millisecond}}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewShareConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func TestShareHeartbeatLifecycle(t *testing.T) {
	sp := newSharePeer(t)
	c := newPeerShareConsumer(t, sp, AckImplicit, nil)
	join := nextEvent[*kmsg.ShareGroupHeartbeatRequest](t, sp)
	if join.MemberEpoch != 0 || len(join.MemberID) != 36 || !reflect.DeepEqual(join.SubscribedTopicNames, []string{"t"}) || join.GroupID != "g" {
		t.Fatalf("join %+v", join)
	}
	hb := nextEvent[*kmsg.ShareGroupHeartbeatRequest](t, sp)
	if hb.MemberEpoch != 5 || hb.MemberID != join.MemberID || hb.SubscribedTopicNames != nil {
		t.Fatalf("heartbeat after join %+v", hb)
	}
	if md := c.GroupMetadata(); md != (ShareGroupMetadata{"g", join.MemberID, 5}) {
		t.Fatalf("metadata %+v", md)
	}
	if got := c.Assignment(); !reflect.DeepEqual(got, []TopicPartition{{"t", 0}}) {
		t.Fatalf("assignment %v", got)
	}

	// Fenced: rejoin at epoch 0 with the same member id, and take the new epoch.
	sp.mu.Lock()
	sp.hbFault = []int16{kerr.FencedMemberEpoch.Code}
	sp.epoch = 9
	sp.mu.Unlock()
	for {
		hb = nextEvent[*kmsg.ShareGroupHeartbeatRequest](t, sp)
		if hb.MemberEpoch == 0 {
			break
		}
	}
	if hb.MemberID != join.MemberID || len(hb.SubscribedTopicNames) != 1 {
		t.Fatalf("rejoin %+v", hb)
	}
	if hb = nextEvent[*kmsg.ShareGroupHeartbeatRequest](t, sp); hb.MemberEpoch != 9 {
		t.Fatalf("after rejoin epoch %d", hb.MemberEpoch)
	}

	if err := c.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	log := sp.logged()
	if last := log[len(log)-1]; last != "heartbeat epoch=-1" {
		t.Fatalf("close did not leave last: %q", log)
	}
}

func TestShareImplicitPiggyback(t *testing.T) {
	sp := newSharePeer(t)
	c := newPeerShareConsumer(t, sp, AckImplicit, nil)
	ctx := testCtx(t)
	recs, err := c.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(recs); !reflect.DeepEqual(got, []string{"0:a", "1:b", "2:c", "3:d"}) {
		t.Fatalf("records %v", got)
	}
	for _, r := range recs {
		if r.DeliveryCount != 1 {
			t.Fatalf("delivery count %d", r.DeliveryCount)
		}
	}
	first := nextEvent[*kmsg.ShareFetchRequest](t, sp)
	if first.ShareSessionEpoch != 0 || len(fetchAcks(first)) != 0 || first.MaxRecords != defaultShareMaxRecords {
		t.Fatalf("opening fetch %+v", first)
	}
	// The next Poll accepts them on its fetch (epoch 1), with the marker as a gap.
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Poll(pctx)
		done <- err
	}()
	f := nextEvent[*kmsg.ShareFetchRequest](t, sp)
	if f.ShareSessionEpoch != 1 || !reflect.DeepEqual(fetchAcks(f), []string{"0:0-4:[1 1 1 1 0]"}) {
		t.Fatalf("piggybacked fetch epoch %d acks %v", f.ShareSessionEpoch, fetchAcks(f))
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("poll: %v", err)
	}
	if _, err := c.CommitSync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Acknowledge(recs[0], AckAccept); !errors.Is(err, ErrImplicitMode) {
		t.Fatalf("acknowledge in implicit mode: %v", err)
	}
}

func TestShareExplicitCommitRenewClose(t *testing.T) {
	sp := newSharePeer(t)
	var mu sync.Mutex
	var results []AckResult
	c := newPeerShareConsumer(t, sp, AckExplicit, func(cfg *ShareConsumerConfig) {
		cfg.OnAcknowledged = func(rs []AckResult) {
			mu.Lock()
			results = append(results, rs...)
			mu.Unlock()
		}
	})
	ctx := testCtx(t)
	recs, err := c.Poll(ctx)
	if err != nil || len(recs) != 4 {
		t.Fatalf("poll %v %v", values(recs), err)
	}
	if _, err := c.Poll(ctx); !errors.Is(err, ErrUnacknowledged) {
		t.Fatalf("poll with unacknowledged records: %v", err)
	}
	for i, typ := range []AckType{AckAccept, AckRelease, AckReject, AckRenew} {
		if err := c.Acknowledge(recs[i], typ); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.CommitSync(ctx)
	if err != nil || len(res) != 1 || res[TopicPartition{"t", 0}] != nil {
		t.Fatalf("commit %v %v", res, err)
	}
	a := nextEvent[*kmsg.ShareAcknowledgeRequest](t, sp)
	if a.ShareSessionEpoch != 1 || !a.IsRenewAck || !reflect.DeepEqual(ackAcks(a), []string{"0:0-4:[1 2 3 4 0]"}) {
		t.Fatalf("commit request epoch %d renew %v acks %v", a.ShareSessionEpoch, a.IsRenewAck, ackAcks(a))
	}
	mu.Lock()
	if len(results) != 1 || !reflect.DeepEqual(results[0].Offsets, []int64{0, 1, 2, 3, 4}) || results[0].Err != nil {
		t.Fatalf("callback %+v", results)
	}
	mu.Unlock()

	// A renewed record does not block Poll, but still needs a terminal ack: Close
	// releases it, in the session-closing ShareAcknowledge, then leaves the group.
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Poll(pctx)
		done <- err
	}()
	if f := nextEvent[*kmsg.ShareFetchRequest](t, sp); f.ShareSessionEpoch != 2 || len(fetchAcks(f)) != 0 {
		t.Fatalf("fetch after commit: epoch %d acks %v", f.ShareSessionEpoch, fetchAcks(f))
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("poll: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closing := nextEvent[*kmsg.ShareAcknowledgeRequest](t, sp)
	if closing.ShareSessionEpoch != -1 || !reflect.DeepEqual(ackAcks(closing), []string{"0:3-3:[2]"}) {
		t.Fatalf("closing request epoch %d acks %v", closing.ShareSessionEpoch, ackAcks(closing))
	}
	log := sp.logged()
	if log[len(log)-2] != "ack epoch=-1 renew=false" || log[len(log)-1] != "heartbeat epoch=-1" {
		t.Fatalf("close order %q", log)
	}
}

func TestShareAckErrorsAndLostSession(t *testing.T) {
	sp := newSharePeer(t)
	c := newPeerShareConsumer(t, sp, AckExplicit, nil)
	ctx := testCtx(t)
	recs, err := c.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs[:2] {
		_ = c.Acknowledge(r, AckAccept)
	}
	sp.mu.Lock()
	sp.ackFault = kerr.InvalidRecordState.Code
	sp.mu.Unlock()
	res, err := c.CommitSync(ctx)
	if !errors.Is(err, kerr.InvalidRecordState) || !errors.Is(res[TopicPartition{"t", 0}], kerr.InvalidRecordState) {
		t.Fatalf("commit with a partition error: %v %v", res, err)
	}

	// The broker forgets the session (restart): the acks are sent again on a new one.
	sp.mu.Lock()
	sp.sessEpoch = 0
	sp.mu.Unlock()
	for _, r := range recs[2:] {
		_ = c.Acknowledge(r, AckReject)
	}
	res, err = c.CommitSync(ctx)
	if err != nil || res[TopicPartition{"t", 0}] != nil {
		t.Fatalf("commit after session loss: %v %v", res, err)
	}
	if f := nextEvent[*kmsg.ShareFetchRequest](t, sp); f.ShareSessionEpoch != 0 {
		t.Fatalf("opening fetch epoch %d", f.ShareSessionEpoch)
	}
	if a := nextEvent[*kmsg.ShareAcknowledgeRequest](t, sp); a.ShareSessionEpoch != 1 || !reflect.DeepEqual(ackAcks(a), []string{"0:0-1:[1]", "0:4-4:[0]"}) {
		t.Fatalf("first commit epoch %d acks %v", a.ShareSessionEpoch, ackAcks(a))
	}
	if a := nextEvent[*kmsg.ShareAcknowledgeRequest](t, sp); a.ShareSessionEpoch != 2 {
		t.Fatalf("attempt on the lost session: epoch %d", a.ShareSessionEpoch)
	}
	if f := nextEvent[*kmsg.ShareFetchRequest](t, sp); f.ShareSessionEpoch != 0 || len(f.Topics) != 0 || f.MaxRecords != 0 {
		t.Fatalf("reopen %+v", f)
	}
	if a := nextEvent[*kmsg.ShareAcknowledgeRequest](t, sp); a.ShareSessionEpoch != 1 || !reflect.DeepEqual(ackAcks(a), []string{"0:2-3:[3]"}) {
		t.Fatalf("resent acks epoch %d %v", a.ShareSessionEpoch, ackAcks(a))
	}
}

func TestShareAcknowledgementsForTransaction(t *testing.T) {
	sp := newSharePeer(t)
	c := newPeerShareConsumer(t, sp, AckExplicit, nil)
	ctx := testCtx(t)
	recs, err := c.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Acknowledge(recs[0], AckAccept)
	_ = c.Acknowledge(recs[1], AckRelease)
	if acks, err := c.AcknowledgementsForTransaction(); !errors.Is(err, ErrAckNotTransactional) || acks != nil {
		t.Fatalf("with a RELEASE: %v %v", acks, err)
	}
	// Nothing was taken: the commit sends both.
	if _, err := c.CommitSync(ctx); err != nil {
		t.Fatal(err)
	}
	if a := nextEvent[*kmsg.ShareAcknowledgeRequest](t, sp); !reflect.DeepEqual(ackAcks(a), []string{"0:0-1:[1 2]", "0:4-4:[0]"}) {
		t.Fatalf("commit after refused drain %v", ackAcks(a))
	}

	_ = c.Acknowledge(recs[2], AckReject)
	acks, err := c.AcknowledgementsForTransaction()
	if err != nil {
		t.Fatal(err)
	}
	want := TxnAcks{{"t", 0}: {{FirstOffset: 2, LastOffset: 2, Types: []AckType{AckReject}}}}
	if !reflect.DeepEqual(acks, want) {
		t.Fatalf("drained %+v", acks)
	}
	if again, err := c.AcknowledgementsForTransaction(); err != nil || len(again) != 0 {
		t.Fatalf("second drain %v %v", again, err)
	}
	// Drained acks leave the normal path: a commit now sends nothing.
	if res, err := c.CommitSync(ctx); err != nil || len(res) != 0 {
		t.Fatalf("commit after drain %v %v", res, err)
	}
	// recs[3] is still in flight.
	if _, err := c.Poll(ctx); !errors.Is(err, ErrUnacknowledged) {
		t.Fatalf("poll: %v", err)
	}
}

func TestShareAckBatches(t *testing.T) {
	got := ackBatches(map[int64]AckType{5: AckAccept, 6: AckAccept, 7: AckReject, 9: AckAccept, 10: AckAccept})
	want := []ShareAckBatch{
		{FirstOffset: 5, LastOffset: 7, Types: []AckType{AckAccept, AckAccept, AckReject}},
		{FirstOffset: 9, LastOffset: 10, Types: []AckType{AckAccept}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("batches %+v", got)
	}
	recs := []*Record{{Topic: "a", Partition: 1, Offset: 3}, {Topic: "a", Partition: 1, Offset: 4}, {Topic: "a", Partition: 1, Offset: 8}, {Topic: "b", Offset: 0}}
	acks := ShareAcknowledgementsFromRecords(recs, AckAccept)
	wantAcks := TxnAcks{
		{"a", 1}: {{3, 4, []AckType{AckAccept}}, {8, 8, []AckType{AckAccept}}},
		{"b", 0}: {{0, 0, []AckType{AckAccept}}},
	}
	if !reflect.DeepEqual(acks, wantAcks) || acks.Len() != 4 {
		t.Fatalf("from records %+v", acks)
	}
	if err := validateTxnBatches(TopicPartition{"a", 1}, []ShareAckBatch{{0, 1, []AckType{AckRelease}}}); !errors.Is(err, ErrAckNotTransactional) {
		t.Fatalf("release: %v", err)
	}
	if err := validateTxnBatches(TopicPartition{"a", 1}, []ShareAckBatch{{0, 2, []AckType{AckAccept, AckAccept}}}); err == nil {
		t.Fatal("type count mismatch accepted")
	}
	if err := validateTxnBatches(TopicPartition{"a", 1}, []ShareAckBatch{{0, 2, []AckType{AckAccept}}, {2, 3, []AckType{AckAccept}}}); err == nil {
		t.Fatal("overlap accepted")
	}
	if id := newMemberID(); len(id) != 36 || id[14] != '4' {
		t.Fatalf("member id %q", id)
	}
}
