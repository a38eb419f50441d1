package wire

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGeneratedIsFresh fails when generated.go (or the decode-cost walkers of these
// messages, internal/decodecost/wire_gen.go) is not what the generator writes from
// definitions/ now: run `go generate ./wire`.
func TestGeneratedIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	tmp := t.TempDir()
	for _, c := range []struct {
		have string
		args []string
	}{
		{"generated.go", []string{"wire", "-defs", "definitions", "-settable-key", "TxnShareAcknowledge"}},
		{"../internal/decodecost/wire_gen.go", []string{"decodecost", "-wire", "-defs", "definitions"}},
	} {
		out := filepath.Join(tmp, filepath.Base(c.have))
		cmd := exec.Command("go", append([]string{"run", "../internal/franzgen"}, append(c.args, "-o", out)...)...)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd.Args, err, msg)
		}
		want, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		have, err := os.ReadFile(c.have)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, want) {
			t.Errorf("%s is stale: run go generate ./wire", c.have)
		}
	}
}

// message is a request or response of this package: the methods the two share.
type message interface {
	Key() int16
	MaxVersion() int16
	GetVersion() int16
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
}

func initProducerIDRequest(v int16) *InitProducerIDRequest {
	r := NewPtrInitProducerIDRequest()
	r.Version = v
	r.TransactionalID = kmsg.StringPtr("transactional-id")
	r.TransactionTimeoutMillis = 60000
	if v >= 3 {
		r.ProducerID, r.ProducerEpoch = 42, 7
	}
	if v >= 6 {
		r.Enable2Pc, r.KeepPreparedTxn = true, true
	}
	if v >= 2 {
		r.UnknownTags.Set(9, []byte("nine"))
	}
	return r
}

func initProducerIDResponse(v int16) *InitProducerIDResponse {
	r := NewPtrInitProducerIDResponse()
	r.Version = v
	r.ThrottleMillis, r.ErrorCode, r.ProducerID, r.ProducerEpoch = 3, 0, 42, 8
	if v >= 6 {
		r.OngoingTxnProducerID, r.OngoingTxnProducerEpoch = 41, 7
	}
	if v >= 2 {
		r.UnknownTags.Set(9, []byte("nine"))
	}
	return r
}

func txnShareAcknowledgeRequest() *TxnShareAcknowledgeRequest {
	r := NewPtrTxnShareAcknowledgeRequest()
	r.TransactionalID = kmsg.StringPtr("tx-1")
	r.GroupID, r.ProducerID, r.ProducerEpoch, r.MemberID, r.MemberEpoch = "sg", 7, 2, "m-1", 4
	r.Topics = []TxnShareAcknowledgeRequestTopic{{TopicID: [16]byte{1, 2}, Partitions: []TxnShareAcknowledgeRequestTopicPartition{
		{PartitionIndex: 0, AcknowledgementBatches: []TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 9, AcknowledgeTypes: []int8{AckAccept}}}},
		{PartitionIndex: 3, AcknowledgementBatches: []TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 5, LastOffset: 7, AcknowledgeTypes: []int8{AckAccept, AckGap, AckReject}}}},
	}}}
	return r
}

func txnShareAcknowledgeResponse() *TxnShareAcknowledgeResponse {
	r := NewPtrTxnShareAcknowledgeResponse()
	r.ThrottleMillis = 5
	r.Responses = []TxnShareAcknowledgeResponseResponse{{TopicID: [16]byte{9}, Partitions: []TxnShareAcknowledgeResponseResponsePartition{
		{PartitionIndex: 1, ErrorCode: 121, ErrorMessage: kmsg.StringPtr("not acquired")},
		{PartitionIndex: 2},
	}}}
	return r
}

func raftMessageRequest() *RaftMessageRequest {
	r := NewPtrRaftMessageRequest()
	r.ClusterID, r.SenderNodeID, r.DestinationRaftID = "cluster-1", 2, 1<<32|4
	r.SenderDirectoryID = [16]byte{0xd1, 0x2}
	r.Messages = [][]byte{{0x08, 0x03}, {}, []byte("raft")}
	r.UnknownTags.Set(3, []byte("three"))
	return r
}

func raftMessageResponse() *RaftMessageResponse {
	r := NewPtrRaftMessageResponse()
	r.ErrorCode = 94
	return r
}

// every is one populated message of each kind at every version it has.
func every() []message {
	var all []message
	for v := range (*InitProducerIDRequest)(nil).MaxVersion() + 1 {
		all = append(all, initProducerIDRequest(v), initProducerIDResponse(v))
	}
	return append(all, txnShareAcknowledgeRequest(), txnShareAcknowledgeResponse(), raftMessageRequest(), raftMessageResponse())
}

// fresh is an empty message of m's kind and version, as a server or client decodes into.
func fresh(m message) message {
	switch m := m.(type) {
	case *InitProducerIDRequest:
		return &InitProducerIDRequest{Version: m.Version}
	case *InitProducerIDResponse:
		return &InitProducerIDResponse{Version: m.Version}
	case *TxnShareAcknowledgeRequest:
		return &TxnShareAcknowledgeRequest{Version: m.Version, APIKey: m.APIKey}
	case *TxnShareAcknowledgeResponse:
		return &TxnShareAcknowledgeResponse{Version: m.Version, APIKey: m.APIKey}
	case *RaftMessageRequest:
		return &RaftMessageRequest{Version: m.Version}
	case *RaftMessageResponse:
		return &RaftMessageResponse{Version: m.Version}
	}
	panic("unknown message")
}

// TestRoundTrip: every message at every version decodes to what was encoded, through
// ReadFrom and UnsafeReadFrom.
func TestRoundTrip(t *testing.T) {
	for _, in := range every() {
		b := in.AppendTo(nil)
		for _, unsafe := range []bool{false, true} {
			out := fresh(in)
			var err error
			if unsafe {
				err = out.(kmsg.UnsafeReadFrom).UnsafeReadFrom(b)
			} else {
				err = out.ReadFrom(b)
			}
			if err != nil {
				t.Fatalf("%T v%d: %v", in, in.GetVersion(), err)
			}
			if !reflect.DeepEqual(in, out) {
				t.Fatalf("%T v%d round trip:\n%+v\n%+v", in, in.GetVersion(), in, out)
			}
		}
		// Every strict prefix is an error, not a panic nor a short message.
		for n := range len(b) {
			if err := fresh(in).ReadFrom(b[:n]); err == nil {
				t.Fatalf("%T v%d: %d of %d bytes decoded", in, in.GetVersion(), n, len(b))
			}
		}
	}
}

// TestInitProducerIDIsKmsgsBelowV6: v0-5 are byte for byte kmsg's, both ways, so the
// broker and kgo can mix the two types.
func TestInitProducerIDIsKmsgsBelowV6(t *testing.T) {
	for v := range int16(6) {
		req := initProducerIDRequest(v)
		kreq := kmsg.NewPtrInitProducerIDRequest()
		kreq.Version = v
		if err := kreq.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatalf("request v%d: kmsg: %v", v, err)
		}
		if got, want := req.AppendTo(nil), kreq.AppendTo(nil); !bytes.Equal(got, want) {
			t.Fatalf("request v%d: %x, kmsg %x", v, got, want)
		}
		resp := initProducerIDResponse(v)
		kresp := kmsg.NewPtrInitProducerIDResponse()
		kresp.Version = v
		if err := kresp.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("response v%d: kmsg: %v", v, err)
		}
		if got, want := resp.AppendTo(nil), kresp.AppendTo(nil); !bytes.Equal(got, want) {
			t.Fatalf("response v%d: %x, kmsg %x", v, got, want)
		}
		if resp.Version < 6 {
			back := fresh(resp).(*InitProducerIDResponse)
			if err := back.ReadFrom(kresp.AppendTo(nil)); err != nil || back.OngoingTxnProducerID != -1 || back.OngoingTxnProducerEpoch != -1 {
				t.Fatalf("response v%d from kmsg: %+v, %v; want the ongoing fields -1", v, back, err)
			}
		}
	}
}

// TestWireBytes pins the encodings the broker, kgoext and Java peers speak: InitProducerId
// v6 as Kafka 4.4 lays it out, TxnShareAcknowledge as the hand-written encoder this
// package replaced wrote it.
func TestWireBytes(t *testing.T) {
	req := NewPtrInitProducerIDRequest()
	req.Version = 6
	req.TransactionalID = kmsg.StringPtr("tx")
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = 42, 7
	req.Enable2Pc, req.KeepPreparedTxn = true, true
	resp := NewPtrInitProducerIDResponse()
	resp.Version = 6
	resp.ProducerID, resp.ProducerEpoch = 42, 8
	resp.OngoingTxnProducerID, resp.OngoingTxnProducerEpoch = 42, 7
	for _, c := range []struct {
		m    message
		want string
	}{
		// compact string "tx", timeout, producer id, epoch, Enable2Pc, KeepPreparedTxn, no tags
		{req, "0374780000ea60000000000000002a0007010100"},
		{resp, "000000000000000000000000002a0008000000000000002a000700"},
		{txnShareAcknowledgeRequest(), "0574782d3103736700000000000000070002046d2d3100000004020102000000000000000000000000000003000000000200000000000000000000000000000009020100000000000302000000000000000500000000000000070401000300000000"},
		// compact string "c", node 2, directory id, raft id 1<<32|4, compact array of two compact bytes (0102, empty), no tags
		{rawRaftMessage(), "0263000000020102030405060708090a0b0c0d0e0f100000000100000004030301020100"},
		{raftMessageResponse(), "005e00"},
		{txnShareAcknowledgeResponse(), "0000000500000209000000000000000000000000000000030000000100790d6e6f742061637175697265640000000002000000000000"},
	} {
		if got := hex.EncodeToString(c.m.AppendTo(nil)); got != c.want {
			t.Errorf("%T v%d: %s, want %s", c.m, c.m.GetVersion(), got, c.want)
		}
	}
}

func rawRaftMessage() *RaftMessageRequest {
	r := NewPtrRaftMessageRequest()
	r.ClusterID, r.SenderNodeID, r.DestinationRaftID = "c", 2, 1<<32|4
	r.SenderDirectoryID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	r.Messages = [][]byte{{1, 2}, {}}
	return r
}

// TestRaftMessageIsPrivate: RaftMessage is key 32000 (peer.RaftMessageKey) and carries
// none of kmsg's routing markers: it goes to the node it names, never to a coordinator.
func TestRaftMessageIsPrivate(t *testing.T) {
	var req kmsg.Request = NewPtrRaftMessageRequest()
	if req.Key() != 32000 || req.ResponseKind().Key() != 32000 {
		t.Fatalf("keys %d, %d; want 32000", req.Key(), req.ResponseKind().Key())
	}
	_, admin := req.(kmsg.AdminRequest)
	_, group := req.(kmsg.GroupCoordinatorRequest)
	_, txn := req.(kmsg.TxnCoordinatorRequest)
	if admin || group || txn {
		t.Fatalf("RaftMessageRequest has routing markers: admin %v group %v txn %v", admin, group, txn)
	}
}

// TestRouting: TxnShareAcknowledge goes to the share-partition leader, so it carries none
// of kmsg's routing markers (kgo would send a coordinator request to a coordinator);
// InitProducerId is a transaction-coordinator request, as kmsg's is.
func TestRouting(t *testing.T) {
	var req kmsg.Request = NewPtrTxnShareAcknowledgeRequest()
	if _, ok := req.(kmsg.TxnCoordinatorRequest); ok {
		t.Error("TxnShareAcknowledgeRequest is a kmsg.TxnCoordinatorRequest")
	}
	if _, ok := req.(kmsg.GroupCoordinatorRequest); ok {
		t.Error("TxnShareAcknowledgeRequest is a kmsg.GroupCoordinatorRequest")
	}
	if _, ok := req.(kmsg.ShareCoordinatorRequest); ok {
		t.Error("TxnShareAcknowledgeRequest is a kmsg.ShareCoordinatorRequest")
	}
	if _, ok := req.(kmsg.AdminRequest); ok {
		t.Error("TxnShareAcknowledgeRequest is a kmsg.AdminRequest")
	}
	if _, ok := kmsg.Request(NewPtrInitProducerIDRequest()).(kmsg.TxnCoordinatorRequest); !ok {
		t.Error("InitProducerIDRequest is not a kmsg.TxnCoordinatorRequest")
	}
}

// TestSettableKey: TxnShareAcknowledge's key is APIKey, TxnShareAcknowledgeDefaultKey
// when 0, and the response kind answers at the request's key (and back).
func TestSettableKey(t *testing.T) {
	if k := NewPtrTxnShareAcknowledgeRequest().Key(); k != 95 || TxnShareAcknowledgeDefaultKey != 95 {
		t.Fatalf("default key %d (const %d), want 95", k, TxnShareAcknowledgeDefaultKey)
	}
	req := &TxnShareAcknowledgeRequest{APIKey: 98}
	resp := req.ResponseKind()
	if req.Key() != 98 || resp.Key() != 98 || resp.RequestKind().Key() != 98 {
		t.Fatalf("keys %d, %d, %d; want 98", req.Key(), resp.Key(), resp.RequestKind().Key())
	}
	if _, ok := TxnShareAcknowledgeVersions(98).LookupMaxKeyVersion(98); !ok {
		t.Fatal("TxnShareAcknowledgeVersions(98) has no key 98")
	}
	if v, ok := TxnShareAcknowledgeVersions(0).LookupMaxKeyVersion(95); !ok || v != 0 {
		t.Fatalf("TxnShareAcknowledgeVersions(0): key 95 at %d, %v; want v0", v, ok)
	}
}

// fuzz checks one message kind: any body at any version decodes or fails cleanly (never
// panics), and what decoded re-encodes to a body that decodes to the same message.
func fuzz(f *testing.F, newAt func(version int16) message) {
	for _, m := range every() {
		if reflect.TypeOf(m) == reflect.TypeOf(newAt(0)) {
			f.Add(uint8(m.GetVersion()), m.AppendTo(nil))
		}
	}
	f.Fuzz(func(t *testing.T, version uint8, b []byte) {
		v := int16(version) % (newAt(0).MaxVersion() + 1)
		m := newAt(v)
		if err := m.ReadFrom(b); err != nil {
			return
		}
		again := newAt(v)
		if err := again.ReadFrom(m.AppendTo(nil)); err != nil {
			t.Fatalf("v%d: re-encoding a decoded message does not decode: %v", v, err)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("v%d: decode, encode, decode changed the message:\n%+v\n%+v", v, m, again)
		}
	})
}

func FuzzInitProducerIDRequest(f *testing.F) {
	fuzz(f, func(v int16) message { return &InitProducerIDRequest{Version: v} })
}

func FuzzInitProducerIDResponse(f *testing.F) {
	fuzz(f, func(v int16) message { return &InitProducerIDResponse{Version: v} })
}

func FuzzTxnShareAcknowledgeRequest(f *testing.F) {
	fuzz(f, func(v int16) message { return &TxnShareAcknowledgeRequest{Version: v} })
}

func FuzzTxnShareAcknowledgeResponse(f *testing.F) {
	fuzz(f, func(v int16) message { return &TxnShareAcknowledgeResponse{Version: v} })
}

func FuzzRaftMessageRequest(f *testing.F) {
	fuzz(f, func(v int16) message { return &RaftMessageRequest{Version: v} })
}

func FuzzRaftMessageResponse(f *testing.F) {
	fuzz(f, func(v int16) message { return &RaftMessageResponse{Version: v} })
}
