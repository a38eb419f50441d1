package cluster

import (
	"strings"
	"testing"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestChecksFail feeds each check the history it exists to refuse and expects its
// violation: the simulation's seeds passing means something only if these fail.
func TestChecksFail(t *testing.T) {
	boot, _, err := metadata.ApplyEntry(metadata.Empty(), 1, bootstrapRecords(2))
	if err != nil {
		t.Fatal(err)
	}
	register := func(im *metadata.Image, index uint64, id int32, fenced bool) *metadata.Image {
		rec := &wire.RegisterBrokerRecord{BrokerID: id, IncarnationID: [16]byte{0x1c, byte(index)}, BrokerEpoch: -1, Fenced: fenced, LogDirs: [][16]byte{{0xd1, byte(id)}}}
		rec.SetVersion(rec.MaxVersion())
		next, _, err := metadata.ApplyEntry(im, index, []wire.MetadataRecord{rec})
		if err != nil {
			panic(err) // from a subtest: the histories below are the test's own
		}
		return next
	}
	lead := func(im *metadata.Image, id int32) *metadata.Image {
		r := wire.NewPartitionChangeRecord()
		r.PartitionID, r.TopicID, r.Leader = 0, im.TopicsByName["t1"], id
		r.SetVersion(r.MaxVersion())
		next, _, err := metadata.ApplyEntry(im, 0, []wire.MetadataRecord{&r})
		if err != nil {
			panic(err)
		}
		return next
	}
	block := func(b int, start int64) *rpc {
		p := kmsg.NewPtrAllocateProducerIDsResponse()
		p.ProducerIDStart, p.ProducerIDLen = start, 1000
		return &rpc{broker: b, req: kmsg.NewPtrAllocateProducerIDsRequest(), resp: p}
	}
	registered := func(b int, inc byte, epoch int64) *rpc {
		p := kmsg.NewPtrBrokerRegistrationResponse()
		p.BrokerEpoch = epoch
		return &rpc{broker: b, inc: [16]byte{0x1c, inc}, req: kmsg.NewPtrBrokerRegistrationRequest(), resp: p}
	}
	cases := []struct {
		name string
		do   func(w *world)
		want string
	}{
		{"two controllers in a term", func(w *world) {
			w.chk.serving(w, w.nodes[0], 7)
			w.chk.serving(w, w.nodes[1], 7)
		}, "two controllers in term 7"},
		{"one index answered for two entries", func(w *world) {
			w.chk.committed(w, w.nodes[0], 40, []byte("a"))
			w.chk.committed(w, w.nodes[1], 40, []byte("b"))
		}, "other data than an earlier answer"},
		{"an answered entry missing from a log", func(w *world) {
			w.chk.committed(w, w.nodes[0], 3, []byte("not what the log holds"))
			w.chk.observe(w, w.nodes[1], &quorum.Applied{Index: 3, State: boot})
		}, "holds other data at index 3"},
		{"images differ at one index", func(w *world) {
			w.chk.observe(w, w.nodes[0], &quorum.Applied{Index: 90, State: boot})
			w.chk.observe(w, w.nodes[1], &quorum.Applied{Index: 90, State: register(boot, 90, 1, true)})
		}, "image at index 90 differs"},
		{"a fenced broker leads", func(w *world) {
			w.chk.observe(w, w.nodes[0], &quorum.Applied{Index: 91, State: lead(register(boot, 91, 1, true), 1)})
		}, "fenced or not registered"},
		{"an epoch goes back", func(w *world) {
			w.chk.observe(w, w.nodes[0], &quorum.Applied{Index: 95, State: register(boot, 95, 1, false)})
			w.chk.observe(w, w.nodes[0], &quorum.Applied{Index: 96, State: register(boot, 60, 1, false)})
		}, "epoch went back"},
		{"producer-id blocks overlap", func(w *world) {
			w.chk.answered(w, block(0, 0))
			w.chk.answered(w, block(1, 500))
		}, "overlaps the block"},
		{"a new incarnation's epoch does not grow", func(w *world) {
			w.chk.answered(w, registered(0, 1, 20))
			w.chk.answered(w, registered(0, 2, 20))
		}, "not above 20"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(1, 3, 0, t.TempDir)
			tc.do(w)
			if len(w.errs) == 0 || !strings.Contains(w.errs[len(w.errs)-1], tc.want) {
				t.Fatalf("violations %q, want one containing %q", w.errs, tc.want)
			}
		})
	}
}
