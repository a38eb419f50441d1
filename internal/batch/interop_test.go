package batch

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/exactq/exactq/internal/compress"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFranzGoReadsOurBatches decodes batches built by Encode and ControlBatch with
// franz-go's own fetch parser (kgo.ProcessFetchPartition: CRC, lengths, all four codecs,
// control records, read_committed filtering with an aborted transaction index).
func TestFranzGoReadsOurBatches(t *testing.T) {
	var log []byte
	offset := int64(0)
	want := map[int64]string{} // offset -> value a read_committed consumer must see
	for _, codec := range allCodecs {
		recs := sampleRecords(3)
		h := idempotentHeader()
		h.BaseOffset = offset
		b := mustEncode(t, h, recs, codec)
		log = append(log, b...)
		for i := range recs {
			want[offset+int64(i)] = string(recs[i].Value)
		}
		offset += int64(len(recs))
	}
	// A transaction of producer 9 at offsets [offset, offset+1], aborted by a marker.
	aborted := offset
	h := Header{BaseOffset: offset, PartitionLeaderEpoch: -1, Attributes: AttrTransactional,
		FirstTimestamp: 5, ProducerID: 9, ProducerEpoch: 0, BaseSequence: 0}
	log = append(log, mustEncode(t, h, sampleRecords(2), CodecLZ4)...)
	offset += 2
	marker := ControlBatch(9, 0, false, 1, 6)
	SetBaseOffset(marker, offset)
	log = append(log, marker...)
	offset++
	// A committed transaction of producer 10.
	h.BaseOffset, h.ProducerID = offset, 10
	committed := sampleRecords(1)
	log = append(log, mustEncode(t, h, committed, CodecZstd)...)
	want[offset] = string(committed[0].Value)
	offset++
	marker = ControlBatch(10, 0, true, 1, 7)
	SetBaseOffset(marker, offset)
	log = append(log, marker...)
	offset++

	rp := &kmsg.FetchResponseTopicPartition{
		HighWatermark:    offset,
		LastStableOffset: offset,
		RecordBatches:    log,
		AbortedTransactions: []kmsg.FetchResponseTopicPartitionAbortedTransaction{
			{ProducerID: 9, FirstOffset: aborted},
		},
	}
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		IsolationLevel: kgo.ReadCommitted(), Topic: "t",
	}, rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatal(fp.Err)
	}
	got := map[int64]string{}
	for _, r := range fp.Records {
		got[r.Offset] = string(r.Value)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("franz-go read %v\nwant %v", got, want)
	}
	// Our own reader agrees on every data batch.
	for rest := log; len(rest) > 0; {
		n, _ := Size(rest)
		if _, err := Records(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
}

// TestWeReadFranzGoCompression decodes a batch whose payload franz-go's compressor wrote.
func TestWeReadFranzGoCompression(t *testing.T) {
	recs := sampleRecords(20)
	for _, c := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		comp, _ := kgo.DefaultCompressor(c)
		raw := mustEncode(t, idempotentHeader(), recs, CodecNone)
		h, _ := Parse(raw)
		payload, codec := comp.Compress(new(bytes.Buffer), h.Records)
		h.Records = bytes.Clone(payload)
		h.Attributes |= int16(codec)
		b := assemble(h)
		out, err := Records(b)
		if err != nil {
			t.Fatalf("%s: %v", compress.Name(int8(codec)), err)
		}
		if len(out) != len(recs) || !bytes.Equal(out[19].Key, recs[19].Key) {
			t.Fatalf("%s: records differ", compress.Name(int8(codec)))
		}
	}
}
