package server

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The server answers ApiVersions (key 18) itself, the way Apache Kafka 4.4 does in
// KafkaApis.handleApiVersionsRequest, ApiVersionsRequest and ApiVersionsResponse:
//
//   - version outside the served range (any version, even negative): the body is not parsed
//     and the answer is a v0 body with UNSUPPORTED_VERSION whose ApiKeys holds only the
//     ApiVersions entry (ApiVersionsRequest.getErrorResponse, KIP-511), so the client can
//     retry at the highest version we serve;
//   - v3+ with a client software name or version that is not [a-zA-Z0-9](?:[a-zA-Z0-9-.]*
//     [a-zA-Z0-9])?, or v5+ with only one of ClusterId/NodeId: INVALID_REQUEST, no ApiKeys;
//   - v5+ naming a cluster id / node id that is not ours: REBOOTSTRAP_REQUIRED (KIP-1242);
//   - otherwise the full list, with Produce advertised from MinVersion 0 (KAFKA-18659) and,
//     below v4, supported features whose MinVersion is 0 omitted (KAFKA-17492).
//
// The response header of ApiVersions is always v0 (no tagged-field byte), at every version.

// apiVersionsReply builds the response for a decoded ApiVersions request on connection ci,
// listing apiKeys (the listener's: SASL listeners add SaslHandshake and SaslAuthenticate).
func (s *Server) apiVersionsReply(d *decoded, ci *ConnInfo, apiKeys []kmsg.ApiVersionsResponseApiKey) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	if d.apiVersionsFallback {
		resp.SetVersion(0)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{apiKeyEntry(s.apis.apiVersions)}
		return resp
	}
	req := d.body.(*kmsg.ApiVersionsRequest)
	resp.SetVersion(d.version)
	if !apiVersionsRequestValid(req) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	if req.Version >= 3 {
		// Kafka records the client software at this point (SocketServer, KIP-511).
		ci.ClientSoftwareName, ci.ClientSoftwareVersion = req.ClientSoftwareName, req.ClientSoftwareVersion
	}
	if req.Version >= 5 && req.ClusterID != nil && s.cfg.ClusterID != "" &&
		(*req.ClusterID != s.cfg.ClusterID || req.NodeID != s.cfg.NodeID) {
		resp.ErrorCode = kerr.RebootstrapRequired.Code
		return resp
	}
	// A copy, so a Features implementation cannot alter the shared list.
	resp.ApiKeys = append([]kmsg.ApiVersionsResponseApiKey(nil), apiKeys...)
	if req.Version >= 3 {
		s.h.Features(resp)
		if req.Version < 4 {
			kept := resp.SupportedFeatures[:0:0]
			for _, f := range resp.SupportedFeatures {
				if f.MinVersion != 0 {
					kept = append(kept, f)
				}
			}
			resp.SupportedFeatures = kept
		}
	}
	return resp
}

// advertisedAPIKeys is the ApiKeys list of a successful ApiVersions response, sorted by key.
func advertisedAPIKeys(t *apiTable) []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(t.ranges))
	for _, r := range t.ranges {
		e := apiKeyEntry(r)
		if r.Key == 0 {
			// Kafka 4.x advertises Produce from v0 although it rejects v0-2: librdkafka
			// needs a 0 there (KAFKA-18659, ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION).
			e.MinVersion = 0
		}
		keys = append(keys, e)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

func apiKeyEntry(r APIRange) kmsg.ApiVersionsResponseApiKey {
	e := kmsg.NewApiVersionsResponseApiKey()
	e.ApiKey, e.MinVersion, e.MaxVersion = r.Key, r.MinVersion, r.MaxVersion
	return e
}

// apiVersionsRequestValid is ApiVersionsRequest.isValid of Kafka 4.4.
func apiVersionsRequestValid(req *kmsg.ApiVersionsRequest) bool {
	if req.Version >= 5 && (req.ClusterID == nil) != (req.NodeID == -1) {
		return false
	}
	if req.Version >= 3 {
		return validSoftwareToken(req.ClientSoftwareName) && validSoftwareToken(req.ClientSoftwareVersion)
	}
	return true
}

// validSoftwareToken matches [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? in full.
func validSoftwareToken(s string) bool {
	if s == "" {
		return false
	}
	alnum := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
