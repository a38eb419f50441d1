package controller

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
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
//	image                  the brokers and the partitions' leaders
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := &script{l: newLog(t), core: New(Config{}), now: t0}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string { return s.run(t, d) })
	})
}

type script struct {
	l    *log
	core *Core
	now  time.Time
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
	var req kmsg.Request
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
		s.l.commit(topic(name, reps...))
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
		out += formatRecords(r.Records)
		s.l.run(r, false, nil)
		return out + fmt.Sprintf("applied at %d\n", s.l.index)
	case "term":
		s.l.flush()
		s.core = New(Config{})
		return "new term\n"
	case "image":
		return s.image()
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	r, err := s.core.Handle(s.l.latest, s.now, req)
	if err != nil {
		t.Fatal(err)
	}
	out := formatRecords(r.Records)
	var resp kmsg.Response
	s.l.run(r, false, func(x kmsg.Response) { resp = x })
	if len(r.Records) > 0 {
		out += fmt.Sprintf("applied at %d\n", s.l.index)
	}
	return out + formatResponse(resp)
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
	return sb.String()
}

func formatRecords(recs []wire.MetadataRecord) string {
	var sb strings.Builder
	for _, r := range recs {
		switch r := r.(type) {
		case *wire.RegisterBrokerRecord:
			fmt.Fprintf(&sb, "RegisterBroker broker=%d epoch=%d fenced=%v\n", r.BrokerID, r.BrokerEpoch, r.Fenced)
		case *wire.BrokerRegistrationChangeRecord:
			fmt.Fprintf(&sb, "BrokerRegistrationChange broker=%d epoch=%d fenced=%d\n", r.BrokerID, r.BrokerEpoch, r.Fenced)
		case *wire.UnregisterBrokerRecord:
			fmt.Fprintf(&sb, "UnregisterBroker broker=%d epoch=%d\n", r.BrokerID, r.BrokerEpoch)
		case *wire.PartitionChangeRecord:
			fmt.Fprintf(&sb, "PartitionChange %s-%d leader=%d\n", strings.TrimRight(string(r.TopicID[:15]), "\x00"), r.PartitionID, r.Leader)
		case *wire.ProducerIdsRecord:
			fmt.Fprintf(&sb, "ProducerIds broker=%d epoch=%d next=%d\n", r.BrokerID, r.BrokerEpoch, r.NextProducerID)
		default:
			fmt.Fprintf(&sb, "%T\n", r)
		}
	}
	return sb.String()
}

func formatResponse(resp kmsg.Response) string {
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
