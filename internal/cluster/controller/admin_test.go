package controller

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminOptions sets what the admin tests share: this node is 0, placement starts at the
// first broker, topic ids count up from 1 (safe: one goroutine decides).
func adminOptions(o *Options) {
	var next uint64
	o.TickInterval, o.NodeID = -1, 0
	o.PlacementStart = func(int) int { return 0 }
	o.NewTopicID = func() metadata.TopicID {
		// Never repeating: admin checks a drawn id against the image, not against the
		// ids drawn earlier in the same request.
		next++
		var id metadata.TopicID
		binary.BigEndian.PutUint64(id[8:], next)
		return id
	}
}

// codes are the error codes of an admin response, one per topic or resource (one for
// UpdateFeatures).
func codes(resp kmsg.Response) []int16 {
	var out []int16
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			out = append(out, t.ErrorCode)
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range r.Topics {
			out = append(out, t.ErrorCode)
		}
	case *kmsg.CreatePartitionsResponse:
		for _, t := range r.Topics {
			out = append(out, t.ErrorCode)
		}
	case *kmsg.AlterConfigsResponse:
		for _, t := range r.Resources {
			out = append(out, t.ErrorCode)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, t := range r.Resources {
			out = append(out, t.ErrorCode)
		}
	case *kmsg.UpdateFeaturesResponse:
		out = append(out, r.ErrorCode)
	default:
		panic(fmt.Sprintf("%T", resp))
	}
	return out
}

func codeList(errs ...*kerr.Error) []int16 {
	out := make([]int16, len(errs))
	for i, e := range errs {
		if e != nil {
			out[i] = e.Code
		}
	}
	return out
}

func createTopics(validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.Version, r.ValidateOnly, r.Topics = 7, validateOnly, topics
	return r
}

func newTopic(name string, partitions int32, configs ...[2]string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, -1
	for _, kv := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = kv[0], &kv[1]
		t.Configs = append(t.Configs, c)
	}
	return t
}

func deleteTopics(names ...string) *kmsg.DeleteTopicsRequest {
	r := kmsg.NewPtrDeleteTopicsRequest()
	r.Version = 6
	for _, n := range names {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = &n
		r.Topics = append(r.Topics, t)
	}
	return r
}

func createPartitions(validateOnly bool, name string, count int32) *kmsg.CreatePartitionsRequest {
	r := kmsg.NewPtrCreatePartitionsRequest()
	r.Version, r.ValidateOnly = 3, validateOnly
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = name, count
	r.Topics = append(r.Topics, t)
	return r
}

func alterConfigs(resType kmsg.ConfigResourceType, name, key, value string) *kmsg.AlterConfigsRequest {
	r := kmsg.NewPtrAlterConfigsRequest()
	r.Version = 2
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = resType, name
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = key, &value
	res.Configs = append(res.Configs, c)
	r.Resources = append(r.Resources, res)
	return r
}

func incrementalSet(resType kmsg.ConfigResourceType, name, key, value string) *kmsg.IncrementalAlterConfigsRequest {
	r := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r.Version = 1
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = resType, name
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = key, kmsg.IncrementalAlterConfigOpSet, &value
	res.Configs = append(res.Configs, c)
	r.Resources = append(r.Resources, res)
	return r
}

func updateFeature(validateOnly bool, name string, level int16) *kmsg.UpdateFeaturesRequest {
	r := kmsg.NewPtrUpdateFeaturesRequest()
	r.Version, r.ValidateOnly = 1, validateOnly
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = name, level, 1
	r.FeatureUpdates = append(r.FeatureUpdates, u)
	return r
}

func askAdmin(t *testing.T, d *Driver, req kmsg.Request) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := d.Handle(WithClientID(ctx, "admin-test"), req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp
}

// TestDriverAdmin: each admin request through the driver on a real lone voter, in
// order, with the codes it must answer and what the committed image must then show. A
// validate-only request (and a refusal) must leave the log where it was.
func TestDriverAdmin(t *testing.T) {
	n := loneNode(t)
	d := startDriver(t, n, adminOptions)
	partitions := func(name string) int {
		im, _ := n.Image()
		if tp := im.Topic(name); tp != nil {
			return len(tp.Partitions)
		}
		return -1
	}
	topicConfig := func(name, key string) string {
		im, _ := n.Image()
		return im.Configs[metadata.ConfigResource{Type: metadata.ResourceTopic, Name: name}][key]
	}
	steps := []struct {
		name    string
		req     kmsg.Request
		want    []int16
		written bool         // the request must append to the log
		check   func() error // on the committed image once answered
	}{
		{name: "validate only", req: createTopics(true, newTopic("a", 3)), want: codeList(nil),
			check: func() error { return expect("partitions of a", partitions("a"), -1) }},
		{name: "create", req: createTopics(false, newTopic("a", 3, [2]string{"retention.ms", "1000"}), newTopic("b", -1)), want: codeList(nil, nil), written: true,
			check: func() error {
				return firstErr(expect("partitions of a", partitions("a"), 3), expect("partitions of b", partitions("b"), 1),
					expect("retention.ms of a", topicConfig("a", "retention.ms"), "1000"))
			}},
		{name: "create again", req: createTopics(false, newTopic("a", 1), newTopic("c", 1)), want: codeList(kerr.TopicAlreadyExists, nil), written: true,
			check: func() error { return expect("partitions of c", partitions("c"), 1) }},
		{name: "internal name", req: createTopics(false, newTopic("__consumer_offsets", 1)), want: codeList(kerr.InvalidRequest)},
		{name: "bad config", req: createTopics(false, newTopic("d", 1, [2]string{"retention.ms", "soon"})), want: codeList(kerr.InvalidConfig)},
		{name: "grow validate only", req: createPartitions(true, "a", 5), want: codeList(nil),
			check: func() error { return expect("partitions of a", partitions("a"), 3) }},
		{name: "grow", req: createPartitions(false, "a", 5), want: codeList(nil), written: true,
			check: func() error { return expect("partitions of a", partitions("a"), 5) }},
		{name: "shrink", req: createPartitions(false, "a", 2), want: codeList(kerr.InvalidPartitions)},
		{name: "alter", req: alterConfigs(kmsg.ConfigResourceTypeTopic, "b", "cleanup.policy", "compact"), want: codeList(nil), written: true,
			check: func() error { return expect("cleanup.policy of b", topicConfig("b", "cleanup.policy"), "compact") }},
		{name: "alter a missing topic", req: alterConfigs(kmsg.ConfigResourceTypeTopic, "zz", "cleanup.policy", "compact"), want: codeList(kerr.UnknownTopicOrPartition)},
		{name: "incremental", req: incrementalSet(kmsg.ConfigResourceTypeTopic, "a", "retention.ms", "2000"), want: codeList(nil), written: true,
			check: func() error { return expect("retention.ms of a", topicConfig("a", "retention.ms"), "2000") }},
		{name: "group config", req: incrementalSet(kmsg.ConfigResourceTypeGroupConfig, "g", "share.auto.offset.reset", "earliest"), want: codeList(nil), written: true,
			check: func() error {
				im, _ := n.Image()
				return expect("group g", im.Configs[metadata.ConfigResource{Type: metadata.ResourceGroup, Name: "g"}]["share.auto.offset.reset"], "earliest")
			}},
		{name: "feature validate only", req: updateFeature(true, "share.version", 1), want: codeList(nil)},
		{name: "feature", req: updateFeature(false, "share.version", 1), want: codeList(nil), written: true,
			check: func() error {
				im, _ := n.Image()
				return expect("share.version", im.Features["share.version"], int16(1))
			}},
		{name: "feature too high", req: updateFeature(false, "share.version", 99), want: codeList(kerr.InvalidUpdateVersion)},
		{name: "delete", req: deleteTopics("b", "zz"), want: codeList(nil, kerr.UnknownTopicOrPartition), written: true,
			check: func() error { return expect("partitions of b", partitions("b"), -1) }},
	}
	for _, s := range steps {
		_, before := n.Image()
		resp := askAdmin(t, d, s.req)
		if got := codes(resp); !slices.Equal(got, s.want) {
			t.Fatalf("%s: codes %v, want %v (%+v)", s.name, got, s.want, resp)
		}
		if _, after := n.Image(); (after != before) != s.written {
			t.Fatalf("%s: the log went from %d to %d", s.name, before, after)
		}
		if s.check != nil {
			if err := s.check(); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
	}
	// A created topic's answer names the id the image holds, and its partitions sit on this
	// node: no broker has registered.
	resp := askAdmin(t, d, createTopics(false, newTopic("e", 2))).(*kmsg.CreateTopicsResponse)
	im, _ := n.Image()
	if tp := im.Topic("e"); tp == nil || tp.ID != resp.Topics[0].TopicID || tp.Partitions[1].Leader != 0 {
		t.Fatalf("answered %+v; image has %+v", resp.Topics[0], tp)
	}
}

func expect[V comparable](what string, got, want V) error {
	if got != want {
		return fmt.Errorf("%s: %v, want %v", what, got, want)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestDriverInternalTopics: auto-creation and internal topics through their own methods.
// An existing topic answers its id; an internal name is not auto-created.
func TestDriverInternalTopics(t *testing.T) {
	n := loneNode(t)
	d := startDriver(t, n, adminOptions)
	ctx := context.Background()
	auto, err := d.AutoCreateTopic(ctx, "orders")
	if err != nil || auto.ErrorCode != 0 || auto.TopicID == ([16]byte{}) {
		t.Fatalf("auto-create: %+v, %v", auto, err)
	}
	again, err := d.AutoCreateTopic(ctx, "orders")
	if err != nil || again.ErrorCode != 0 || again.TopicID != auto.TopicID {
		t.Fatalf("auto-create of an existing topic: %+v, %v; first %x", again, err, auto.TopicID)
	}
	if r, _ := d.AutoCreateTopic(ctx, "__consumer_offsets"); r.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("auto-create of an internal topic: %+v", r)
	}
	if r, _ := d.AutoCreateTopic(ctx, "bad name!"); r.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("auto-create of a bad name: %+v", r)
	}
	req := CreateInternalTopicRequest{Name: "__consumer_offsets", Partitions: 4, Configs: map[string]string{"cleanup.policy": "compact"}}
	in, err := d.CreateInternalTopic(ctx, req)
	if err != nil || in.ErrorCode != 0 {
		t.Fatalf("internal topic: %+v, %v", in, err)
	}
	im, _ := n.Image()
	tp := im.Topic("__consumer_offsets")
	if tp == nil || tp.ID != in.TopicID || len(tp.Partitions) != 4 || im.Configs[metadata.ConfigResource{Type: metadata.ResourceTopic, Name: tp.Name}]["cleanup.policy"] != "compact" {
		t.Fatalf("image has %+v for %+v", tp, in)
	}
	if again, _ := d.CreateInternalTopic(ctx, req); again.ErrorCode != 0 || again.TopicID != in.TopicID {
		t.Fatalf("internal topic again: %+v", again)
	}
}

// TestDriverPlacementOverBrokers: with brokers registered, new partitions stripe over the
// unfenced ones only.
func TestDriverPlacementOverBrokers(t *testing.T) {
	n := loneNode(t)
	d := startDriver(t, n, adminOptions)
	for _, b := range []int32{1, 2, 3} {
		reg := ask[*kmsg.BrokerRegistrationResponse](t, d, registration(b, 0))
		wantCode(t, "registration", reg, nil)
		if b != 2 { // 2 stays fenced
			_, at := n.Image()
			wantCode(t, "heartbeat", ask[*kmsg.BrokerHeartbeatResponse](t, d, heartbeat(b, reg.BrokerEpoch, at)), nil)
		}
	}
	if got := codes(askAdmin(t, d, createTopics(false, newTopic("s", 4)))); !slices.Equal(got, codeList(nil)) {
		t.Fatalf("create: %v", got)
	}
	im, _ := n.Image()
	var leaders []int32
	for _, p := range im.Topic("s").Partitions {
		leaders = append(leaders, p.Leader)
	}
	if !slices.Equal(leaders, []int32{1, 3, 1, 3}) {
		t.Fatalf("leaders %v, want striped over the unfenced brokers 1 and 3", leaders)
	}
}

// TestDriverConcurrentCreates: creates of one name decided while each other's batches are
// in flight: the latest image lets exactly one win.
func TestDriverConcurrentCreates(t *testing.T) {
	n := loneNode(t)
	d := startDriver(t, n, adminOptions)
	const racers = 16
	got := make([]int16, racers)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i] = codes(askAdmin(t, d, createTopics(false, newTopic("race", 2))))[0] })
	}
	wg.Wait()
	won := 0
	for _, c := range got {
		switch c {
		case 0:
			won++
		case kerr.TopicAlreadyExists.Code:
		default:
			t.Fatalf("codes %v", got)
		}
	}
	if won != 1 {
		t.Fatalf("%d creates won: %v", won, got)
	}
}

// heldQuorum is a real quorum whose proposals wait while held, so a test can decide
// requests while earlier batches are in flight.
type heldQuorum struct {
	Quorum
	gate    chan struct{} // closed: proposals go through
	entered atomic.Int32  // proposals begun
}

func (h *heldQuorum) Propose(ctx context.Context, recs []wire.MetadataRecord) (uint64, error) {
	h.entered.Add(1)
	select {
	case <-h.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return h.Quorum.Propose(ctx, recs)
}

// TestDriverPipelinedCreateDeleteCreate: create, delete and create again of one topic,
// each decided while the batches before it are not yet applied (the latest image has
// them), all commit in order and the topic ends with the second create's id.
func TestDriverPipelinedCreateDeleteCreate(t *testing.T) {
	n := loneNode(t)
	hq := &heldQuorum{Quorum: n, gate: make(chan struct{})}
	d := startDriver(t, hq, adminOptions)
	reqs := []kmsg.Request{createTopics(false, newTopic("p", 1)), deleteTopics("p"), createTopics(false, newTopic("p", 3))}
	resps := make([]kmsg.Response, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() { resps[i] = askAdmin(t, d, req) })
		// The first batch is with the held proposer; each later one must be decided (and
		// queued behind it) before the next request is sent.
		if err := await.Until(10*time.Second, time.Millisecond, func() error {
			if hq.entered.Load() != 1 || len(d.batches) != i {
				return fmt.Errorf("%d proposals begun, %d batches queued", hq.entered.Load(), len(d.batches))
			}
			return nil
		}); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	close(hq.gate)
	wg.Wait()
	for i, resp := range resps {
		if got := codes(resp); !slices.Equal(got, codeList(nil)) {
			t.Fatalf("request %d: codes %v (%+v)", i, got, resp)
		}
	}
	im, _ := n.Image()
	last := resps[2].(*kmsg.CreateTopicsResponse).Topics[0].TopicID
	if tp := im.Topic("p"); tp == nil || tp.ID != last || len(tp.Partitions) != 3 || last == resps[0].(*kmsg.CreateTopicsResponse).Topics[0].TopicID {
		t.Fatalf("topic p %+v, want the second create's %x", tp, last)
	}
}

// checkBatches fails unless bs are groups in order, each batch whole groups that encode
// as an entry within maxBytes.
func checkBatches(t *testing.T, bs, groups [][]wire.MetadataRecord, maxBytes int) {
	t.Helper()
	g := 0
	for i, b := range bs {
		data, err := metadata.EncodeEntry(0, b)
		if err != nil || len(data) > maxBytes {
			t.Fatalf("batch %d: %d bytes, %v", i, len(data), err)
		}
		for len(b) > 0 {
			if g == len(groups) || len(b) < len(groups[g]) || !slices.Equal(b[:len(groups[g])], groups[g]) {
				t.Fatalf("batch %d does not continue with group %d", i, g)
			}
			b = b[len(groups[g]):]
			g++
		}
	}
	if g != len(groups) {
		t.Fatalf("%d of %d groups in the batches", g, len(groups))
	}
}

// TestAdminResultCuts: groups totalling 20 MB, of uneven sizes up to 3 MB, are cut
// between groups into entries within metadata.MaxEntryBytes; a group that alone exceeds an
// entry (no request of today's limits makes one: a topic's at most 10,000 partitions and
// its 32 KiB config values stay far below) refuses the whole request with
// RECORD_LIST_TOO_LARGE, nothing proposed.
func TestAdminResultCuts(t *testing.T) {
	group := func(name string, values int) []wire.MetadataRecord {
		out := []wire.MetadataRecord{&wire.TopicRecord{Name: name, TopicID: metadata.TopicID{1}}}
		for i := range values {
			out = append(out, &wire.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: name,
				Name: fmt.Sprintf("c%d", i), Value: new(strings.Repeat("x", 32_000))})
		}
		return out
	}
	var groups [][]wire.MetadataRecord
	for i := range 40 {
		groups = append(groups, group(fmt.Sprint("t", i), 1+i*7%90))
	}
	req := createTopics(false, newTopic("t", 1))
	r := adminResult(req, groups, nil, metadata.MaxEntryBytes)
	if r.Immediate || len(r.Batches()) < 3 {
		t.Fatalf("immediate %v, %d batches", r.Immediate, len(r.Batches()))
	}
	checkBatches(t, r.Batches(), groups, metadata.MaxEntryBytes)

	huge := group("huge", metadata.MaxEntryBytes/32_000+1)
	r = adminResult(req, [][]wire.MetadataRecord{groups[0], huge}, nil, metadata.MaxEntryBytes)
	if !r.Immediate || len(r.Records) != 0 || !slices.Equal(codes(r.Reply(0)), codeList(kerr.RecordListTooLarge)) {
		t.Fatalf("immediate %v, %d records", r.Immediate, len(r.Records))
	}
}

// TestDriverSplitsLargeRequests: a CreateTopics whose records exceed one batch is
// cut into several, whole topics each, every topic created once all are applied; with
// the batch bound lowered to 32 KiB (at the real 8 MiB, building that many valid records
// through the admin checks takes seconds).
func TestDriverSplitsLargeRequests(t *testing.T) {
	const maxBytes = 32 << 10
	var topics []kmsg.CreateTopicsRequestTopic
	for i := range 300 {
		topics = append(topics, newTopic(fmt.Sprintf("big-%d", i), 3, [2]string{"retention.ms", strconv.Itoa(i)}))
	}
	req := createTopics(false, topics...)

	n := loneNode(t)
	d := startDriver(t, n, func(o *Options) { adminOptions(o); o.maxBatchBytes = maxBytes })
	_, before := n.Image()
	resp := askAdmin(t, d, req).(*kmsg.CreateTopicsResponse)
	for _, tp := range resp.Topics {
		if tp.ErrorCode != 0 {
			t.Fatalf("%s: %v %s", tp.Topic, kerr.ErrorForCode(tp.ErrorCode), *tp.ErrorMessage)
		}
	}
	im, after := n.Image()
	if after-before < 2 || len(im.TopicsByID) != len(topics) {
		t.Fatalf("%d entries, %d topics", after-before, len(im.TopicsByID))
	}
	for _, tp := range resp.Topics {
		if got := im.Topic(tp.Topic); got == nil || got.ID != tp.TopicID || len(got.Partitions) != 3 {
			t.Fatalf("%s: %+v", tp.Topic, got)
		}
	}

	// The same cut on the pure core: whole topics, each batch within the bound.
	cfg := Config{NodeID: 0, PlacementStart: func(int) int { return 0 }, maxBatchBytes: maxBytes}
	r, err := New(cfg).Handle(newLog(t).latest, t0, req)
	if err != nil {
		t.Fatal(err)
	}
	var groups [][]wire.MetadataRecord
	for _, rec := range r.Records {
		if _, ok := rec.(*wire.TopicRecord); ok {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], rec)
	}
	if len(groups) != len(topics) || len(r.Batches()) != int(after-before) {
		t.Fatalf("%d topics in %d batches; the driver proposed %d", len(groups), len(r.Batches()), after-before)
	}
	checkBatches(t, r.Batches(), groups, maxBytes)
}

// TestAdminNotController: a request on a node that does not serve is answered
// NOT_CONTROLLER in its own shape, every topic or resource named.
func TestAdminNotController(t *testing.T) {
	reqs := []kmsg.Request{createTopics(false, newTopic("a", 1), newTopic("b", 1)), deleteTopics("a", "b"),
		createPartitions(false, "a", 2), alterConfigs(kmsg.ConfigResourceTypeTopic, "a", "retention.ms", "1"),
		incrementalSet(kmsg.ConfigResourceTypeTopic, "a", "retention.ms", "1"), updateFeature(false, "share.version", 1)}
	wants := []int{2, 2, 1, 1, 1, 1}
	for i, req := range reqs {
		resp := ErrorResponse(req, kerr.NotController, "not here")
		got := codes(resp)
		if len(got) != wants[i] || slices.ContainsFunc(got, func(c int16) bool { return c != kerr.NotController.Code }) {
			t.Fatalf("%T: codes %v", req, got)
		}
		if resp.GetVersion() != req.GetVersion() {
			t.Fatalf("%T: version %d, want %d", req, resp.GetVersion(), req.GetVersion())
		}
	}
	if r := ErrorResponse(&AutoCreateTopicRequest{Name: "x"}, kerr.NotController, "").(*kmsg.CreateTopicsResponse); r.Topics[0].Topic != "x" || r.Topics[0].ErrorCode != kerr.NotController.Code {
		t.Fatalf("auto-create: %+v", r.Topics)
	}
}
