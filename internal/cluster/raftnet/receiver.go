package raftnet

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/wire"
)

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// RaftID is this node's raft id: every message must be for it.
	RaftID uint64
	// Step hands one message to the quorum loop (the running loop's Step: a node that
	// reopens its loop passes a function that finds the current one). Its
	// quorum.ErrQueueFull and quorum.ErrStopped are answered as retriable errors.
	Step func(*pb.Message) error
	// ClusterID is this node's cluster id, "" while unknown. Nil: never known.
	ClusterID func() string
	// DirectoryOf is the DirectoryId registered for a node (its BrokerRegistration's log
	// directory, from the image); ok false when none is known yet. Nil: none known.
	DirectoryOf func(node int32) (dir [16]byte, ok bool)
	Logger      *slog.Logger
}

// Receiver answers RaftMessage requests.
type Receiver struct{ cfg ReceiverConfig }

// NewReceiver returns a Receiver.
func NewReceiver(cfg ReceiverConfig) *Receiver {
	if cfg.RaftID == 0 || cfg.Step == nil {
		panic("raftnet: ReceiverConfig.RaftID and Step are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Receiver{cfg: cfg}
}

// Handle checks req, steps its messages into the loop and answers at once. The
// messages are decoded (copied) before it returns, so req's bytes may be reused.
func (r *Receiver) Handle(req *wire.RaftMessageRequest) *wire.RaftMessageResponse {
	resp := wire.NewPtrRaftMessageResponse()
	resp.Version = req.Version
	ms, err := r.check(req)
	if err == nil {
		err = r.step(ms)
	}
	if err != nil {
		var ke *kerr.Error
		if !errors.As(err, &ke) {
			ke = kerr.UnknownServerError
		}
		resp.ErrorCode = ke.Code
		if ke != kerr.RequestTimedOut {
			r.cfg.Logger.Debug("raftnet: RaftMessage refused", "from_node", req.SenderNodeID, "err", err)
		}
	}
	return resp
}

// check refuses a request that is not for this node or not from a current member, and
// decodes its messages; nothing is stepped unless every message is fine.
func (r *Receiver) check(req *wire.RaftMessageRequest) ([]*pb.Message, error) {
	if own := r.clusterID(); own != "" && req.ClusterID != "" && own != req.ClusterID {
		return nil, kerr.InconsistentClusterID
	}
	if uint64(req.DestinationRaftID) != r.cfg.RaftID {
		return nil, kerr.InvalidVoterKey
	}
	if r.cfg.DirectoryOf != nil {
		if dir, ok := r.cfg.DirectoryOf(req.SenderNodeID); ok && dir != req.SenderDirectoryID {
			return nil, kerr.InconsistentVoterSet // replaced: its disk was lost and re-registered
		}
	}
	if req.SenderNodeID < 0 {
		return nil, kerr.InvalidRequest
	}
	ms := make([]*pb.Message, 0, len(req.Messages))
	for _, b := range req.Messages {
		m := new(pb.Message)
		if err := proto.Unmarshal(b, m); err != nil {
			return nil, kerr.InvalidRequest
		}
		switch {
		case m.GetTo() != r.cfg.RaftID, m.GetFrom() == 0, NodeOf(m.GetFrom()) != req.SenderNodeID:
			return nil, kerr.InvalidRequest
		case raft.IsLocalMsg(m.GetType()), m.GetType() == pb.MessageType_MsgProp:
			// Local messages are the node's own (a peer must not make it campaign);
			// a proposal would bypass the controller, which alone proposes.
			return nil, kerr.InvalidRequest
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func (r *Receiver) step(ms []*pb.Message) error {
	for _, m := range ms {
		switch err := r.cfg.Step(m); {
		case err == nil:
		case errors.Is(err, quorum.ErrQueueFull):
			return kerr.RequestTimedOut
		case errors.Is(err, quorum.ErrStopped):
			return kerr.BrokerNotAvailable
		default:
			return err
		}
	}
	return nil
}

func (r *Receiver) clusterID() string {
	if r.cfg.ClusterID == nil {
		return ""
	}
	return r.cfg.ClusterID()
}

// Handler is a server.Handler that serves RaftMessage alone (the server answers
// ApiVersions itself): a controller listener until the controller's requests join it.
type Handler struct{ r *Receiver }

// NewHandler serves r.
func NewHandler(r *Receiver) *Handler { return &Handler{r} }

// APIs lists RaftMessage.
func (h *Handler) APIs() []server.APIRange { return []server.APIRange{API()} }

// Handle answers a RaftMessage; the server sends nothing else.
func (h *Handler) Handle(_ context.Context, req *server.Request) server.Reply {
	return server.Reply{Resp: h.r.Handle(req.Body.(*wire.RaftMessageRequest)), BodyDone: true}
}

// Features has none to add.
func (h *Handler) Features(*kmsg.ApiVersionsResponse) {}

// ConnClosed keeps no per-connection state.
func (h *Handler) ConnClosed(*server.ConnInfo) {}
