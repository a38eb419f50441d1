package broker_test

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/batch"
)

// patched returns a copy of b with the int32 at off set to v and the CRC fixed, so only
// the broker's record checks can tell the batch is wrong.
func patched(b []byte, off int, v int32) []byte {
	out := append([]byte(nil), b...)
	binary.BigEndian.PutUint32(out[off:], uint32(v))
	batch.UpdateCRC(out)
	return out
}

// TestProduceRefusesLyingUncompressedBatches is #17 findings 1 and 3 over TCP: CRC-valid
// uncompressed batches whose records do not match their header were stored and served
// (a share consumer then acquired a billion offsets; Java's KafkaConsumer threw on every
// poll). Kafka answers INVALID_RECORD and stores nothing; so must we.
func TestProduceRefusesLyingUncompressedBatches(t *testing.T) {
	_, cl := setupTopic(t)
	const lastOffsetDeltaAt, countAt = 23, 57
	one := rawBatch(t, -1, -1, -1, 1)
	three := rawBatch(t, -1, -1, -1, 3)
	garbage := append([]byte(nil), three...)
	for i := batch.HeaderSize; i < len(garbage); i++ {
		garbage[i] = 0xff
	}
	batch.UpdateCRC(garbage)
	empty := patched(patched(one[:batch.HeaderSize], 8, batch.HeaderSize-batch.LengthPrefix), countAt, 3)
	empty = patched(empty, lastOffsetDeltaAt, 2)
	cases := map[string][]byte{
		"one record claiming a billion": patched(patched(one, countAt, 1_000_000_000), lastOffsetDeltaAt, 999_999_999),
		"last offset delta a billion":   patched(one, lastOffsetDeltaAt, 999_999_999),
		"fewer records than the count":  patched(patched(three, countAt, 4), lastOffsetDeltaAt, 3),
		"more records than the count":   patched(patched(three, countAt, 2), lastOffsetDeltaAt, 1),
		"garbage record bytes":          garbage,
		"a count with no record bytes":  empty,
	}
	for name, b := range cases {
		wantCode(t, name, produceRaw(t, cl, "t", -1, b).ErrorCode, kerr.InvalidRecord)
	}
	// Nothing of the above reached the log.
	res := produceRaw(t, cl, "t", -1, three)
	if res.ErrorCode != 0 || res.BaseOffset != 0 {
		t.Fatalf("good batch after bad ones: %v at %d", kerr.ErrorForCode(res.ErrorCode), res.BaseOffset)
	}
}
