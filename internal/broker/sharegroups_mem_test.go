package broker_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// An idle share group with one member costs a few KB (issue 17 finding 8: 10,000
// one-member share groups took 1.15 GB, ~100 KB each); a member on a connection of its
// own adds the connection, which holds no write buffer while idle.
func TestIdleShareGroupMemory(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(fastShareConfig))
	cl := newClient(t, tb.Addr)
	ct, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 1, 1, nil, "q")
	if err != nil {
		t.Fatal(err)
	}
	topicID := [16]byte(ct.ID)
	shared := dialRawKafka(t, tb.Addr) // a connection's own buffers are the server's, not the group's
	join := func(rc *rawKafkaConn, i int) {
		group, member := fmt.Sprintf("group-%05d", i), fmt.Sprintf("member-%015d", i)
		for epoch, assigned := int32(0), false; !assigned; {
			resp := rc.heartbeat(t, group, member, epoch, "q")
			if resp.ErrorCode != 0 {
				t.Fatalf("heartbeat: %v", resp.ErrorCode)
			}
			epoch = resp.MemberEpoch
			assigned = resp.Assignment != nil && len(resp.Assignment.TopicPartitions) > 0
		}
		sf := kmsg.NewPtrShareFetchRequest()
		sf.GroupID, sf.MemberID = &group, &member
		sf.MaxBytes, sf.MaxRecords, sf.BatchSize = 1<<20, 100, 100
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = topicID
		rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
		sf.Topics = append(sf.Topics, rt)
		if resp := rc.do(t, sf).(*kmsg.ShareFetchResponse); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("share fetch: %+v", resp)
		}
	}
	join(shared, -1) // the share stack's fixed cost
	// Each group's member has a share session: 800 + 800 stay under
	// group.share.max.share.sessions (2000), 800 connections under max.connections.per.ip.
	const groups = 800
	measure := func(what string, limitBytes int64, connect func() *rawKafkaConn, from int) {
		before := heapInUse()
		for i := range groups {
			join(connect(), from+i)
		}
		per := (int64(heapInUse()) - int64(before)) / groups
		if path := os.Getenv("EXACTQ_HEAP_PROFILE"); path != "" { // where the bytes are: go tool pprof
			f, err := os.Create(path + "." + what)
			if err != nil {
				t.Fatal(err)
			}
			pprof.WriteHeapProfile(f)
			f.Close()
		}
		t.Logf("%s: %d bytes per idle one-member share group", what, per)
		if per > limitBytes {
			t.Fatalf("%s: an idle one-member share group costs %d bytes, want at most %d", what, per, limitBytes)
		}
	}
	measure("shared-connection", 8<<10, func() *rawKafkaConn { return shared }, 0)
	measure("own-connection", 48<<10, func() *rawKafkaConn { return dialRawKafka(t, tb.Addr) }, groups)
}

// rawKafkaConn is a minimal Kafka client on one TCP connection (no client library state, so
// the test process's heap shows what the broker holds).
type rawKafkaConn struct {
	c    net.Conn
	f    *kmsg.RequestFormatter
	corr int32
	buf  []byte
}

func dialRawKafka(t *testing.T, addr string) *rawKafkaConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawKafkaConn{c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))}
}

// do sends req (at its kmsg default max version) and decodes the response into resp.
func (r *rawKafkaConn) do(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	req.SetVersion(req.MaxVersion())
	r.corr++
	r.buf = r.f.AppendRequest(r.buf[:0], req, r.corr)
	if _, err := r.c.Write(r.buf); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, body); err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	body = body[4:] // correlation id
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:] // empty header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp
}

// heartbeat sends one ShareGroupHeartbeat subscribed to topic.
func (r *rawKafkaConn) heartbeat(t *testing.T, group, member string, epoch int32, topic string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = group, member, epoch, []string{topic}
	return r.do(t, hb).(*kmsg.ShareGroupHeartbeatResponse)
}

// group.share.max.size is enforced as Kafka's throwIfShareGroupIsFull: a new member of a
// full share group gets GROUP_MAX_SIZE_REACHED; members already in it may rejoin.
func TestShareGroupMaxSize(t *testing.T) {
	cfg := maps.Clone(fastShareConfig)
	cfg["group.share.max.size"] = "2"
	tb := testbroker.Start(t, testbroker.WithConfig(cfg))
	if _, err := kadm.NewClient(newClient(t, tb.Addr)).CreateTopic(ctxT(t), 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	rc := dialRawKafka(t, tb.Addr)
	for _, m := range []string{"member-1", "member-2"} {
		if resp := rc.heartbeat(t, "sg", m, 0, "q"); resp.ErrorCode != 0 {
			t.Fatalf("%s: %v", m, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	resp := rc.heartbeat(t, "sg", "member-3", 0, "q")
	if resp.ErrorCode != kerr.GroupMaxSizeReached.Code || resp.ErrorMessage == nil ||
		*resp.ErrorMessage != "The share group has reached its maximum capacity of 2 members." {
		t.Fatalf("third member: %v %v, want GROUP_MAX_SIZE_REACHED", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	if resp := rc.heartbeat(t, "sg", "member-2", 0, "q"); resp.ErrorCode != 0 {
		t.Fatalf("a member of the full group rejoining: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
