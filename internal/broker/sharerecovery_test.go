package broker_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/txnshare"
)

// After a restart the TX_PENDING gauge counts the staged records of the durable state
// straight away, before any share fetch loads the share partition (it used to count only
// partitions loaded since start, so it read 0 until a consumer came back).
func TestTxPendingMetricRightAfterRestart(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 10)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 9, 1)
	p := cfInitProducer(e, "cf-restart-metric", 60000)
	stageOK(t, p.stage(m, 0, 3, txnshare.AckAccept))
	stageOK(t, p.stage(m, 6, 7, txnshare.AckReject))

	e.tb.Restart()
	if loaded := e.tb.Broker.DescribeShareGroupState(cfGroup); len(loaded) != 0 {
		t.Fatalf("share partitions loaded right after the restart: %+v", loaded)
	}
	if got := cfMetrics(t, e.tb)[cfPending]; got != 6 {
		t.Fatalf("%s right after the restart: %v, want the 6 staged records", cfPending, got)
	}
	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit after the restart: %v", kerr.ErrorForCode(code))
	}
	cfEventually(t, cfPending+" = 0 after the commit", func() (bool, string) {
		got := cfMetrics(t, e.tb)[cfPending]
		return got == 0, fmt.Sprint(got)
	})
}
