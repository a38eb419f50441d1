// Package server is exactq's wire layer: it accepts TCP connections, frames and decodes Kafka
// requests with kmsg, hands each to a Handler in request order and writes the responses back
// in the same order. It knows nothing about topics, logs or groups.
//
// What it does on bad input, matching Apache Kafka 4.4 (SocketServer.scala
// processCompletedReceives, server/.../network/Processor.java parseRequestHeader,
// RequestHeader.java, RequestContext.java, KafkaApis.handleApiVersionsRequest):
//
//	frame size < 0 or > MaxRequestBytes        close (InvalidReceiveException)
//	header or body that does not decode        close (InvalidRequestException); a body
//	                                           whose counts claim more than it holds is
//	                                           found before kmsg allocates (decodecost)
//	decoding over a connection's share of      close (exactq only; Kafka decodes it)
//	QueuedMaxRequestBytes
//	API key unknown or not in Handler.APIs     close (InvalidRequestException)
//	version outside the served range           close (UnsupportedVersionException)
//	ApiVersions at an unsupported version      v0 UNSUPPORTED_VERSION answer listing only
//	                                           ApiVersions' own range; connection stays open
//	ApiVersions v3+ with invalid software name INVALID_REQUEST answer
//	panic in handler code (Handle, Wait,       logged with its stack at error level; the
//	ConnClosed, encoding its response)         server stops accepting and the process
//	                                           exits with status 2 (fail-stop, see
//	                                           failstop.go; Kafka answers
//	                                           UNKNOWN_SERVER_ERROR and carries on)
//
// On SSL and SASL_SSL listeners the TLS handshake comes first; a failed one closes. On SASL
// listeners, before the client authenticates (security.go, Kafka's SaslServerAuthenticator):
//
//	ApiVersions (once, before SaslHandshake)   answered, listing SaslHandshake and
//	                                           SaslAuthenticate
//	SaslHandshake, mechanism not enabled       UNSUPPORTED_SASL_MECHANISM, then close
//	SaslAuthenticate failing                   SASL_AUTHENTICATION_FAILED after
//	                                           FailedAuthenticationDelay, then close
//	any other request, or a frame over 512 KiB close
//	a request after the session ended          close (unless it begins re-authentication)
//
// In every close case the responses to earlier requests on the connection are written
// first (Kafka handles one request per connection at a time, so they were already sent).
//
// Limits (Kafka's names; see Config): at MaxConnections or a listener's limit the server
// stops accepting until a connection closes; a connection from an address at its
// MaxConnectionsPerIP is closed at once; a request that does not fit QueuedMaxRequestBytes
// waits, its connection not read, until memory frees.
//
// Per connection, a reader goroutine calls Handle one request at a time and queues the Reply
// (at most Config.MaxInFlightPerConn queued; a full queue stops reading), and a writer
// goroutine calls Wait functions and writes responses in request order.
package server

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/security/acl"
)

// Request is one decoded request from a client connection.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string // empty when the client sent a null client id
	Body          kmsg.Request
	Conn          *ConnInfo
}

// ConnInfo identifies the connection a request arrived on.
type ConnInfo struct {
	ID         uint64 // unique per broker process, never reused
	RemoteAddr net.Addr
	LocalAddr  net.Addr

	// ClientSoftwareName and ClientSoftwareVersion are what the client reported in its last
	// valid ApiVersions v3+ request (KIP-511), empty until then. The server writes them on
	// the connection's reader goroutine, between Handle calls, so Handle and ConnClosed may
	// read them freely; other goroutines must not.
	ClientSoftwareName    string
	ClientSoftwareVersion string

	// Listener is the name of the listener the connection came in on, and
	// SecurityProtocol its protocol.
	Listener         string
	SecurityProtocol SecurityProtocol
	// Principal is who the client is, for ACL checks: Anonymous (User:ANONYMOUS) on
	// PLAINTEXT and on SSL without a client certificate, the certificate's mapped name on
	// SSL, the SASL identity on SASL_PLAINTEXT and SASL_SSL. It is set before the first
	// request reaches Handle and never changes after (a re-authentication must keep it),
	// so Handle and ConnClosed may read it freely.
	Principal acl.Principal
}

// Reply is a handler's answer to one request.
//
// Exactly one of Resp and Wait is usually set. Resp is an immediate answer. Wait lets a
// handler that must wait (a produce waiting for fsync, a fetch long poll) return at once:
// the server calls Wait off the connection's handling goroutine, in request order, so the
// next pipelined request can be handled meanwhile while responses still leave in order.
// Both nil means the request gets no response (produce with acks=0).
//
// A response (Resp, or what Wait returns) that implements SplicedResponse is written with
// its file chunks sent from the files (sendfile where the connection allows) and released
// once written or dropped.
type Reply struct {
	Resp kmsg.Response
	Wait func() kmsg.Response
	// Close closes the connection after any response is written (Kafka closes on some
	// protocol violations instead of answering).
	Close bool
	// BodyDone says that once Handle has returned, neither the handler nor Resp nor Wait
	// references the request's bytes (the []byte fields of Request.Body alias the frame
	// they were decoded from; strings are copies), so the server may reuse that memory for
	// later requests. Leave it false unless that holds on every path.
	BodyDone bool
}

// APIRange is one API key with the versions the broker really implements.
type APIRange struct {
	Key        int16
	MinVersion int16
	MaxVersion int16
	// NewRequest makes an empty request of this key for keys kmsg does not define
	// (exactq's own messages, such as KIP-1289's TxnShareAcknowledge). Nil: kmsg's type.
	NewRequest func() kmsg.Request
}

// Handler serves decoded requests. The server answers ApiVersions itself from APIs and
// Features; every other key it dispatches to Handle only when APIs lists it and the
// version is in range (otherwise it closes the connection, as Kafka does).
type Handler interface {
	// APIs lists the implemented API keys and version ranges (ApiVersions included).
	APIs() []APIRange
	// Handle is called for one connection's requests one at a time, in arrival order.
	// ctx is cancelled when the connection closes or the server shuts down.
	Handle(ctx context.Context, req *Request) Reply
	// Features fills the feature fields of an ApiVersions v3+ response (supported and
	// finalized features such as transaction.version).
	Features(resp *kmsg.ApiVersionsResponse)
	// ConnClosed is called once when a connection ends, so per-connection state (fetch
	// sessions, share sessions) can be released.
	ConnClosed(conn *ConnInfo)
}
