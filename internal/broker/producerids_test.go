package broker_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/wire"
)

// The first InitProducerId after a restart must be answered from memory. It used to reserve
// a block of producer ids first (a disk write); a broker SIGKILLed during that wait had
// read the request and never answered it, and kgo fails an EOF on a connection's first
// response without retrying ("broker closed the connection immediately after a request was
// issued", crashtest TestCrashCycles). With every metadata proposal failing after the
// restart's own block, a KAFKA_STORAGE_ERROR here means a request waited for the log.
func TestInitProducerIDAfterRestartNeedsNoDisk(t *testing.T) {
	tb := testbroker.Start(t)
	ctx := ctxT(t)
	first, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, newClient(t, tb.Addr))
	if err != nil || first.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, first)
	}
	tb.Restart()
	broker.FailMetadataProposalsForTest(tb.Broker, func([]wire.MetadataRecord) error {
		return errors.New("injected: the metadata log refuses every write")
	})
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
