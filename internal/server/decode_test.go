package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/wire"
)

// kafka44Table serves every key and version of Kafka44.
func kafka44Table() *apiTable {
	apis := make([]APIRange, 0, len(Kafka44))
	for _, r := range Kafka44 {
		apis = append(apis, r)
	}
	t, _ := newAPITable(apis)
	return t
}

// frameBody is AppendRequest without the size prefix.
func frameBody(r kmsg.Request, version int16, corr int32) []byte {
	r.SetVersion(version)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz")).AppendRequest(nil, r, corr)[4:]
}

func seedFrames() [][]byte {
	var seeds [][]byte
	for _, key := range []int16{0, 1, 3, 8, 11, 18, 22, 24, 26, 78, 79} {
		r := Kafka44[key]
		for _, v := range []int16{r.MinVersion, r.MaxVersion} {
			seeds = append(seeds, frameBody(kmsg.RequestForKey(key), v, int32(key)*100+int32(v)))
		}
	}
	// A produce request with a topic, a partition and some record bytes.
	p := kmsg.NewPtrProduceRequest()
	p.Acks = -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = bytes.Repeat([]byte{0xab}, 70)
	pt.Partitions = append(pt.Partitions, pp)
	p.Topics = append(p.Topics, pt)
	seeds = append(seeds, frameBody(p, 9, 1), frameBody(p, 3, 2))
	// ApiVersions at a future version with a body we do not parse.
	seeds = append(seeds, append(frameBody(kmsg.NewPtrApiVersionsRequest(), 42, 3), 1, 2, 3))
	// A null client id.
	seeds = append(seeds, []byte{0, 3, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0})
	return seeds
}

func TestDecodeRequestSeeds(t *testing.T) {
	table := kafka44Table()
	for i, frame := range seedFrames() {
		d, err := decodeRequest(frame, table, nil)
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if d.body == nil && !d.apiVersionsFallback {
			t.Fatalf("seed %d: no body", i)
		}
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	table, _ := newAPITable([]APIRange{{Key: 3, MinVersion: 0, MaxVersion: 13}, {Key: 0, MinVersion: 3, MaxVersion: 13}})
	hdr := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 7)
		return binary.BigEndian.AppendUint16(b, 0xffff)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, ErrMalformedRequest},
		{"unknown to kmsg", hdr(999, 0), ErrUnknownAPIKey},
		{"not served", frameBody(kmsg.NewPtrFetchRequest(), 12, 1), ErrUnknownAPIKey},
		{"above range", append(hdr(3, 14), 0), ErrUnsupportedVersion},
		{"below range", frameBody(kmsg.NewPtrProduceRequest(), 2, 1), ErrUnsupportedVersion},
		{"truncated body", frameBody(kmsg.NewPtrProduceRequest(), 9, 1)[:14], ErrMalformedRequest},
		{"truncated correlation id", hdr(3, 0)[:6], ErrMalformedRequest},
	} {
		_, err := decodeRequest(tc.frame, table, nil)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	d, err := decodeRequest(frameBody(kmsg.NewPtrMetadataRequest(), 12, 99), table, nil)
	if err != nil || d.clientID != "fuzz" || d.correlationID != 99 || d.version != 12 {
		t.Fatalf("metadata v12: %+v %v", d, err)
	}
}

// FuzzDecodeRequest: decodeRequest never panics (its recover would turn a kmsg decoder panic
// into an error naming the panic, which fails here), and a successful decode is
// self-consistent and re-encodes to something that decodes again identically.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	table := kafka44Table()
	f.Fuzz(func(t *testing.T, frame []byte) {
		d, err := decodeRequest(frame, table, nil)
		if err != nil {
			if he := (*headerError)(nil); errors.As(err, &he) && he.panicked {
				t.Fatalf("kmsg panicked: %v", err)
			}
			if !errors.Is(err, ErrMalformedRequest) && !errors.Is(err, ErrUnknownAPIKey) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if d.apiVersionsFallback {
			if d.key != 18 || d.body != nil {
				t.Fatalf("fallback for key %d", d.key)
			}
			return
		}
		r := table.ranges[d.key]
		if d.body == nil || d.body.Key() != d.key || d.body.GetVersion() != d.version ||
			d.version < r.MinVersion || d.version > r.MaxVersion {
			t.Fatalf("inconsistent decode: %+v", d)
		}
		enc := d.body.AppendTo(nil)
		again := kmsg.RequestForKey(d.key)
		again.SetVersion(d.version)
		if err := again.ReadFrom(enc); err != nil {
			t.Fatalf("re-decode of key %d v%d: %v", d.key, d.version, err)
		}
		if enc2 := again.AppendTo(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("key %d v%d: re-encoding differs", d.key, d.version)
		}
	})
}

func TestNewAPITable(t *testing.T) {
	table, dropped := newAPITable([]APIRange{
		{Key: 3, MinVersion: 0, MaxVersion: 99}, // capped to kmsg's 13
		{Key: 18, MinVersion: 0, MaxVersion: 3}, // caps ApiVersions
		{Key: 1, MinVersion: 5, MaxVersion: 4},  // empty
		{Key: 9999, MinVersion: 0, MaxVersion: 0},
		// Handler-defined types are served only if decodecost bounds their decoding (wire types).
		{Key: 12, MinVersion: 0, MaxVersion: 4, NewRequest: func() kmsg.Request { return uncostedRequest{kmsg.NewPtrHeartbeatRequest()} }},
		{Key: 95, MinVersion: 0, MaxVersion: 0, NewRequest: func() kmsg.Request { return wire.NewPtrTxnShareAcknowledgeRequest() }},
	})
	if got := table.ranges[3]; got.MaxVersion != 13 {
		t.Fatalf("metadata range %+v", got)
	}
	if got := table.apiVersions; got.MinVersion != 0 || got.MaxVersion != 3 || table.ranges[18].MaxVersion != got.MaxVersion || table.ranges[18].MinVersion != got.MinVersion {
		t.Fatalf("api versions range %+v", got)
	}
	if len(dropped) != 3 || len(table.ranges) != 3 || table.ranges[95].NewRequest == nil {
		t.Fatalf("dropped %+v, served %+v", dropped, table.ranges)
	}
	// Without a key 18 entry the server still serves ApiVersions 0-5.
	table, _ = newAPITable(nil)
	if got := table.ranges[18]; got.MaxVersion != maxApiVersionsVersion {
		t.Fatalf("default api versions range %+v", got)
	}
}

// TestDecodeCostKnowsEveryServedVersion: decodecost walks every key and version the broker
// serves, so no served request is refused as malformed for want of a walker.
func TestDecodeCostKnowsEveryServedVersion(t *testing.T) {
	table := kafka44Table()
	for key, r := range table.ranges {
		for v := r.MinVersion; v <= r.MaxVersion; v++ {
			req := kmsg.RequestForKey(key)
			if req == nil {
				continue
			}
			var cost int64 = -1
			if _, err := decodeRequest(frameBody(req, v, 1), table, func(n int64) error { cost = n; return nil }); err != nil || cost < 0 {
				t.Errorf("key %d v%d: %v (cost %d)", key, v, err, cost)
			}
		}
	}
}

// uncostedRequest is a handler-defined request type decodecost has no walker for.
type uncostedRequest struct{ *kmsg.HeartbeatRequest }
