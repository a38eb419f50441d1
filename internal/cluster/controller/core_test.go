package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const testCluster = "test-cluster-id"

var t0 = time.UnixMilli(1_700_000_000_000)

// log is the metadata log as the tests drive it: the committed image at index, and the
// batches proposed and not yet applied (latest is committed with them applied).
type log struct {
	t         fataler
	committed *metadata.Image
	index     uint64
	latest    *metadata.Image
	pending   []pendingBatch
}

type pendingBatch struct {
	recs  []wire.MetadataRecord
	reply func(uint64) kmsg.Response
	done  func(kmsg.Response)
}

// fataler is what the log needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func newLog(t fataler, setup ...wire.MetadataRecord) *log {
	l := &log{t: t, committed: metadata.Empty()}
	l.commit(append([]wire.MetadataRecord{&wire.ClusterRecord{ClusterID: testCluster},
		&wire.FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 27}}, setup...))
	l.latest = l.committed
	return l
}

// commit applies recs as the next entry.
func (l *log) commit(recs []wire.MetadataRecord) uint64 {
	l.t.Helper()
	l.index++
	im, _, err := metadata.ApplyEntry(l.committed, l.index, recs)
	if err != nil {
		l.t.Fatalf("entry %d does not apply: %v\n%s", l.index, err, describe(recs))
	}
	l.committed = im
	return l.index
}

// flush applies every pending batch and answers it.
func (l *log) flush() {
	l.t.Helper()
	for _, p := range l.pending {
		idx := l.commit(p.recs)
		if p.done != nil {
			p.done(p.reply(idx))
		}
	}
	l.pending = nil
	l.latest = l.committed
}

// drop loses the pending batches, as a term change can.
func (l *log) drop() {
	l.pending = nil
	l.latest = l.committed
}

// run hands r to the log the way the driver does: immediate errors answered at once, a
// barrier applied at once (after what is pending), other batches left pending on latest
// (or flushed at once when hold is false). done gets the response when there is one.
func (l *log) run(r Result, hold bool, done func(kmsg.Response)) {
	l.t.Helper()
	switch {
	case r.Immediate:
		done(r.Reply(0))
	case r.Barrier:
		l.flush()
		idx := l.commit(r.Records)
		l.latest = l.committed
		if done != nil {
			done(r.Reply(idx))
		}
	case len(r.Records) == 0:
		l.flush() // an answer without records waits for what is in flight
		if done != nil && r.Reply != nil {
			done(r.Reply(0))
		}
	default:
		if r.Next == nil {
			l.t.Fatal("a batch without its speculative image")
		}
		bs := r.Batches()
		for i, b := range bs {
			p := pendingBatch{recs: b}
			if i == len(bs)-1 {
				p.reply, p.done = r.Reply, done
			}
			l.pending = append(l.pending, p)
		}
		l.latest = r.Next
		if !hold {
			l.flush()
		}
	}
}

// tick runs c's timers on latest at now.
func (l *log) tick(c *Core, now time.Time) Result {
	l.t.Helper()
	r, err := c.Tick(l.latest, now)
	if err != nil {
		l.t.Fatal(err)
	}
	return r
}

// handle runs req through core on latest and returns the answer once it is there.
func (l *log) handle(c *Core, now time.Time, req kmsg.Request) kmsg.Response {
	l.t.Helper()
	r, err := c.Handle(l.latest, now, req)
	if err != nil {
		l.t.Fatal(err)
	}
	var resp kmsg.Response
	l.run(r, false, func(x kmsg.Response) { resp = x })
	return resp
}

func describe(recs []wire.MetadataRecord) string {
	s := ""
	for _, r := range recs {
		s += fmt.Sprintf("  %T %+v\n", r, r)
	}
	return s
}

func dir(b int32, gen byte) [16]byte {
	var d [16]byte
	d[0], d[1], d[15] = 0xd1, gen, byte(b)
	return d
}

func incarnation(b int32, n byte) [16]byte {
	var d [16]byte
	d[0], d[1], d[15] = 0x1c, n, byte(b)
	return d
}

func registration(b int32, inc byte) *kmsg.BrokerRegistrationRequest {
	r := kmsg.NewPtrBrokerRegistrationRequest()
	r.Version = r.MaxVersion()
	r.BrokerID, r.ClusterID, r.IncarnationID = b, testCluster, incarnation(b, inc)
	r.Listeners = []kmsg.BrokerRegistrationRequestListener{{Name: "PLAINTEXT", Host: "localhost", Port: uint16(9092 + b)}}
	r.Features = []kmsg.BrokerRegistrationRequestFeature{{Name: "metadata.version", MinSupportedVersion: 7, MaxSupportedVersion: 27}}
	r.LogDirs = [][16]byte{dir(b, 0)}
	return r
}

func heartbeat(b int32, epoch int64, offset uint64) *kmsg.BrokerHeartbeatRequest {
	r := kmsg.NewPtrBrokerHeartbeatRequest()
	r.Version = r.MaxVersion()
	r.BrokerID, r.BrokerEpoch, r.CurrentMetadataOffset = b, epoch, int64(offset)
	return r
}

func topic(name string, replicas ...[]int32) []wire.MetadataRecord {
	var id metadata.TopicID
	copy(id[:], name)
	id[15] |= 1
	recs := []wire.MetadataRecord{&wire.TopicRecord{Name: name, TopicID: id}}
	for i, rs := range replicas {
		recs = append(recs, &wire.PartitionRecord{PartitionID: int32(i), TopicID: id, Replicas: rs, ISR: rs, Leader: -1})
	}
	return recs
}

func errCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.UnregisterBrokerResponse:
		return r.ErrorCode
	case *kmsg.AllocateProducerIDsResponse:
		return r.ErrorCode
	}
	panic(fmt.Sprintf("%T", resp))
}

func wantCode(t *testing.T, what string, resp kmsg.Response, want *kerr.Error) {
	t.Helper()
	got := errCode(resp)
	if (want == nil && got != 0) || (want != nil && got != want.Code) {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// register registers b and brings it to unfenced (a heartbeat caught up), returning its
// epoch.
func (l *log) register(t *testing.T, c *Core, now time.Time, b int32, inc byte) int64 {
	t.Helper()
	resp := l.handle(c, now, registration(b, inc)).(*kmsg.BrokerRegistrationResponse)
	wantCode(t, "registration", resp, nil)
	hb := l.handle(c, now, heartbeat(b, resp.BrokerEpoch, l.index)).(*kmsg.BrokerHeartbeatResponse)
	wantCode(t, "heartbeat", hb, nil)
	if hb.IsFenced || !hb.IsCaughtUp {
		t.Fatalf("broker %d after a caught-up heartbeat: fenced %v, caught up %v", b, hb.IsFenced, hb.IsCaughtUp)
	}
	return resp.BrokerEpoch
}

func TestRegistrationRefusals(t *testing.T) {
	l := newLog(t)
	c := New(Config{})
	epoch1 := l.register(t, c, t0, 1, 0)

	cases := []struct {
		name string
		edit func(r *kmsg.BrokerRegistrationRequest)
		want *kerr.Error
	}{
		{"wrong cluster id", func(r *kmsg.BrokerRegistrationRequest) { r.ClusterID = "other" }, kerr.InconsistentClusterID},
		{"live id, other incarnation", func(r *kmsg.BrokerRegistrationRequest) {
			r.BrokerID, r.IncarnationID, r.LogDirs = 1, incarnation(1, 9), [][16]byte{dir(1, 0)}
		}, kerr.DuplicateBrokerRegistration},
		{"zk broker", func(r *kmsg.BrokerRegistrationRequest) { r.IsMigratingZkBroker = true }, kerr.BrokerIDNotRegistered},
		{"no directory", func(r *kmsg.BrokerRegistrationRequest) { r.LogDirs = nil }, kerr.InvalidRegistration},
		{"reserved directory", func(r *kmsg.BrokerRegistrationRequest) { r.LogDirs = [][16]byte{{15: 1}} }, kerr.InvalidRegistration},
		{"directory twice", func(r *kmsg.BrokerRegistrationRequest) { r.LogDirs = [][16]byte{dir(2, 0), dir(2, 0)} }, kerr.InvalidRegistration},
		{"another broker's directory", func(r *kmsg.BrokerRegistrationRequest) { r.LogDirs = [][16]byte{dir(1, 0)} }, kerr.InvalidRegistration},
		{"listener twice", func(r *kmsg.BrokerRegistrationRequest) { r.Listeners = append(r.Listeners, r.Listeners[0]) }, kerr.InvalidRegistration},
		{"no metadata.version", func(r *kmsg.BrokerRegistrationRequest) { r.Features = nil }, kerr.InvalidRegistration},
		{"finalized level unsupported", func(r *kmsg.BrokerRegistrationRequest) { r.Features[0].MaxSupportedVersion = 26 }, kerr.UnsupportedVersion},
	}
	for _, tc := range cases {
		r := registration(2, 0)
		tc.edit(r)
		wantCode(t, tc.name, l.handle(c, t0, r), tc.want)
	}

	// A finalized feature the broker does not list must be at level 0.
	l.commit([]wire.MetadataRecord{&wire.FeatureLevelRecord{Name: "transaction.version", FeatureLevel: 2}})
	l.latest = l.committed
	wantCode(t, "unlisted finalized feature", l.handle(c, t0, registration(2, 0)), kerr.UnsupportedVersion)
	r := registration(2, 0)
	r.Features = append(r.Features, kmsg.BrokerRegistrationRequestFeature{Name: "transaction.version", MinSupportedVersion: 0, MaxSupportedVersion: 2})
	wantCode(t, "listed finalized feature", l.handle(c, t0, r), nil)

	// Heartbeats and allocations at a stale or unknown epoch.
	wantCode(t, "stale heartbeat", l.handle(c, t0, heartbeat(1, epoch1-1, l.index)), kerr.StaleBrokerEpoch)
	wantCode(t, "unregistered heartbeat", l.handle(c, t0, heartbeat(7, 1, l.index)), kerr.StaleBrokerEpoch)
	alloc := kmsg.NewPtrAllocateProducerIDsRequest()
	alloc.BrokerID, alloc.BrokerEpoch = 1, epoch1+1
	wantCode(t, "stale allocation", l.handle(c, t0, alloc), kerr.StaleBrokerEpoch)
	un := kmsg.NewPtrUnregisterBrokerRequest()
	un.BrokerID = 7
	wantCode(t, "unregister unknown", l.handle(c, t0, un), kerr.BrokerIDNotRegistered)
	if _, err := c.Handle(l.latest, t0, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("a Metadata request was taken for a controller request")
	}
}

// TestLifecycle walks one broker through the design's table: registered fenced, unfenced
// once caught up (leading its partitions), fenced by silence, back by a heartbeat,
// replaced by a restart, shut down, unregistered.
func TestLifecycle(t *testing.T) {
	var setup []wire.MetadataRecord
	setup = append(setup, topic("a", []int32{1}, []int32{2}, []int32{1})...)
	setup = append(setup, topic("b", []int32{1, 2})...)
	l := newLog(t, setup...)
	c := New(Config{})
	now := t0
	l.tick(c, now)

	reg := l.handle(c, now, registration(1, 0)).(*kmsg.BrokerRegistrationResponse)
	wantCode(t, "registration", reg, nil)
	if reg.BrokerEpoch != int64(l.index) || !l.committed.Brokers[1].Fenced {
		t.Fatalf("epoch %d at index %d, broker %+v: want the entry's index, fenced", reg.BrokerEpoch, l.index, l.committed.Brokers[1])
	}
	epoch := reg.BrokerEpoch
	hb := l.handle(c, now, heartbeat(1, epoch, uint64(epoch)-1)).(*kmsg.BrokerHeartbeatResponse)
	if !hb.IsFenced || hb.IsCaughtUp {
		t.Fatalf("a heartbeat behind the registration: fenced %v caught up %v, want fenced, behind", hb.IsFenced, hb.IsCaughtUp)
	}
	hb = l.handle(c, now, heartbeat(1, epoch, uint64(epoch))).(*kmsg.BrokerHeartbeatResponse)
	if hb.IsFenced || !hb.IsCaughtUp || l.committed.Brokers[1].Fenced {
		t.Fatalf("a caught-up heartbeat: fenced %v caught up %v", hb.IsFenced, hb.IsCaughtUp)
	}
	leaders := func() []int32 {
		a, b := l.committed.Topic("a"), l.committed.Topic("b")
		return []int32{a.Partitions[0].Leader, a.Partitions[1].Leader, a.Partitions[2].Leader, b.Partitions[0].Leader}
	}
	if got := fmt.Sprint(leaders()); got != "[1 -1 1 -1]" {
		t.Fatalf("leaders after unfencing 1: %s, want its two single-replica partitions", got)
	}

	// Silence: a tick within the session keeps it, the first after it fences.
	now = now.Add(9 * time.Second)
	if r := l.tick(c, now); len(r.Records) != 0 {
		t.Fatalf("fenced at exactly the session timeout: %s", describe(r.Records))
	}
	now = now.Add(time.Millisecond)
	l.run(l.tick(c, now), false, nil)
	if !l.committed.Brokers[1].Fenced || fmt.Sprint(leaders()) != "[-1 -1 -1 -1]" {
		t.Fatalf("after the session timeout: fenced %v, leaders %v", l.committed.Brokers[1].Fenced, leaders())
	}
	leaderEpoch := l.committed.Topic("a").Partitions[0].LeaderEpoch
	hb = l.handle(c, now, heartbeat(1, epoch, l.index)).(*kmsg.BrokerHeartbeatResponse)
	if hb.IsFenced || fmt.Sprint(leaders()) != "[1 -1 1 -1]" || l.committed.Topic("a").Partitions[0].LeaderEpoch != leaderEpoch+1 {
		t.Fatalf("back after a heartbeat: fenced %v leaders %v", hb.IsFenced, leaders())
	}

	// Restart: the old incarnation heartbeated just now, so a new one is refused ...
	wantCode(t, "restart while live", l.handle(c, now, registration(1, 1)), kerr.DuplicateBrokerRegistration)
	// ... until it has been silent for two heartbeat intervals (not the 9 s session).
	now = now.Add(4*time.Second + time.Millisecond)
	reg = l.handle(c, now, registration(1, 1)).(*kmsg.BrokerRegistrationResponse)
	wantCode(t, "restart after two intervals", reg, nil)
	if reg.BrokerEpoch <= epoch || !l.committed.Brokers[1].Fenced || fmt.Sprint(leaders()) != "[-1 -1 -1 -1]" {
		t.Fatalf("restarted: epoch %d (was %d), fenced %v, leaders %v", reg.BrokerEpoch, epoch, l.committed.Brokers[1].Fenced, leaders())
	}
	epoch = reg.BrokerEpoch
	wantCode(t, "old incarnation's heartbeat", l.handle(c, now, heartbeat(1, epoch-1, l.index)), kerr.StaleBrokerEpoch)
	l.handle(c, now, heartbeat(1, epoch, l.index))

	// The same incarnation registering again unchanged keeps its epoch and writes nothing.
	before := l.index
	reg = l.handle(c, now, registration(1, 1)).(*kmsg.BrokerRegistrationResponse)
	if reg.BrokerEpoch != epoch || l.index != before {
		t.Fatalf("a repeated registration: epoch %d (want %d), %d entries written", reg.BrokerEpoch, epoch, l.index-before)
	}

	// Controlled shutdown: fenced at once, partitions leaderless, told to go.
	shut := heartbeat(1, epoch, l.index)
	shut.WantShutdown = true
	hb = l.handle(c, now, shut).(*kmsg.BrokerHeartbeatResponse)
	if !hb.IsFenced || !hb.ShouldShutdown || !l.committed.Brokers[1].Fenced || fmt.Sprint(leaders()) != "[-1 -1 -1 -1]" {
		t.Fatalf("controlled shutdown: %+v, leaders %v", hb, leaders())
	}

	un := kmsg.NewPtrUnregisterBrokerRequest()
	un.BrokerID = 1
	wantCode(t, "unregister", l.handle(c, now, un), nil)
	if l.committed.Brokers[1] != nil {
		t.Fatal("still registered after UnregisterBroker")
	}
}

// TestNewControllerStartsSessions: a new term's Core knows no heartbeat; it starts every
// unfenced broker's session at its first tick, so a broker is fenced a session timeout
// after that tick, not at once, and a new incarnation may replace an old one it never
// heard from.
func TestNewControllerStartsSessions(t *testing.T) {
	l := newLog(t, topic("a", []int32{1})...)
	old := New(Config{})
	epoch := l.register(t, old, t0, 1, 0)

	c := New(Config{})
	start := t0.Add(time.Minute)
	if r := l.tick(c, start); len(r.Records) != 0 {
		t.Fatalf("the first tick of a term fenced: %s", describe(r.Records))
	}
	if r := l.tick(c, start.Add(9*time.Second)); len(r.Records) != 0 {
		t.Fatalf("fenced within the session started at the first tick: %s", describe(r.Records))
	}
	// Never heard by this controller: a new incarnation replaces it at once.
	reg := l.handle(c, start.Add(time.Second), registration(1, 1)).(*kmsg.BrokerRegistrationResponse)
	wantCode(t, "restart unheard by the new controller", reg, nil)
	if reg.BrokerEpoch <= epoch {
		t.Fatalf("new epoch %d, old %d", reg.BrokerEpoch, epoch)
	}
}

func TestProducerIDBlocks(t *testing.T) {
	l := newLog(t)
	c := New(Config{})
	epoch := l.register(t, c, t0, 1, 0)
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = 1, epoch
	// Two allocations in flight at once, decided on latest, get consecutive blocks.
	var got []*kmsg.AllocateProducerIDsResponse
	for range 2 {
		r, err := c.Handle(l.latest, t0, req)
		if err != nil {
			t.Fatal(err)
		}
		l.run(r, true, func(resp kmsg.Response) { got = append(got, resp.(*kmsg.AllocateProducerIDsResponse)) })
	}
	l.flush()
	if len(got) != 2 || got[0].ProducerIDStart != 0 || got[1].ProducerIDStart != 1000 || got[0].ProducerIDLen != 1000 {
		t.Fatalf("blocks %+v, want [0,1000) and [1000,2000)", got)
	}
	if l.committed.ProducerIDs.Next != 2000 {
		t.Fatalf("next producer id %d", l.committed.ProducerIDs.Next)
	}
}

// TestPartitionChangesBounded: a fence that would change more partitions than a batch may
// hold fences with the first ones and leaves the rest to the next ticks.
func TestPartitionChangesBounded(t *testing.T) {
	var reps [][]int32
	for range 7 {
		reps = append(reps, []int32{1})
	}
	l := newLog(t, topic("a", reps...)...)
	c := New(Config{MaxPartitionChanges: 3})
	l.tick(c, t0)
	l.register(t, c, t0, 1, 0)
	for ticks := 0; ; ticks++ {
		r := l.tick(c, t0)
		if len(r.Records) == 0 {
			break
		}
		if ticks > 3 {
			t.Fatal("leaderships never all given")
		}
		l.run(r, false, nil)
	}
	for i, p := range l.committed.Topic("a").Partitions {
		if p.Leader != 1 {
			t.Fatalf("partition %d leader %d after the ticks", i, p.Leader)
		}
	}
	shut := heartbeat(1, l.committed.Brokers[1].Epoch, l.index)
	shut.WantFence = true
	r, _ := c.Handle(l.latest, t0, shut)
	if n := len(r.Records); n != 4 {
		t.Fatalf("fence batch of %d records, want 3 partitions and the broker", n)
	}
	l.run(r, false, nil)
	for range 3 {
		l.run(l.tick(c, t0), false, nil)
	}
	for i, p := range l.committed.Topic("a").Partitions {
		if p.Leader != -1 {
			t.Fatalf("partition %d still led by fenced broker %d", i, p.Leader)
		}
	}
}
