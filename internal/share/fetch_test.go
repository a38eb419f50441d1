package share

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchRecordsInEncodingOrder: a session whose partitions interleave topics (a0, b0,
// then a1) gets a response grouped by topic (a: 0, 1; b: 0); its Records follow that
// encoding order, which the broker's zero-copy encoding relies on (sfr checks it).
func TestFetchRecordsInEncodingOrder(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.init(group, topicB, 0)
	e.init(group, topicA, 1)
	e.fetch(fetchReq{member: "m", epoch: 0, parts: []int32{0}})
	e.fetch(fetchReq{member: "m", epoch: 1, topic: topicB, parts: []int32{0}})
	e.fetch(fetchReq{member: "m", epoch: 2, parts: []int32{1}})
	e.logs.produce(topicA, 0, 2, 0)
	e.logs.produce(topicB, 0, 2, 0)
	e.logs.produce(topicA, 1, 2, 0)
	resp := e.fetch(fetchReq{member: "m", epoch: 3})
	if len(resp.Topics) != 2 || resp.Topics[0].TopicID != topicA || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("response topics %+v, want a (0, 1) then b (0)", resp.Topics)
	}
	for _, want := range []struct {
		topic [16]byte
		p     int32
	}{{topicA, 0}, {topicA, 1}, {topicB, 0}} {
		e.wantAcquired(resp, want.topic, want.p, acquired{0, 1, 1})
	}
}

func TestStallWait(t *testing.T) {
	for _, c := range []struct {
		stalls  int
		maxWait time.Duration
		want    time.Duration
	}{
		{0, 5 * time.Second, 0},
		{1, 5 * time.Second, time.Millisecond},
		{2, 5 * time.Second, 2 * time.Millisecond},
		{11, 5 * time.Second, 1024 * time.Millisecond},
		{14, 5 * time.Second, 5 * time.Second},
		{1000, 5 * time.Second, 5 * time.Second},
		{4, 3 * time.Millisecond, 3 * time.Millisecond},
	} {
		if got := stallWait(c.stalls, c.maxWait); got != c.want {
			t.Errorf("stallWait(%d, %v) = %v, want %v", c.stalls, c.maxWait, got, c.want)
		}
	}
}

// timerCount returns how many timers the manager made so far.
func (e *env) timerCount() int {
	e.timersMu.Lock()
	defer e.timersMu.Unlock()
	return len(e.timers)
}

// newTimers waits until the manager has made n timers after the first from, and returns
// them.
func (e *env) newTimers(from, n int) []*fakeTimer {
	for {
		e.timersMu.Lock()
		if len(e.timers) >= from+n {
			ts := append([]*fakeTimer(nil), e.timers[from:]...)
			e.timersMu.Unlock()
			return ts
		}
		e.timersMu.Unlock()
		yield()
	}
}

// shareFetchAsync starts a ShareFetch; immediate tells whether it was answered without
// waiting, done delivers the response.
func (e *env) shareFetchAsync(r fetchReq) (immediate bool, done chan *kmsg.ShareFetchResponse) {
	e.t.Helper()
	resp, wait := e.m.ShareFetch(context.Background(), 0, 2, r.build())
	done = make(chan *kmsg.ShareFetchResponse, 1)
	if wait == nil {
		done <- sfr(resp)
		return true, done
	}
	go func() { done <- sfr(wait()) }()
	return false, done
}

// TestFetchStalledOnOwnLocks: a member whose own acquired records keep the partition at
// share.partition.max.record.locks gets its empty fetches answered early, at once, then
// after 1 ms, 2 ms, ... (fake timers), instead of waiting MaxWait for acknowledgements it
// can only send once the fetch returns; its acknowledgements reset the backoff. A member
// holding nothing at the limit, or one holding records below the limit, long-polls as
// before.
func TestFetchStalledOnOwnLocks(t *testing.T) {
	gc := DefaultGroupConfig()
	gc.PartitionMaxRecordLocks = 10
	e := newEnv(t)
	e.groups[group] = gc
	e.init(group, topicA, 0)
	for _, m := range []string{"m1", "m2", "m3"} {
		e.fetch(fetchReq{member: m, epoch: 0, parts: []int32{0}})
	}
	e.logs.produce(topicA, 0, 20, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1, maxRecords: 5}), topicA, 0, acquired{0, 4, 1})
	e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 1, maxRecords: 5}), topicA, 0, acquired{5, 9, 1})

	// m1 holds 5 of the 10 locks: answered at once, then after 1 ms, then 2 ms.
	if immediate, done := e.shareFetchAsync(fetchReq{member: "m1", epoch: 2, maxWaitMs: 5000}); !immediate {
		t.Fatal("first stalled fetch waited")
	} else {
		e.wantAcquired(<-done, topicA, 0)
	}
	ep := int32(3)
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond} {
		n := e.timerCount()
		immediate, done := e.shareFetchAsync(fetchReq{member: "m1", epoch: ep, maxWaitMs: 5000})
		ep++
		if immediate {
			t.Fatalf("stalled fetch with backoff %v answered at once", d)
		}
		ts := e.newTimers(n, 2)
		if ts[0].d != 5*time.Second || ts[1].d != d {
			t.Fatalf("timers %v and %v, want MaxWait and %v", ts[0].d, ts[1].d, d)
		}
		ts[1].c <- e.clk.Now()
		e.wantAcquired(<-done, topicA, 0)
	}

	// m1's acknowledgements free the window's head and reset its backoff: its fetch
	// acquires, and its next stall is answered at once again.
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep, maxRecords: 5, acks: acks{0: {ackBatch(0, 4, typeAccept)}}}), topicA, 0, acquired{10, 14, 1})
	ep++
	if immediate, done := e.shareFetchAsync(fetchReq{member: "m1", epoch: ep, maxWaitMs: 5000}); !immediate {
		t.Fatal("after an acknowledgement the backoff did not restart")
	} else {
		e.wantAcquired(<-done, topicA, 0)
	}
	ep++

	// m3 holds nothing: a plain long poll (MaxWait only), woken when m2 acknowledges the
	// head of the window.
	n := e.timerCount()
	immediate, done := e.shareFetchAsync(fetchReq{member: "m3", epoch: 1, maxWaitMs: 5000, maxRecords: 5})
	if immediate {
		t.Fatal("a member holding nothing was answered at once at the lock limit")
	}
	for !e.hasWaiter(topicA, 0) {
		yield()
	}
	if ts := e.newTimers(n, 1); len(ts) != 1 || ts[0].d != 5*time.Second {
		t.Fatalf("m3's poll made timers %v, want only MaxWait", ts)
	}
	e.ack(ackReq{member: "m2", epoch: 2, acks: acks{0: {ackBatch(5, 9, typeAccept)}}})
	e.wantAcquired(<-done, topicA, 0, acquired{15, 19, 1})

	// Below the limit, holding records and waiting for new ones is an ordinary long poll.
	e.ack(ackReq{member: "m1", epoch: ep, acks: acks{0: {ackBatch(10, 14, typeAccept)}}})
	n = e.timerCount()
	immediate, done = e.shareFetchAsync(fetchReq{member: "m3", epoch: 2, maxWaitMs: 5000})
	if immediate {
		t.Fatal("a fetch below the lock limit was answered at once")
	}
	ts := e.newTimers(n, 1)
	if ts[0].d != 5*time.Second {
		t.Fatalf("poll below the limit made timer %v, want MaxWait", ts[0].d)
	}
	ts[0].c <- e.clk.Now()
	e.wantAcquired(<-done, topicA, 0)
}

// TestFetchWithAcksAnsweredAtOnce: a ShareFetch that carries acknowledgements and can
// acquire nothing is answered as soon as they are durable, not after MaxWait: clients wait
// for the acknowledgement results (kgo's FlushAcks does).
func TestFetchWithAcksAnsweredAtOnce(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 3)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep}), topicA, 0, acquired{0, 2, 1})
	n := e.timerCount()
	_, done := e.shareFetchAsync(fetchReq{member: "m1", epoch: ep + 1, maxWaitMs: 5000, acks: acks{0: {ackBatch(0, 2, typeAccept)}}})
	resp := <-done
	e.wantAcquired(resp, topicA, 0)
	if code := part(resp, topicA, 0).AcknowledgeErrorCode; code != 0 {
		t.Fatalf("acknowledgement error %d", code)
	}
	if e.timerCount() != n {
		t.Fatal("a fetch with acknowledgements long-polled")
	}
}
