package peer

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDecodeResponse feeds arbitrary frames to what reads a peer's answers: the frame
// reader and the response decoder must return an error, never panic or allocate past the
// frame bound.
func FuzzDecodeResponse(f *testing.F) {
	for _, resp := range []kmsg.Response{&kmsg.HeartbeatResponse{Version: 4, ThrottleMillis: 7},
		&kmsg.ApiVersionsResponse{Version: 3, ApiKeys: defaultAPIs()}, &kmsg.MetadataResponse{Version: 12}} {
		body := binary.BigEndian.AppendUint32(nil, 1)
		if resp.Key() != 18 && resp.IsFlexible() {
			body = append(body, 0)
		}
		body = resp.AppendTo(body)
		f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...), resp.Key(), resp.GetVersion())
	}
	f.Fuzz(func(t *testing.T, frame []byte, key, version int16) {
		body, err := readFrame(bytes.NewReader(frame))
		if err != nil {
			return
		}
		resp := kmsg.ResponseForKey(key)
		if resp == nil || version < 0 || version > resp.MaxVersion() {
			return
		}
		decodeResponse(resp, version, 1, body)
	})
}
