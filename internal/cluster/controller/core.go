// Package controller is the metadata controller that runs on the raft leader
// (docs/architecture.md, "The controller is the raft leader"): broker registration,
// heartbeats and fencing, controlled shutdown, the restart rule, producer-id blocks, and
// the topic admin requests (decided with cluster/admin, placed over the unfenced brokers).
//
// Core is the pure part: no goroutines, no I/O, the clock passed in. Given the latest
// image (the committed one plus this controller's own batches not applied yet) and a
// request, it returns the records to propose and how to answer once they are applied,
// or an error answer at once. Driver owns a Core on one goroutine and proposes its
// batches through a Quorum.
package controller

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/groupconfig"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config is the controller's timing and bounds. Zero values take Kafka's defaults.
type Config struct {
	// SessionTimeout is broker.session.timeout.ms (9 s): an unfenced broker not heard
	// from for longer is fenced at the next tick.
	SessionTimeout time.Duration
	// HeartbeatInterval is broker.heartbeat.interval.ms (2 s). A registered broker silent
	// for two intervals may be replaced by a new incarnation at once (the restart rule).
	HeartbeatInterval time.Duration
	// MaxPartitionChanges bounds the PartitionChangeRecords of one batch (0 = 10,000,
	// Kafka's MAX_RECORDS_PER_USER_OP), which keeps a batch far below the 8 MiB entry
	// limit; the rest of a fence or unfence is done at the next ticks.
	MaxPartitionChanges int

	// Admin is what the topic and config requests are decided with (broker defaults,
	// limits). A nil Topic is Kafka's defaults, a nil Group the group defaults, and
	// MaxBrokerPartitions 0 no cap (max.broker.partitions unset).
	Admin admin.Config
	// NodeID is this node's id: UpdateFeatures names it ("Local controller N"), and new
	// partitions are placed on it while no unfenced broker is registered (a lone node's
	// broker may create topics before it registers).
	NodeID int32
	// PlacementStart draws where a request's stripe of new partitions starts among n
	// brokers; nil = at random, as Kafka's controller does. Tests fix it.
	PlacementStart func(n int) int
	// NewTopicID draws topic ids (drawn again while taken); nil = random UUIDs.
	NewTopicID func() metadata.TopicID

	// Bootstrap are the records the first controller of a log without a ClusterRecord
	// proposes, as one entry, at its first tick: a new cluster of several voters (whose
	// first entries, written by raft's bootstrap, hold no records) gets its cluster id and
	// feature levels this way, once. Nil: a log without a ClusterRecord stays so (a lone
	// voter's broker bootstraps its log itself, before the controller runs).
	Bootstrap []wire.MetadataRecord

	// maxBatchBytes bounds a batch an admin request is cut into: metadata.MaxEntryBytes,
	// lower in tests (building megabytes of valid records through the admin checks is
	// slow).
	maxBatchBytes int
}

// ProducerIDBlockSize is how many producer ids one AllocateProducerIds hands out
// (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
const ProducerIDBlockSize = 1000

func (c Config) withDefaults() Config {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 9 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 2 * time.Second
	}
	if c.MaxPartitionChanges <= 0 {
		c.MaxPartitionChanges = 10_000
	}
	if c.Admin.Group == nil {
		g, err := groupconfig.NewBroker(nil)
		if err != nil {
			panic("controller: the group defaults do not build: " + err.Error())
		}
		c.Admin.Group = g
	}
	if c.Admin.MaxBrokerPartitions <= 0 {
		c.Admin.MaxBrokerPartitions = math.MaxInt64
	}
	if c.maxBatchBytes <= 0 {
		c.maxBatchBytes = metadata.MaxEntryBytes
	}
	if c.PlacementStart == nil {
		c.PlacementStart = randomStart
	}
	if c.NewTopicID == nil {
		c.NewTopicID = randomTopicID
	}
	return c
}

// Core is one controller term's decisions. It lives as long as this node leads one
// term: a new term gets a new Core, so heartbeat times are only ever this controller's
// own (a new controller starts every unfenced broker's session at its first tick, as
// KRaft's does). Not safe for concurrent use.
type Core struct {
	cfg Config
	// sessions are the brokers heard from (or, unfenced, started at a tick) in this term,
	// by id; a session of another epoch than the broker's registered one is stale.
	sessions map[int32]*session
	// rescan asks the next tick to look at every partition: set at the start of a term
	// and when a batch left partition changes for later (MaxPartitionChanges).
	rescan bool
}

type session struct {
	epoch       int64
	lastContact time.Time // the last heartbeat, or when the session was started at a tick
	// lastHeartbeat is when this epoch last heartbeated to this controller; zero if it
	// has not since this controller became leader (then the restart rule lets a new
	// incarnation replace it at once).
	lastHeartbeat time.Time
}

// New returns the Core of a new term.
func New(cfg Config) *Core {
	return &Core{cfg: cfg.withDefaults(), sessions: map[int32]*session{}, rescan: true}
}

// Result is what the controller does with one request or tick.
type Result struct {
	// Records are what to propose, in order; none when nothing changes. They are one
	// batch (one raft entry, applied atomically) unless Splits cuts them.
	Records []wire.MetadataRecord
	// Splits are the indexes of Records where a new batch starts, ascending, each above
	// 0: an admin request's records cut between topics or resources to keep every entry
	// within metadata.MaxEntryBytes (Batches). The answer waits for the last batch.
	Splits []int
	// Next is latest after Records, applied speculatively; nil when Records is empty or
	// Barrier is set.
	Next *metadata.Image
	// Barrier is set when Records register a broker: its epoch is the raft index of the
	// entry (metadata.ApplyEntry gives it; the record carries -1), which nobody knows
	// before it is applied, so nothing else may be decided on latest until it is.
	Barrier bool
	// Reply builds the answer: with Records, once they are applied at index; without,
	// once everything proposed before is applied (index is then 0). Nil for a tick.
	Reply func(index uint64) kmsg.Response
	// Immediate is set when Reply is an error that is answered at once (nothing to wait
	// for, as Kafka answers a request its controller refuses).
	Immediate bool
}

// Batches are Records cut at Splits.
func (r *Result) Batches() [][]wire.MetadataRecord {
	if len(r.Records) == 0 {
		return nil
	}
	out := make([][]wire.MetadataRecord, 0, len(r.Splits)+1)
	from := 0
	for _, to := range append(slices.Clip(r.Splits), len(r.Records)) {
		out = append(out, r.Records[from:to])
		from = to
	}
	return out
}

// Handle is HandleFrom without a client id.
func (c *Core) Handle(latest *metadata.Image, now time.Time, req any) (Result, error) {
	return c.HandleFrom(latest, now, "", req)
}

// HandleFrom decides req from client clientID (the request header's, which one
// CreateTopics refusal names) against latest at now. req is one of BrokerRegistration,
// BrokerHeartbeat, UnregisterBroker, AllocateProducerIds, CreateTopics, DeleteTopics,
// CreatePartitions, AlterConfigs, IncrementalAlterConfigs, UpdateFeatures, CreateAcls,
// DeleteAcls, AlterUserScramCredentials (as *kmsg requests with their version set), *AutoCreateTopicRequest or
// *CreateInternalTopicRequest; it returns an error only for anything else.
func (c *Core) HandleFrom(latest *metadata.Image, now time.Time, clientID string, req any) (Result, error) {
	if r, ok := c.handleAdmin(latest, clientID, req); ok {
		return c.checked(latest, req, r), nil
	}
	if r, ok := c.handleSecurity(latest, req); ok {
		return c.checked(latest, req, r), nil
	}
	var r Result
	switch req := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		r = c.register(latest, now, req)
	case *kmsg.BrokerHeartbeatRequest:
		r = c.heartbeat(latest, now, req)
	case *kmsg.UnregisterBrokerRequest:
		r = c.unregister(latest, req)
	case *kmsg.AllocateProducerIDsRequest:
		r = c.allocateProducerIDs(latest, req)
	default:
		return Result{}, fmt.Errorf("controller: %T is not a controller request", req)
	}
	return c.checked(latest, req, r), nil
}

// checked is r once its batches are checked against latest (setting r.Next).
func (c *Core) checked(latest *metadata.Image, req any, r Result) Result {
	if len(r.Records) > 0 {
		if err := c.check(latest, &r); err != nil {
			// A batch that does not apply would stop every node's quorum loop; it is a
			// bug here, answered as Kafka answers one.
			return errorResult(req, kerr.UnknownServerError, err.Error())
		}
	}
	return r
}

// Tick runs the controller's timers at now: sessions of unfenced brokers start (the
// first tick of a term) and expired ones are fenced, one broker per tick (Kafka fences
// one at a time so each fence is visible before the next); and, when something was
// left for later, leaderships are repaired. Records are empty when nothing is due. An
// error is a batch that would not apply (a bug); nothing is proposed then.
func (c *Core) Tick(latest *metadata.Image, now time.Time) (Result, error) {
	for _, id := range sortedBrokerIDs(latest) {
		br := latest.Brokers[id]
		if br.Fenced {
			continue
		}
		if s := c.sessions[id]; s == nil || s.epoch != br.Epoch {
			c.sessions[id] = &session{epoch: br.Epoch, lastContact: now}
		}
	}
	for id, s := range c.sessions {
		if br := latest.Brokers[id]; br == nil || br.Epoch != s.epoch {
			delete(c.sessions, id) // unregistered or registered again
		}
	}
	var r Result
	if latest.Cluster.ID == "" && len(c.cfg.Bootstrap) > 0 {
		// Nothing else is decided on a log without a cluster (registrations are refused):
		// once this entry is applied (or latest moves past it), it is not proposed again.
		r.Records = slices.Clone(c.cfg.Bootstrap)
	}
	for _, id := range sortedBrokerIDs(latest) {
		if len(r.Records) > 0 {
			break
		}
		br := latest.Brokers[id]
		if s := c.sessions[id]; !br.Fenced && now.Sub(s.lastContact) > c.cfg.SessionTimeout {
			r.Records = c.fence(latest, br)
			delete(c.sessions, id)
			break
		}
	}
	if len(r.Records) == 0 && c.rescan {
		c.rescan = false
		r.Records = c.repairLeaders(latest)
	}
	if len(r.Records) > 0 {
		if err := c.check(latest, &r); err != nil {
			// A bug: proposing it would stop every node's quorum loop.
			return Result{}, fmt.Errorf("controller: a tick's batch does not apply: %w", err)
		}
	}
	return r, nil
}

// check applies r's records to latest as the log will, setting r.Next. A registration's
// epoch -1 is given an index above every epoch, as its real index will be.
func (c *Core) check(latest *metadata.Image, r *Result) error {
	index := uint64(0)
	if r.Barrier {
		index = math.MaxInt64
	}
	next := latest
	for _, b := range r.Batches() {
		var err error
		if next, _, err = metadata.ApplyEntry(next, index, b); err != nil {
			return err
		}
	}
	if !r.Barrier {
		r.Next = next
	}
	return nil
}

// errorResult is an immediate answer of code to req.
func errorResult(req any, code *kerr.Error, msg string) Result {
	return Result{Immediate: true, Reply: func(uint64) kmsg.Response { return ErrorResponse(req, code, msg) }}
}

// ErrorResponse is req's response carrying code (NOT_CONTROLLER when this node does not
// lead, for instance), at req's version: in every topic or resource the request names,
// for the admin requests; the internal requests get their one-topic CreateTopicsResponse.
func ErrorResponse(req any, code *kerr.Error, msg string) kmsg.Response {
	switch req := req.(type) {
	case *AutoCreateTopicRequest:
		return topicAnswer(req.Name, metadata.TopicID{}, code, msg)
	case *CreateInternalTopicRequest:
		return topicAnswer(req.Name, metadata.TopicID{}, code, msg)
	case kmsg.Request:
		if resp := adminErrorResponse(req, code, msg); resp != nil {
			return resp
		}
		if resp := securityErrorResponse(req, code, msg); resp != nil {
			return resp
		}
		return controlErrorResponse(req, code, msg)
	}
	panic(fmt.Sprintf("controller: %T is not a controller request", req))
}

func controlErrorResponse(req kmsg.Request, code *kerr.Error, msg string) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch resp := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		resp.ErrorCode, resp.BrokerEpoch = code.Code, -1
	case *kmsg.BrokerHeartbeatResponse:
		resp.ErrorCode = code.Code
	case *kmsg.UnregisterBrokerResponse:
		resp.ErrorCode = code.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
	case *kmsg.AllocateProducerIDsResponse:
		resp.ErrorCode = code.Code
	}
	return resp
}

// at returns r written at its highest version, as the checkpoint writes records. (The
// finalized metadata.version does not gate record versions yet: every node runs this
// code.)
func at[R wire.MetadataRecord](r R) R {
	r.SetVersion(r.MaxVersion())
	return r
}
