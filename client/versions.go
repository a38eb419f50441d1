package client

import "github.com/twmb/franz-go/pkg/kmsg"

// maxKey is the highest API key we keep a version for.
const maxKey = 127

// versionTable holds, per API key, the version this connection uses: the highest version
// both sides support, or -1 when there is none.
type versionTable [maxKey + 1]int16

func (t *versionTable) get(key int16) int16 {
	if key < 0 || int(key) >= len(t) {
		return -1
	}
	return t[key]
}

// clientRange is the version range the client is written for, per key. The upper bound is
// kmsg's newest version except where a newer version changes what the client must do:
//
//   - Produce v13+, Fetch v13+, OffsetCommit v10+, OffsetFetch v10+ and TxnOffsetCommit
//     v6+ name topics by topic id; the client uses names for now.
//   - AddPartitionsToTxn v4+ is the broker-to-broker (verify-only, batched) form; clients
//     use v3 and older.
//
// The lower bound is what the client needs to work at all: record batches v2 (Produce v3,
// Fetch v4) and, everywhere else, nothing beyond the first version.
func clientRange(key int16) (lo, hi int16, ok bool) {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return 0, 0, false
	}
	hi = req.MaxVersion()
	switch kmsg.Key(key) {
	case kmsg.Produce:
		lo, hi = 3, min(hi, 12)
	case kmsg.Fetch:
		lo, hi = 4, min(hi, 12)
	case kmsg.ListOffsets:
		lo = 1 // v0 returns offset arrays
	case kmsg.Metadata:
		lo = 1 // v0 cannot ask for "all topics" versus "no topics"
	case kmsg.AddPartitionsToTxn:
		hi = min(hi, 3)
	case kmsg.TxnOffsetCommit:
		hi = min(hi, 5) // v6 names topics by id
	case kmsg.OffsetCommit, kmsg.OffsetFetch:
		hi = min(hi, 9) // v10 names topics by id
	case kmsg.ShareGroupHeartbeat, kmsg.ShareFetch, kmsg.ShareAcknowledge:
		lo = 1 // v0 was Kafka 4.0's early-access schema; brokers reject it (KIP-932)
	}
	return lo, hi, true
}

// otherVersion is the version to use for a request whose key kmsg does not define (such as
// TxnShareAcknowledge, package txnshare): the highest version both the request type and the
// broker support, or -1.
func otherVersion(broker map[int16]kmsg.ApiVersionsResponseApiKey, req kmsg.Request) int16 {
	k, ok := broker[req.Key()]
	if !ok {
		return -1
	}
	v := min(req.MaxVersion(), k.MaxVersion)
	if v < max(0, k.MinVersion) {
		return -1
	}
	return v
}

// negotiate picks, per key, min(our max, broker max) when that is at least both minimums.
func negotiate(broker []kmsg.ApiVersionsResponseApiKey) versionTable {
	var t versionTable
	for i := range t {
		t[i] = -1
	}
	for _, k := range broker {
		lo, hi, ok := clientRange(k.ApiKey)
		if !ok || k.ApiKey < 0 || int(k.ApiKey) >= len(t) {
			continue
		}
		v := min(hi, k.MaxVersion)
		if v < max(lo, k.MinVersion) {
			continue
		}
		t[k.ApiKey] = v
	}
	return t
}
