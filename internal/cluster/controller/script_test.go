package controller

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestScripts runs testdata/*.txt, raft's datadriven style: each command drives the
// Core against a metadata log and prints the records it proposed (applied at once) and
// the answer. go test -run TestScripts -rewrite writes the expected output.
//
//	topic name=a           one partition per input line, its replicas ("1" or "1 2")
//	register broker=1 [inc=0] [cluster=id] [dir=0] [dirof=broker] [port=0] [mv=27]   mv: highest metadata.version supported
//	heartbeat broker=1 [epoch=N] [offset=N] [fence] [shutdown]   epoch: the registered one, offset: the applied index
//	allocate broker=1 [epoch=N]
//	unregister broker=1
//	advance ms=N           moves the clock
//	tick [ms=N]            moves the clock, then runs the timers
//	term                   a new controller term: a new Core, no sessions
//	image                  the brokers, the partitions' leaders, the configs
//
// The admin requests (topic ids count up from 1 and are printed by name; placement starts
// at the stripe's first broker unless start= says otherwise):
//
//	create [validate] [client=c] [start=N]   one topic per line: name [p=N] [rf=N] [config=value ...]
//	delete                 one topic name per line
//	grow name=a count=N [validate]           CreatePartitions
//	alter topic=a|group=g [validate]         AlterConfigs, one config=value per line
//	incremental topic=a|group=g [validate]   IncrementalAlterConfigs: set k=v, delete k, per line
//	feature name=f level=N [validate]        UpdateFeatures
//	autocreate name=a      AutoCreateTopicRequest
//	internal name=a partitions=N             CreateInternalTopicRequest
//	batchbytes n=N         bounds the batches an admin request is cut into (0: 8 MiB)
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := &script{l: newLog(t), now: t0, names: map[metadata.TopicID]string{}}
		s.core = New(s.config())
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string { return s.run(t, d) })
	})
}

type script struct {
	l        *log
	core     *Core
	now      time.Time
	start    int // the placement's start for the next request
	nextID   byte
	names    map[metadata.TopicID]string // topic ids printed by name
	maxBytes int
}

// config is the scripts' Core config: their placement start and topic ids.
func (s *script) config() Config {
	return Config{PlacementStart: func(int) int { return s.start },
		NewTopicID:    func() metadata.TopicID { s.nextID++; return metadata.TopicID{0: 0xff, 15: s.nextID} },
		maxBatchBytes: s.maxBytes}
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	if !d.HasArg(key) {
		return def
	}
	var s string
	d.ScanArgs(t, key, &s)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: %s=%q: %v", d.Pos, key, s, err)
	}
	return v
}

func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	b := int32(intArg(t, d, "broker", 0))
	epoch := func() int64 {
		if br := s.l.latest.Brokers[b]; br != nil {
			return intArg(t, d, "epoch", br.Epoch)
		}
		return intArg(t, d, "epoch", -1)
	}
	var req any
	switch d.Cmd {
	case "topic":
		var name string
		d.ScanArgs(t, "name", &name)
		var reps [][]int32
		for line := range strings.Lines(strings.TrimSpace(d.Input)) {
			var rs []int32
			for f := range strings.FieldsSeq(line) {
				n, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("%s: replica %q", d.Pos, f)
				}
				rs = append(rs, int32(n))
			}
			reps = append(reps, rs)
		}
		s.l.flush()
		recs := topic(name, reps...)
		s.names[recs[0].(*wire.TopicRecord).TopicID] = name
		s.l.commit(recs)
		s.l.latest = s.l.committed
		return s.image()
	case "register":
		r := registration(b, byte(intArg(t, d, "inc", 0)))
		if d.HasArg("cluster") {
			d.ScanArgs(t, "cluster", &r.ClusterID)
		}
		r.LogDirs[0] = dir(int32(intArg(t, d, "dirof", int64(b))), byte(intArg(t, d, "dir", 0)))
		r.Listeners[0].Port += uint16(intArg(t, d, "port", 0))
		r.Features[0].MaxSupportedVersion = int16(intArg(t, d, "mv", int64(r.Features[0].MaxSupportedVersion)))
		req = r
	case "heartbeat":
		r := heartbeat(b, epoch(), uint64(intArg(t, d, "offset", int64(s.l.index))))
		r.WantFence, r.WantShutdown = d.HasArg("fence"), d.HasArg("shutdown")
		req = r
	case "allocate":
		r := kmsg.NewPtrAllocateProducerIDsRequest()
		r.BrokerID, r.BrokerEpoch = b, epoch()
		req = r
	case "unregister":
		r := kmsg.NewPtrUnregisterBrokerRequest()
		r.BrokerID = b
		req = r
	case "advance":
		s.now = s.now.Add(time.Duration(intArg(t, d, "ms", 0)) * time.Millisecond)
		return fmt.Sprintf("clock +%.3fs\n", s.now.Sub(t0).Seconds())
	case "tick":
		s.now = s.now.Add(time.Duration(intArg(t, d, "ms", 0)) * time.Millisecond)
		out := fmt.Sprintf("clock +%.3fs\n", s.now.Sub(t0).Seconds())
		r := s.l.tick(s.core, s.now)
		if len(r.Records) == 0 {
			return out + "nothing due\n"
		}
		out += s.formatRecords(r.Records)
		s.l.run(r, false, nil)
		return out + fmt.Sprintf("applied at %d\n", s.l.index)
	case "term":
		s.l.flush()
		s.core = New(s.config())
		return "new term\n"
	case "image":
		return s.image()
	case "batchbytes":
		s.maxBytes = int(intArg(t, d, "n", 0))
		s.core.cfg.maxBatchBytes = s.config().withDefaults().maxBatchBytes
		return fmt.Sprintf("batches of at most %d bytes\n", s.core.cfg.maxBatchBytes)
	default:
		var ok bool
		if req, ok = s.adminRequest(t, d); !ok {
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
		}
	}
	clientID := "script"
	if d.HasArg("client") {
		d.ScanArgs(t, "client", &clientID)
	}
	s.start = int(intArg(t, d, "start", 0))
	r, err := s.core.HandleFrom(s.l.latest, s.now, clientID, req)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	for i, b := range r.Batches() {
		if len(r.Splits) > 0 {
			out += fmt.Sprintf("batch %d:\n", i+1)
		}
		out += s.formatRecords(b)
	}
	var resp kmsg.Response
	first := s.l.index + 1
	s.l.run(r, false, func(x kmsg.Response) { resp = x })
	switch {
	case len(r.Splits) > 0:
		out += fmt.Sprintf("applied at %d-%d\n", first, s.l.index)
	case len(r.Records) > 0:
		out += fmt.Sprintf("applied at %d\n", s.l.index)
	}
	return out + s.formatResponse(resp)
}

func (s *script) image() string {
	var sb strings.Builder
	for _, id := range sortedBrokerIDs(s.l.committed) {
		br := s.l.committed.Brokers[id]
		fmt.Fprintf(&sb, "broker %d epoch=%d fenced=%v\n", id, br.Epoch, br.Fenced)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range s.l.committed.TopicsByName {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		for i, p := range s.l.committed.Topic(n).Partitions {
			fmt.Fprintf(&sb, "%s-%d replicas=%v leader=%d leaderEpoch=%d\n", n, i, p.Replicas, p.Leader, p.LeaderEpoch)
		}
	}
	for _, res := range slices.SortedFunc(maps.Keys(s.l.committed.Configs), func(a, b metadata.ConfigResource) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name))
	}) {
		cs := s.l.committed.Configs[res]
		for _, k := range slices.Sorted(maps.Keys(cs)) {
			fmt.Fprintf(&sb, "config %s %s=%s\n", resourceName(res.Type, res.Name), k, cs[k])
		}
	}
	return sb.String()
}

func (s *script) formatRecords(recs []wire.MetadataRecord) string {
	var sb strings.Builder
	for _, r := range recs {
		switch r := r.(type) {
		case *wire.TopicRecord:
			s.names[r.TopicID] = r.Name
			fmt.Fprintf(&sb, "Topic %s id=%d\n", r.Name, r.TopicID[15])
		case *wire.PartitionRecord:
			fmt.Fprintf(&sb, "Partition %s-%d replicas=%v leader=%d\n", s.names[r.TopicID], r.PartitionID, r.Replicas, r.Leader)
		case *wire.RemoveTopicRecord:
			fmt.Fprintf(&sb, "RemoveTopic %s\n", s.names[r.TopicID])
		case *wire.ConfigRecord:
			v := "null"
			if r.Value != nil {
				v = *r.Value
			}
			fmt.Fprintf(&sb, "Config %s %s=%s\n", resourceName(r.ResourceType, r.ResourceName), r.Name, v)
		case *wire.FeatureLevelRecord:
			fmt.Fprintf(&sb, "FeatureLevel %s=%d\n", r.Name, r.FeatureLevel)
		case *wire.RegisterBrokerRecord:
			fmt.Fprintf(&sb, "RegisterBroker broker=%d epoch=%d fenced=%v\n", r.BrokerID, r.BrokerEpoch, r.Fenced)
		case *wire.BrokerRegistrationChangeRecord:
			fmt.Fprintf(&sb, "BrokerRegistrationChange broker=%d epoch=%d fenced=%d\n", r.BrokerID, r.BrokerEpoch, r.Fenced)
		case *wire.UnregisterBrokerRecord:
			fmt.Fprintf(&sb, "UnregisterBroker broker=%d epoch=%d\n", r.BrokerID, r.BrokerEpoch)
		case *wire.PartitionChangeRecord:
			fmt.Fprintf(&sb, "PartitionChange %s-%d leader=%d\n", s.names[r.TopicID], r.PartitionID, r.Leader)
		case *wire.ProducerIdsRecord:
			fmt.Fprintf(&sb, "ProducerIds broker=%d epoch=%d next=%d\n", r.BrokerID, r.BrokerEpoch, r.NextProducerID)
		default:
			fmt.Fprintf(&sb, "%T\n", r)
		}
	}
	return sb.String()
}

func (s *script) formatResponse(resp kmsg.Response) string {
	if out, ok := formatAdminResponse(resp); ok {
		return out
	}
	code := ""
	if c := errCode(resp); c != 0 {
		code = " " + kerr.ErrorForCode(c).(*kerr.Error).Message
	}
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return fmt.Sprintf("BrokerRegistration:%s epoch=%d\n", code, r.BrokerEpoch)
	case *kmsg.BrokerHeartbeatResponse:
		if code != "" {
			return "BrokerHeartbeat:" + code + "\n"
		}
		return fmt.Sprintf("BrokerHeartbeat: caughtUp=%v fenced=%v shutdown=%v\n", r.IsCaughtUp, r.IsFenced, r.ShouldShutdown)
	case *kmsg.AllocateProducerIDsResponse:
		if code != "" {
			return "AllocateProducerIds:" + code + "\n"
		}
		return fmt.Sprintf("AllocateProducerIds: [%d, %d)\n", r.ProducerIDStart, r.ProducerIDStart+int64(r.ProducerIDLen))
	case *kmsg.UnregisterBrokerResponse:
		return "UnregisterBroker:" + code + "\n"
	}
	return fmt.Sprintf("%T\n", resp)
}
