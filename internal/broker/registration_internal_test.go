package broker

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/exactq/exactq/internal/cluster/node"
)

// A broker registers with its own controller before Open returns (unfenced, with its
// listener and directory id), gets a higher epoch at every start, takes producer-id
// blocks from the controller, and a Close leaves it fenced by a controlled shutdown.
func TestRegistersWithItsController(t *testing.T) {
	dir := t.TempDir()
	open := func() *Broker {
		b, err := Open(Config{DataDir: dir, NodeID: 3, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9192,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var lastEpoch int64
	for round := range 2 {
		b := open()
		im, _ := b.image()
		br := im.Brokers[3]
		if br == nil || br.Fenced || br.Epoch != b.reg.Epoch() || br.Epoch <= lastEpoch {
			t.Fatalf("round %d: registration %+v (broker's epoch %d, last %d)", round, br, b.reg.Epoch(), lastEpoch)
		}
		lastEpoch = br.Epoch
		if len(br.Endpoints) != 1 || br.Endpoints[0].Host != "127.0.0.1" || br.Endpoints[0].Port != 9192 {
			t.Fatalf("endpoints %+v", br.Endpoints)
		}
		if id, _ := b.dir.directoryID(); len(br.LogDirs) != 1 || br.LogDirs[0] != id {
			t.Fatalf("log dirs %x, want the directory's id %x", br.LogDirs, id)
		}
		pid, err := b.pids.allocate()
		if err != nil {
			t.Fatal(err)
		}
		if im, _ := b.image(); pid >= im.ProducerIDs.Next || im.ProducerIDs.BrokerEpoch != br.Epoch {
			t.Fatalf("producer id %d from block %+v, broker epoch %d", pid, im.ProducerIDs, br.Epoch)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		n, err := node.Open(context.Background(), node.Config{NodeID: 3, DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		im, _ = n.Image()
		if !im.Brokers[3].Fenced {
			t.Fatalf("round %d: not fenced after a controlled shutdown: %+v", round, im.Brokers[3])
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
