package txnwire

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Versions 0-5 are byte for byte kmsg's; v6 appends the KIP-939 fields before the tags.
func TestInitProducerIDRequestVersions(t *testing.T) {
	for v := int16(0); v <= 6; v++ {
		r := NewInitProducerIDRequest()
		r.Version = v
		r.TransactionalID = kmsg.StringPtr("tx")
		r.TransactionTimeoutMillis = 60000
		if v >= 3 {
			r.ProducerID, r.ProducerEpoch = 42, 7
		}
		if v >= 6 {
			r.Enable2Pc, r.KeepPreparedTxn = true, true
		}
		b := r.AppendTo(nil)
		if v < 6 {
			k := r.InitProducerIDRequest
			if want := k.AppendTo(nil); !bytes.Equal(b, want) {
				t.Fatalf("v%d: %x, kmsg %x", v, b, want)
			}
		} else {
			// compact string "tx" (len+1 = 3), timeout, pid, epoch, true, true, no tags
			want := []byte{3, 't', 'x', 0, 0, 0xea, 0x60, 0, 0, 0, 0, 0, 0, 0, 42, 0, 7, 1, 1, 0}
			if !bytes.Equal(b, want) {
				t.Fatalf("v6: %x, want %x", b, want)
			}
		}
		got := NewInitProducerIDRequest()
		got.Version = v
		if err := got.ReadFrom(b); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if *got.TransactionalID != "tx" || got.TransactionTimeoutMillis != 60000 || got.ProducerID != r.ProducerID ||
			got.ProducerEpoch != r.ProducerEpoch || got.Enable2Pc != r.Enable2Pc || got.KeepPreparedTxn != r.KeepPreparedTxn {
			t.Fatalf("v%d: round trip %+v, want %+v", v, got, r)
		}
	}
	// Truncated v6 bodies are errors, not panics.
	r := NewInitProducerIDRequest()
	r.Version = 6
	r.TransactionalID = kmsg.StringPtr("tx")
	b := r.AppendTo(nil)
	for i := range b {
		got := NewInitProducerIDRequest()
		got.Version = 6
		if err := got.ReadFrom(b[:i]); err == nil {
			t.Fatalf("%d bytes of %d decoded", i, len(b))
		}
	}
}

func TestInitProducerIDResponseVersions(t *testing.T) {
	for v := int16(0); v <= 6; v++ {
		r := NewInitProducerIDResponse()
		r.Version = v
		r.ProducerID, r.ProducerEpoch = 42, 8
		if v >= 6 {
			r.OngoingTxnProducerID, r.OngoingTxnProducerEpoch = 42, 7
		}
		b := r.AppendTo(nil)
		if v < 6 {
			k := r.InitProducerIDResponse
			if want := k.AppendTo(nil); !bytes.Equal(b, want) {
				t.Fatalf("v%d: %x, kmsg %x", v, b, want)
			}
		} else {
			want := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42, 0, 8, 0, 0, 0, 0, 0, 0, 0, 42, 0, 7, 0}
			if !bytes.Equal(b, want) {
				t.Fatalf("v6: %x, want %x", b, want)
			}
		}
		got := r.RequestKind().ResponseKind().(*InitProducerIDResponse)
		if err := got.ReadFrom(b); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		wantPID, wantEpoch := int64(-1), int16(-1)
		if v >= 6 {
			wantPID, wantEpoch = 42, 7
		}
		if got.ProducerID != 42 || got.ProducerEpoch != 8 || got.OngoingTxnProducerID != wantPID || got.OngoingTxnProducerEpoch != wantEpoch {
			t.Fatalf("v%d: round trip %+v", v, got)
		}
	}
}
