package broker_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// The first InitProducerId after a restart must be answered from memory. It used to reserve
// a block of producer ids first (two fsyncs); a broker SIGKILLed during that wait had read
// the request and never answered it, and kgo fails an EOF on a connection's first response
// without retrying ("broker closed the connection immediately after a request was issued",
// crashtest TestCrashCycles). A directory where the reservation writes its temporary file
// makes any reservation fail, so a KAFKA_STORAGE_ERROR here means a request waited for the
// disk.
func TestInitProducerIDAfterRestartNeedsNoDisk(t *testing.T) {
	tb := testbroker.Start(t)
	ctx := ctxT(t)
	first, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, newClient(t, tb.Addr))
	if err != nil || first.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, first)
	}
	tb.Restart()
	if err := os.Mkdir(filepath.Join(tb.DataDir, "producer-ids.json.tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, tb.Addr)
	seen := map[int64]bool{first.ProducerID: true}
	for i := range 10 {
		resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("InitProducerId %d after the restart: %v (it waited for a producer id reservation)", i, kerr.ErrorForCode(resp.ErrorCode))
		}
		if seen[resp.ProducerID] || resp.ProducerID <= first.ProducerID {
			t.Fatalf("producer id %d after the restart: reissued (before the restart: %d)", resp.ProducerID, first.ProducerID)
		}
		seen[resp.ProducerID] = true
	}
}
