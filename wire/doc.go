// Package wire holds the Kafka messages exactq speaks that kmsg (v1.15.1) lacks, as types
// that satisfy kmsg.Request and kmsg.Response, so a *kgo.Client sends them
// ((*kgo.Client).Broker(id).Request) and exactq's broker serves them like kmsg's:
//
//   - TxnShareAcknowledge (KIP-1289), which stages share acknowledgements in a producer
//     transaction. It goes to the leader of the share partitions it acknowledges, so it
//     carries none of kmsg's routing markers (kgo must not send it to a coordinator). The
//     KIP has no assigned API key, so the key is settable: APIKey on the request and the
//     response, 0 meaning TxnShareAcknowledgeDefaultKey (95, exactq decision D1).
//   - InitProducerId v0-6: v6 adds KIP-939's Enable2Pc and KeepPreparedTxn (request) and
//     OngoingTxnProducerID/Epoch (response); v0-5 encode byte for byte as kmsg's.
//   - RaftMessage (exactq's, private key 32000): raft messages between nodes' quorum
//     loops, as raftpb protobuf encodings with the sender's cluster id, node id and
//     DirectoryId (internal/cluster/raftnet sends and serves it). Peers only: not in
//     kgo's versions and never advertised to clients.
//
// The encoders and decoders (generated.go) are written by franz-go's own message
// generator, vendored in internal/franzgen, from the definition files in definitions/,
// in franz-go's DSL (generate/README.md in the franz-go repository): the same code
// writers that produce kmsg's generated.go, so these messages follow kmsg's encoding,
// defaults and decode bounds exactly. To add or change a message, edit definitions/ and
// run `go generate ./wire` (it also regenerates the decode-cost walkers the broker
// checks these requests with, internal/decodecost/wire_gen.go); TestGeneratedIsFresh
// fails while generated.go is stale.
package wire

//go:generate go run ../internal/franzgen wire -defs definitions -settable-key TxnShareAcknowledge -o generated.go
//go:generate go run ../internal/franzgen decodecost -wire -defs definitions -o ../internal/decodecost/wire_gen.go

import "github.com/twmb/franz-go/pkg/kversion"

// The acknowledgement types TxnShareAcknowledge may stage (exactq decision D3): a gap,
// ACCEPT, REJECT.
const (
	AckGap    int8 = 0
	AckAccept int8 = 1
	AckReject int8 = 3
)

// TxnShareAcknowledgeVersions is kversion.Stable() plus TxnShareAcknowledge v0 at key (0
// means TxnShareAcknowledgeDefaultKey). A *kgo.Client sends only the keys of its
// kgo.MaxVersions, so one that sends TxnShareAcknowledge is built with
// kgo.MaxVersions(wire.TxnShareAcknowledgeVersions(key)).
func TxnShareAcknowledgeVersions(key int16) *kversion.Versions {
	if key == 0 {
		key = TxnShareAcknowledgeDefaultKey
	}
	v := kversion.Stable()
	v.SetMaxKeyVersion(key, 0)
	return v
}
