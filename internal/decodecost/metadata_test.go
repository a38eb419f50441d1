package decodecost

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/exactq/exactq/internal/decodecost/costtest"
	"github.com/exactq/exactq/wire"
)

// checkRecordCost asserts CheckMetadataRecord's contract on frame: it fails exactly where
// wire.ReadMetadataRecord fails, and the decode allocates no more than it says (the record
// struct, which NewMetadataRecord makes before the body is read, not counted).
func checkRecordCost(t *testing.T, frame []byte) (bound, measured int64) {
	t.Helper()
	bound, err := CheckMetadataRecord(frame)
	typ, version, body, frameErr := wire.MetadataRecordFrame(frame)
	var readErr error
	if frameErr == nil {
		fresh := func() wire.MetadataRecord { return wire.NewMetadataRecord(typ) }
		if fresh() == nil || version > fresh().MaxVersion() {
			readErr = wire.ErrUnknownMetadataRecord
		} else {
			measured, readErr = costtest.AllocBytes(fresh, func(r wire.MetadataRecord) error { return r.ReadBodyFrom(body, version) })
		}
	} else {
		readErr = frameErr
	}
	if (err == nil) != (readErr == nil) {
		t.Fatalf("frame %x: CheckMetadataRecord error %v, decode error %v", frame, err, readErr)
	}
	if err == nil && measured > bound+costtest.SlackBytes {
		t.Fatalf("frame %x: decode allocated %d bytes, CheckMetadataRecord %d", frame, measured, bound)
	}
	return bound, measured
}

// metadataFrames is a populated record of every type at every version, framed.
func metadataFrames() [][]byte {
	var all [][]byte
	for _, typ := range wire.MetadataRecordTypes() {
		r := wire.NewMetadataRecord(typ)
		for v := range r.MaxVersion() + 1 {
			r := wire.NewMetadataRecord(typ)
			r.SetVersion(v)
			switch x := r.(type) {
			case *wire.RegisterBrokerRecord:
				x.EndPoints = make([]wire.RegisterBrokerRecordEndPoint, 3)
				x.Features = make([]wire.RegisterBrokerRecordFeature, 2)
				x.Rack = new(string)
				x.LogDirs, x.CordonedLogDirs = make([][16]byte, 4), make([][16]byte, 1)
			case *wire.PartitionRecord:
				x.Replicas, x.ISR, x.Directories = make([]int32, 3), make([]int32, 2), make([][16]byte, 3)
				x.EligibleLeaderReplicas = []int32{1}
			case *wire.PartitionChangeRecord:
				x.ISR, x.Replicas, x.Directories = make([]int32, 2), make([]int32, 5), make([][16]byte, 5)
			case *wire.ConfigRecord:
				x.ResourceName, x.Name, x.Value = "topic", "retention.ms", new(string)
			case *wire.TopicRecord:
				x.Name = "orders"
			}
			all = append(all, wire.AppendMetadataRecord(nil, r))
		}
	}
	return all
}

// TestMetadataRecordCostBoundsDecode: every record at every version and every prefix of
// it, a byte after it, and hostile counts: CheckMetadataRecord fails where the decode
// fails, bounds what it allocates, and allocates nothing itself.
func TestMetadataRecordCostBoundsDecode(t *testing.T) {
	for _, frame := range metadataFrames() {
		for n := range len(frame) + 1 {
			checkRecordCost(t, frame[:n])
		}
		if _, err := CheckMetadataRecord(append(frame[:len(frame):len(frame)], 0)); !errors.Is(err, ErrTruncated) {
			t.Fatalf("frame %x and a byte: %v, want ErrTruncated", frame, err)
		}
		if n := testing.AllocsPerRun(10, func() { CheckMetadataRecord(frame) }); n != 0 {
			t.Fatalf("CheckMetadataRecord allocates %v times", n)
		}
	}
	// A PartitionChangeRecord whose ISR tag claims 100M replicas in a few bytes.
	head := wire.AppendMetadataRecord(nil, &wire.PartitionChangeRecord{Leader: -2, LeaderRecoveryState: -1})
	head = head[:len(head)-1] // drop the empty tag section
	lying := kbin.AppendUvarint(kbin.AppendUvarint(kbin.AppendUvarint(head, 1), 0), 8)
	lying = append(kbin.AppendUvarint(lying, 100_000_000), 1, 2, 3, 4, 5, 6, 7)
	if _, err := CheckMetadataRecord(lying); !errors.Is(err, ErrTruncated) {
		t.Fatalf("100M replicas: %v, want ErrTruncated", err)
	}
	checkRecordCost(t, lying)
}

// FuzzMetadataRecordCheck: on any frame, CheckMetadataRecord never panics, fails exactly
// where the decode fails, and bounds what it allocates.
func FuzzMetadataRecordCheck(f *testing.F) {
	for _, frame := range metadataFrames() {
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) { checkRecordCost(t, frame) })
}
