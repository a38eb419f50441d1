package crashtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The diagnosis of a lost input says where it went: its output aborted, the batch that
// held it with its delivery count and durability, the transaction the worker prepared
// for it, and what the next run's Recover did with it.
func TestLCDiagnosisSaysWhatBecameOfAnInput(t *testing.T) {
	state := filepath.Join(t.TempDir(), "r0.ckpt")
	if err := os.WriteFile(state, []byte(`{"n":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	w := &lcWorker{name: "r0", state: state, lines: []lcLine{
		{1, "start txn=lc-r0 last=0"},
		{1, "batch ckpt=1 ids=1/1,2/1"},
		{1, "prepared ckpt=1 txn=true pid=7 epoch=3"},
		{1, "committed ckpt=1"},
		{1, "batch ckpt=2 ids=3/1,4/2"},
		{1, "step after-prepare ckpt=2 crash"},
		{2, "start txn=lc-r0 last=1"},
		{2, "recovered last=1 found=true committed=false pid=7 epoch=4"},
		{2, "batch ckpt=2 ids=5/1"},
	}}
	out := []*kgo.Record{
		{Offset: 0, Value: []byte("1"), ProducerID: 7, ProducerEpoch: 3},
		{Offset: 2, Value: []byte("4"), ProducerID: 7, ProducerEpoch: 4},
	}
	got := lcDiagnosis(t, []*lcWorker{w}, []int{1, 4, 9}, out, map[int64]string{0: "1"}, map[int64]bool{2: true})
	for _, want := range []string{
		"input 1 (offset 1):\n  outputs: out@0 pid=7 epoch=3 COMMITTED\n  r0 run 1: batch ckpt=1 of 2 inputs, delivery 1, the durable checkpoint; then:\n    [run 1] prepared ckpt=1 txn=true pid=7 epoch=3\n    [run 1] committed ckpt=1\n",
		"input 4 (offset 4):\n  outputs: out@2 pid=7 epoch=4 aborted\n  r0 run 1: batch ckpt=2 of 2 inputs, delivery 2, not durable; then:\n    [run 1] step after-prepare ckpt=2 crash\n    [run 2] start txn=lc-r0 last=1\n    [run 2] recovered last=1 found=true committed=false pid=7 epoch=4\n",
		"input 9 (offset 9):\n  outputs: none in the output log\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the diagnosis lacks\n%s\nit is:\n%s", want, got)
		}
	}
}
