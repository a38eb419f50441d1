package server

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/exactq/exactq/internal/security/sasl"
	"github.com/exactq/exactq/internal/security/tlsconfig"
)

// Connection limits, as Kafka's ConnectionQuotas (core/.../network/SocketServer.scala) applies
// them: at the broker-wide limit (max.connections) or a listener's limit
// (listener.name.<name>.max.connections) the acceptor stops accepting until a connection
// closes, so new clients wait in the kernel's backlog; an address already holding its
// maximum (max.connections.per.ip, or its entry in max.connections.per.ip.overrides) has the
// new connection closed at once.

// DefaultListenerName is the name of the listener Serve serves (Kafka's default listener
// name for an unencrypted, unauthenticated listener).
const DefaultListenerName = "PLAINTEXT"

// DefaultMaxConnectionsPerIP is the default for Config.MaxConnectionsPerIP.
//
// Kafka's default is unlimited. exactq deliberately differs: with no per-address limit one
// client opening idle connections takes every slot of max.connections and locks every other
// client out for as long as it holds them (issue #17). 1000 is far above what a real client
// host opens (a kgo or Java client holds one or two connections per broker) yet leaves at
// least nine tenths of the default max.connections to other addresses.
const DefaultMaxConnectionsPerIP = 1000

// NoConnectionsPerIP as Config.MaxConnectionsPerIP admits only the addresses listed in
// MaxConnectionsPerIPOverrides (Kafka's max.connections.per.ip=0).
const NoConnectionsPerIP = -1

// ListenerConfig holds one listener's own limits (Kafka's listener.name.<name>.* configs).
type ListenerConfig struct {
	// MaxConnections caps this listener's open connections
	// (listener.name.<name>.max.connections); at the limit the listener stops accepting
	// until one of its connections closes. Zero: only Config.MaxConnections applies.
	MaxConnections int

	// SecurityProtocol is the listener's protocol (listener.security.protocol.map); empty
	// is PLAINTEXT. SSL and SASL_SSL need TLS, SASL_PLAINTEXT and SASL_SSL need SASL, and
	// the others must leave them nil (ServeListener refuses a mismatch).
	SecurityProtocol SecurityProtocol
	// TLS is the listener's ssl.* configuration, reloaded as its files change.
	TLS *tlsconfig.Server
	// SASL is the listener's sasl.enabled.mechanisms with their credentials and
	// validators. Before a client authenticates only ApiVersions, SaslHandshake and
	// SaslAuthenticate are served (see security.go).
	SASL *sasl.Authenticator
	// MaxReauth is connections.max.reauth.ms (KIP-368): an authenticated session lasts at
	// most this long (less if the credential expires sooner, as an OAUTHBEARER token
	// does); the client is told in SaslAuthenticate's session_lifetime_ms, and a request
	// after the end, unless it begins a re-authentication, closes the connection. Zero:
	// sessions end only with their credential. MaxReauthByMechanism overrides it for the
	// mechanisms it names (listener.name.<l>.<mechanism>.connections.max.reauth.ms).
	MaxReauth            time.Duration
	MaxReauthByMechanism map[string]time.Duration
}

// maxReauth is the session cap for mechanism.
func (l ListenerConfig) maxReauth(mechanism string) time.Duration {
	if d, ok := l.MaxReauthByMechanism[mechanism]; ok {
		return d
	}
	return l.MaxReauth
}

// perIPLimit returns the default per-address connection limit for a broker-wide maximum:
// DefaultMaxConnectionsPerIP, but never more than nine tenths of maxConnections, so one
// address always leaves slots to the others (unless maxConnections is tiny).
func perIPLimit(maxConnections int) int {
	return max(1, min(DefaultMaxConnectionsPerIP, maxConnections-maxConnections/10))
}

// maxConnsForIP is the limit for connections from ip.
func (c *Config) maxConnsForIP(ip netip.Addr) int {
	if n, ok := c.MaxConnectionsPerIPOverrides[ip]; ok {
		return n
	}
	return max(c.MaxConnectionsPerIP, 0) // NoConnectionsPerIP admits nobody
}

// slotAvailable reports whether listener may accept another connection. s.mu is held.
func (s *Server) slotAvailable(listener string) bool {
	if lim := s.cfg.Listeners[listener].MaxConnections; lim > 0 && s.perListener[listener] >= lim {
		return false
	}
	return len(s.conns) < s.cfg.MaxConnections
}

// waitForSlot blocks, with s.mu held, until listener may register another connection or
// the server is closing. It returns false when closing. As Kafka's acceptor does, it holds
// the one connection just accepted while waiting; the rest wait in the listen backlog.
func (s *Server) waitForSlot(listener string) bool {
	if !s.closing && !s.slotAvailable(listener) {
		s.log.Warn("connection limit reached, not accepting until a connection closes",
			"listener", listener, "connections", len(s.conns), "max_connections", s.cfg.MaxConnections,
			"listener_connections", s.perListener[listener],
			"listener_max_connections", s.cfg.Listeners[listener].MaxConnections)
		for !s.closing && !s.slotAvailable(listener) {
			s.acceptorsWaiting++
			s.slotFreed.Wait()
			s.acceptorsWaiting--
		}
	}
	return !s.closing
}

// logLimiter lets through one log line per interval and counts the others, so a client
// opening connections in a loop cannot fill the disk with the broker's log (Kafka logs each
// rejection).
type logLimiter struct {
	lastAt     time.Time
	suppressed int
}

const rejectLogInterval = time.Second

// allow reports whether to log now, and how many lines were dropped since the last one.
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed int) {
	if now.Sub(l.lastAt) < rejectLogInterval {
		l.suppressed++
		return false, 0
	}
	suppressed, l.suppressed, l.lastAt = l.suppressed, 0, now
	return true, suppressed
}

// remoteIP is the address connection limits count nc under: the remote IP, with IPv4-mapped
// IPv6 addresses unmapped. Connections without an IP (not TCP) share the zero Addr.
func remoteIP(nc net.Conn) netip.Addr {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// ParseConnectionsPerIPOverrides parses max.connections.per.ip.overrides: comma-separated
// host:count pairs, where host is an IP address or a host name (resolved now, as Kafka
// resolves it once when the config is loaded; every address it resolves to gets the count).
// An IPv6 address is split at its last colon, as Kafka's Csv.parseCsvMap does.
func ParseConnectionsPerIPOverrides(ctx context.Context, s string) (map[netip.Addr]int, error) {
	overrides := map[netip.Addr]int{}
	if strings.TrimSpace(s) == "" {
		return overrides, nil
	}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		i := strings.LastIndexByte(pair, ':')
		if i <= 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %q is not host:count", pair)
		}
		host := strings.TrimSpace(pair[:i])
		count, err := strconv.Atoi(strings.TrimSpace(pair[i+1:]))
		if err != nil || count < 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %q: count must be a non-negative integer", pair)
		}
		addrs, err := resolveHost(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %q: %w", host, err)
		}
		for _, a := range addrs {
			overrides[a] = count
		}
	}
	return overrides, nil
}

func resolveHost(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	return addrs, nil
}
