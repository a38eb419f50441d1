package driver

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/brokerproc"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEncodeBatchDecodesWithKgo: the raw producer's batch is one kgo decodes (CRC checked)
// into the records it was built from, at the offsets a broker would give them.
func TestEncodeBatchDecodesWithKgo(t *testing.T) {
	value := bytes.Repeat([]byte("v"), 300)
	ts := time.Now().UnixMilli()
	batch := encodeBatch(200, value, ts)
	binary.BigEndian.PutUint64(batch, 1000) // the base offset a broker assigns (outside the CRC)
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t", Offset: 1000},
		&kmsg.FetchResponseTopicPartition{RecordBatches: batch, HighWatermark: 1200}, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatal(fp.Err)
	}
	if len(fp.Records) != 200 {
		t.Fatalf("kgo decoded %d records, want 200", len(fp.Records))
	}
	for i, r := range fp.Records {
		if r.Offset != int64(1000+i) || !bytes.Equal(r.Value, value) || r.Key != nil || r.Timestamp.UnixMilli() != ts {
			t.Fatalf("record %d: offset %d, key %q, %d value bytes, timestamp %v", i, r.Offset, r.Key, len(r.Value), r.Timestamp)
		}
	}
	if got := len(batch); got > batchHeaderBytes+200*recordSize(value, 200) {
		t.Errorf("batch of %d bytes exceeds the size recordSize plans for", got)
	}
	// An idempotent producer's per-request rewrite keeps the batch valid.
	idem := bytes.Clone(batch)
	stampProducer(idem, producerID{id: 77, epoch: 3})
	stampSequence(idem, 4000)
	fp, _ = kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t", Offset: 1000},
		&kmsg.FetchResponseTopicPartition{RecordBatches: idem, HighWatermark: 1200}, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil || len(fp.Records) != 200 || fp.Records[0].ProducerID != 77 || fp.Records[0].ProducerEpoch != 3 {
		t.Fatalf("stamped batch: err %v, %d records", fp.Err, len(fp.Records))
	}
	if v, err := readBatch(idem, true); err != nil || int32(binary.BigEndian.Uint32(idem[batchBaseSeqOff:])) != 4000 || v.numRecords != 200 {
		t.Errorf("stamped batch: %+v, %v", v, err)
	}
	// A flipped value byte is caught by kgo's CRC check and by ours.
	bad := bytes.Clone(batch)
	bad[len(bad)-10] ^= 1
	fp, _ = kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t", Offset: 1000},
		&kmsg.FetchResponseTopicPartition{RecordBatches: bad, HighWatermark: 1200}, kgo.DefaultDecompressor(), nil)
	if fp.Err == nil {
		t.Error("kgo accepted a batch with a bad CRC")
	}
	if _, err := readBatch(bad, true); err == nil || !strings.Contains(err.Error(), "CRC") {
		t.Errorf("readBatch of a corrupt batch: %v, want a CRC error", err)
	}
}

// TestCountBatches: records are counted from headers from the fetch offset to the end, a
// cut-off last batch is left for the next fetch, and a gap or a bad count fails.
func TestCountBatches(t *testing.T) {
	value := []byte("0123456789")
	at := func(base int64, n int) []byte {
		b := encodeBatch(n, value, 1)
		binary.BigEndian.PutUint64(b, uint64(base))
		return b
	}
	buf := append(append(at(0, 5), at(5, 5)...), at(10, 5)[:30]...) // the third cut off
	p := &rawPartition{next: 2, end: 100}
	n, err := countBatches(p, buf, 1)
	if err != nil || n != 8 || p.next != 10 {
		t.Fatalf("counted %d records (next %d, err %v), want 8 from offset 2 (next 10)", n, p.next, err)
	}
	p = &rawPartition{next: 10, end: 12}
	if n, err := countBatches(p, at(10, 5), 1); err != nil || n != 2 || p.next != 12 {
		t.Errorf("to the end offset: %d records, next %d, err %v; want 2, 12", n, p.next, err)
	}
	if _, err := countBatches(&rawPartition{next: 5, end: 100}, at(7, 5), 1); err == nil || !strings.Contains(err.Error(), "jump") {
		t.Errorf("a gap: %v, want offsets jump", err)
	}
	wrong := at(0, 5)
	binary.BigEndian.PutUint32(wrong[batchNumRecordsOff:], 4) // the CRC still matches: counted from the header
	binary.BigEndian.PutUint32(wrong[batchCRCOff:], crcOf(wrong))
	if _, err := countBatches(&rawPartition{end: 100}, wrong, 1); err == nil {
		t.Error("a batch whose record count disagrees with its last offset delta was counted")
	}
	notV2 := at(0, 5)
	notV2[batchMagicOff] = 1
	if _, err := countBatches(&rawPartition{end: 100}, notV2, 1000); err == nil {
		t.Error("a magic 1 batch was counted")
	}
}

func crcOf(b []byte) uint32 {
	return crc32Castagnoli(b[batchAttributesOff:])
}

// TestRawPlan: every record is planned exactly once, no batch above the limit, partitions
// served round robin.
func TestRawPlan(t *testing.T) {
	plan := rawPlan(1003, 3, 100)
	per := map[int32]int{}
	for i, s := range plan {
		if s.records <= 0 || s.records > 100 {
			t.Fatalf("send %d has %d records", i, s.records)
		}
		per[s.partition] += s.records
	}
	if per[0] != 335 || per[1] != 334 || per[2] != 334 {
		t.Errorf("records per partition %v, want 335, 334, 334", per)
	}
	if plan[0].partition != 0 || plan[1].partition != 1 || plan[2].partition != 2 || plan[3].partition != 0 {
		t.Errorf("plan does not start round robin: %v", plan[:4])
	}
}

// TestRawGeneratorOnExactq: the raw producer's records land in a real exactq as kgo reads
// them back, and the raw consumer counts exactly them.
func TestRawGeneratorOnExactq(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the broker")
	}
	bin, ctx := buildExactq(t)
	p, err := brokerproc.Start(brokerproc.Options{Binary: bin, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	brokers := []string{p.Addr}
	// Small batches and one in flight per connection on 2 connections: several requests
	// per partition, answered in order.
	for _, idempotent := range []bool{false, true} {
		topic := fmt.Sprintf("raw-idempotent-%v", idempotent)
		raw := RawConfig{Conns: 2, InFlight: 2, BatchBytes: 8 << 10, PartitionMaxBytes: 16 << 10, Idempotent: idempotent}
		pr, err := RawProduce(ctx, ProduceConfig{Brokers: brokers, Topic: topic, Partitions: 3, Records: 2500, RecordBytes: 100}, raw)
		if err != nil {
			t.Fatal(topic, err)
		}
		if pr.Records != 2500 || pr.Bytes != 250000 || pr.P50 <= 0 || pr.P50 > pr.P99 {
			t.Errorf("%s: raw produce: %+v", topic, pr)
		}
		kc, err := Consume(ctx, ConsumeConfig{Brokers: brokers, Topic: topic})
		if err != nil {
			t.Fatal(topic, err)
		}
		if kc.Records != 2500 || kc.Bytes != 250000 {
			t.Errorf("%s: kgo read back %d records (%d value bytes), want 2500 (250000)", topic, kc.Records, kc.Bytes)
		}
		rc, err := RawConsume(ctx, ConsumeConfig{Brokers: brokers, Topic: topic}, raw, 100)
		if err != nil {
			t.Fatal(topic, err)
		}
		if rc.Records != 2500 || rc.Bytes != 250000 {
			t.Errorf("%s: raw consume counted %d records (%d bytes), want 2500 (250000)", topic, rc.Records, rc.Bytes)
		}
	}
}

// TestProcTreeCPU: a broker's CPU includes what its children burn, live or reaped.
func TestProcTreeCPU(t *testing.T) {
	cmd := exec.Command("sh", "-c", `sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'; exec sleep 60`)
	if err := cmd.Start(); err != nil {
		t.Skip("no sh:", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tree, err := procTreeCPU(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		st, err := readProcStat(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		own := time.Duration(st.utime+st.stime) * time.Second / clockTicks
		if tree >= 100*time.Millisecond && tree > own {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tree CPU %v, own %v: the child's CPU is not counted", tree, own)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMachineState: the figures the variance diagnostics print are read on Linux.
func TestMachineState(t *testing.T) {
	ms := machineState()
	if ms.Load1 < 0 || ms.DirtyKiB < 0 || ms.WritebackKiB < 0 || ms.MajFaults < 0 {
		t.Errorf("unread machine state: %+v", ms)
	}
	s := &Suite{LoadWarn: 1e-9}
	var log strings.Builder
	s.Log = &log
	w := s.openWindow(0, "a test")
	f := w.close(s)
	if f.Diag == nil || !f.Diag.LoadWarning || !strings.Contains(log.String(), "WARNING: load average") {
		t.Errorf("no load warning above a tiny threshold: %+v, log %q", f.Diag, log.String())
	}
	if f.ClientCPU < 0 || f.BrokerCPU != 0 {
		t.Errorf("window without a broker: client %v, broker %v", f.ClientCPU, f.BrokerCPU)
	}
}
