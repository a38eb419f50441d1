package batch

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/exactq/exactq/internal/compress"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRecompressKeepsEverythingButTheCodec: from every codec to every codec, the
// recompressed batch parses (valid CRC and length), carries the target codec, and keeps
// every other header field and every record byte.
func TestRecompressKeepsEverythingButTheCodec(t *testing.T) {
	h := Header{BaseOffset: 42, PartitionLeaderEpoch: 3, Attributes: AttrTransactional, FirstTimestamp: 1_700_000_000_000,
		ProducerID: 7, ProducerEpoch: 2, BaseSequence: 11}
	var recs []kmsg.Record
	for i := 0; i < 20; i++ {
		r := kmsg.NewRecord()
		r.Key, r.Value = []byte(fmt.Sprint("k", i)), bytes.Repeat([]byte{byte(i)}, 100)
		r.TimestampDelta64 = int64(i * 5)
		r.Headers = []kmsg.Header{{Key: "h", Value: []byte("v")}}
		recs = append(recs, r)
	}
	for from := int8(CodecNone); from <= CodecZstd; from++ {
		src, err := Encode(nil, h, recs, from)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := Validate(src, ValidateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantRecs := mustRecords(t, src)
		for to := int8(CodecNone); to <= CodecZstd; to++ {
			out, err := Recompress(&sh, to, compress.DefaultLevel, 1<<20, nil)
			if err != nil {
				t.Fatalf("%d to %d: %v", from, to, err)
			}
			oh, err := Validate(out, ValidateOptions{})
			if err != nil {
				t.Fatalf("%d to %d: recompressed batch invalid: %v", from, to, err)
			}
			if int8(oh.Attributes&AttrCompressionMask) != to {
				t.Errorf("%d to %d: codec %d", from, to, oh.Attributes&AttrCompressionMask)
			}
			// Codec bits, length, CRC and payload may differ; nothing else.
			got, want := oh, sh
			got.Attributes &^= AttrCompressionMask
			want.Attributes &^= AttrCompressionMask
			want.Length, want.CRC, want.Records = got.Length, got.CRC, got.Records
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%d to %d: header %+v, want %+v", from, to, got, want)
			}
			if gotRecs := mustRecords(t, out); fmt.Sprint(gotRecs) != fmt.Sprint(wantRecs) {
				t.Errorf("%d to %d: records differ", from, to)
			}
		}
	}
}

func mustRecords(t *testing.T, b []byte) []kmsg.Record {
	t.Helper()
	recs, err := Records(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		recs[i].Length = 0 // framing, not content
	}
	return recs
}
