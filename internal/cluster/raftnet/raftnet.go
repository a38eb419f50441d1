// Package raftnet carries the quorum loop's raft messages between nodes as RaftMessage
// requests (exactq's private key 32000) on each peer's control lane (docs/architecture.md,
// "The quorum loop: who owns Ready", "Inter-broker client", "A voter that lost its disk").
//
// The Sender is the loop's Options.Send: it never blocks the loop. Each destination has a
// bounded queue and one goroutine that sends what is queued, in order, one request at a
// time (so messages to one peer arrive in the order raft produced them); a full queue
// drops the message (raft resends) and reports the peer unreachable. Delivery failures
// go back to raft through the loop's ReportUnreachable and ReportSnapshot.
//
// The Receiver answers RaftMessage: it checks the cluster id, that the messages are for
// this node's raft id, that the sender's DirectoryId is the one registered for it (when
// one is known), decodes every message and only then hands them to the loop's Step, and
// answers at once (a full loop queue is a retriable error: the sender reports the peer
// unreachable and raft resends).
//
// A node wires them as:
//
//	snd := raftnet.NewSender(raftnet.SenderConfig{Transport: tr, NodeID: id, DirectoryID: dir, ClusterID: cid})
//	loop, _ := quorum.New(quorum.Options{ID: raftnet.RaftID(id), Send: snd.Send, ...})
//	snd.SetReporter(loop) // before the loop runs
//	rcv := raftnet.NewReceiver(raftnet.ReceiverConfig{RaftID: raftnet.RaftID(id), Step: loop.Step, ClusterID: cid, DirectoryOf: ...})
//	// serve rcv.API() with rcv.Handle on the controller listener (or NewHandler(rcv)).
//
// Raft ids are generation<<32 | (node.id+1); generation 0 until re-adding a voter that
// lost its disk is built.
package raftnet

import (
	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RaftID is node's raft id at generation 0.
func RaftID(node int32) uint64 { return uint64(uint32(node)) + 1 }

// NodeOf is the node id of a raft id (any generation): its low 32 bits less one.
func NodeOf(raftID uint64) int32 { return int32(uint32(raftID) - 1) }

// MaxMessageBytes is the largest encoded raft message sent: the peer's request frame
// limit (socket.request.max.bytes, 100 MiB) less room for the request header and the
// RaftMessage fields around it. A MsgSnap carries the whole checkpoint in one message,
// so a checkpoint larger than this cannot be sent: it is refused loudly (logged at error
// level, reported to raft as a failed snapshot), never truncated.
const MaxMessageBytes = 100<<20 - 64<<10

// API is the RaftMessage entry of a server's Handler.APIs.
func API() server.APIRange {
	return server.APIRange{Key: (*wire.RaftMessageRequest)(nil).Key(), MinVersion: 0,
		MaxVersion: (*wire.RaftMessageRequest)(nil).MaxVersion(),
		NewRequest: func() kmsg.Request { return wire.NewPtrRaftMessageRequest() }}
}
