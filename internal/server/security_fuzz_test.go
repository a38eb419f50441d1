package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/security/sasl"
)

// FuzzSASLListener runs whole connections of a SASL_PLAINTEXT listener (reader, writer,
// authentication gate) over what one client sent. The broker knows no credential and no
// OAuth key anyone holds, so no input can authenticate: the property is that no request
// ever reaches the handler, the connection ends without a panic, and every byte of the
// request budget is given back.
func FuzzSASLListener(f *testing.F) {
	frame := func(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }
	req := func(r kmsg.Request, v int16, corr int32) []byte { return frame(frameBody(r, v, corr)) }
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "fuzz", "1"
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	f.Add(join(req(av, 3, 1), req(saslHandshake(1, "PLAIN"), 1, 2), req(saslAuthenticate(2, "\x00alice\x00secret"), 2, 3), req(metadataReq(12), 12, 4)))
	f.Add(join(req(saslHandshake(0, "PLAIN"), 0, 1), frame([]byte("\x00alice\x00secret")), req(metadataReq(12), 12, 2)))
	f.Add(join(req(saslHandshake(1, "SCRAM-SHA-256"), 1, 1), req(saslAuthenticate(1, "n,,n=alice,r=abc"), 1, 2), req(saslAuthenticate(1, "c=biws,r=abc,p=AAAA"), 1, 3)))
	f.Add(join(req(saslHandshake(1, "OAUTHBEARER"), 1, 1), req(saslAuthenticate(1, "n,,\x01auth=Bearer a.b.c\x01\x01"), 1, 2), req(saslAuthenticate(1, "\x01"), 1, 3)))
	f.Add(join(req(metadataReq(12), 12, 1)))

	h := &countingHandler{testHandler: newTestHandler()}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: newSigner(f).Public(), KeyID: "k"}}})
	validator, err := sasl.NewOAuthValidator(sasl.OAuthConfig{JWKS: jwks, AllowUnverifiedAudience: true, AllowUnverifiedIssuer: true})
	if err != nil {
		f.Fatal(err)
	}
	auth, err := sasl.New(sasl.Config{Mechanisms: []string{sasl.Plain, sasl.ScramSHA256, sasl.OAuthBearer},
		Credentials: func(string, string) (sasl.ScramCredential, bool) { return sasl.ScramCredential{}, false },
		OAuth:       validator})
	if err != nil {
		f.Fatal(err)
	}
	s := New(Config{QueuedMaxRequestBytes: -1, FailedAuthenticationDelay: NoFailedAuthenticationDelay,
		Listeners:      map[string]ListenerConfig{"SASL": {SecurityProtocol: SASLPlaintext, SASL: auth}},
		OnHandlerPanic: func(p HandlerPanic) { f.Errorf("handler panicked: %v", p.Value) }}, h, quietLogger(f))
	f.Fuzz(func(t *testing.T, input []byte) {
		c := newConn(s, &bytesConn{r: bytes.NewReader(input)}, netip.Addr{}, "SASL")
		c.start()
		select {
		case <-h.ended:
		case <-time.After(safetyDeadline):
			t.Fatal("the connection did not end")
		}
		if n := h.reached.Swap(0); n != 0 {
			t.Fatalf("%d requests reached the handler without authentication", n)
		}
		if got := s.QueuedRequestBytes(); got != 0 {
			t.Fatalf("%d bytes still charged", got)
		}
	})
}

// countingHandler counts the requests it is handed and reports each connection's end,
// keeping nothing per connection (a long fuzz campaign runs millions of them).
type countingHandler struct {
	*testHandler
	reached atomic.Int64
}

func (h *countingHandler) Handle(ctx context.Context, r *Request) Reply {
	h.reached.Add(1)
	return Reply{Resp: r.Body.ResponseKind()}
}

func (h *countingHandler) ConnClosed(*ConnInfo) { h.ended <- 0 }

func newSigner(t testing.TB) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
