package controller

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataVersionFeature is the feature every registration must list (Kafka's
// MetadataVersion.FEATURE_NAME).
const metadataVersionFeature = "metadata.version"

// register is BrokerRegistration (62), Kafka's ClusterControlManager.registerBroker with
// exactq's restart rule.
func (c *Core) register(latest *metadata.Image, now time.Time, req *kmsg.BrokerRegistrationRequest) Result {
	fail := func(code *kerr.Error, format string, args ...any) Result {
		return errorResult(req, code, fmt.Sprintf(format, args...))
	}
	if latest.Cluster.ID == "" || req.ClusterID != latest.Cluster.ID {
		return fail(kerr.InconsistentClusterID, "expected cluster id %q, got %q", latest.Cluster.ID, req.ClusterID)
	}
	old := latest.Brokers[req.BrokerID]
	if old != nil && old.IncarnationID != req.IncarnationID && c.live(old, now) {
		return fail(kerr.DuplicateBrokerRegistration, "broker %d is registered by another live incarnation", req.BrokerID)
	}
	if req.IsMigratingZkBroker {
		return fail(kerr.BrokerIDNotRegistered, "ZooKeeper brokers cannot register")
	}
	if code, msg := checkLogDirs(latest, req); code != nil {
		return fail(code, "%s", msg)
	}
	rec := at(&wire.RegisterBrokerRecord{BrokerID: req.BrokerID, IncarnationID: req.IncarnationID,
		BrokerEpoch: -1, Rack: req.Rack, Fenced: true, LogDirs: req.LogDirs})
	names := map[string]bool{}
	for _, l := range req.Listeners {
		if names[l.Name] {
			return fail(kerr.InvalidRegistration, "listener %q twice", l.Name)
		}
		names[l.Name] = true
		rec.EndPoints = append(rec.EndPoints, wire.RegisterBrokerRecordEndPoint{Name: l.Name, Host: l.Host, Port: l.Port, SecurityProtocol: l.SecurityProtocol})
	}
	if code, msg := checkFeatures(latest, req); code != nil {
		return fail(code, "%s", msg)
	}
	for _, f := range req.Features {
		rec.Features = append(rec.Features, wire.RegisterBrokerRecordFeature{Name: f.Name, MinSupportedVersion: f.MinSupportedVersion, MaxSupportedVersion: f.MaxSupportedVersion})
	}

	var recs []wire.MetadataRecord
	if old != nil && old.IncarnationID == req.IncarnationID {
		// The same process registering again (its answer was lost, or it changed a
		// listener). Kafka keeps the epoch; replay here refuses a RegisterBrokerRecord
		// whose epoch does not grow, so an unchanged registration is answered with the
		// epoch it has, and a changed one gets a new epoch, keeping its fencing.
		if sameRegistration(old, rec) {
			epoch := old.Epoch
			return Result{Reply: func(uint64) kmsg.Response { return registrationResponse(req, epoch) }}
		}
		rec.Fenced, rec.InControlledShutdown = old.Fenced, old.InControlledShutdown
	} else if old != nil {
		// A new incarnation: what the old one led is leaderless until the new one is
		// unfenced (Kafka's handleBrokerShutdown), and the registration goes last.
		recs = c.resign(latest, old.ID)
	}
	recs = append(recs, rec)
	delete(c.sessions, req.BrokerID)
	return Result{Records: recs, Barrier: true, Reply: func(index uint64) kmsg.Response {
		return registrationResponse(req, int64(index))
	}}
}

func registrationResponse(req *kmsg.BrokerRegistrationRequest, epoch int64) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	resp.SetVersion(req.GetVersion())
	resp.BrokerEpoch = epoch
	return resp
}

// live is the restart rule: a registered incarnation blocks a new one only if it
// heartbeated to this controller since it became leader, within two heartbeat intervals.
// Kafka waits for the old session to expire (9 s), which would delay every restart of a
// single node by that much.
func (c *Core) live(old *metadata.Broker, now time.Time) bool {
	s := c.sessions[old.ID]
	return s != nil && s.epoch == old.Epoch && !s.lastHeartbeat.IsZero() && now.Sub(s.lastHeartbeat) <= 2*c.cfg.HeartbeatInterval
}

// checkLogDirs is Kafka's directory check: at least one, none reserved (the first 100
// ids), no duplicates, none registered by another broker. A node's directory id is how
// the cluster tells a voter that lost its disk (docs/architecture.md).
func checkLogDirs(latest *metadata.Image, req *kmsg.BrokerRegistrationRequest) (*kerr.Error, string) {
	if len(req.LogDirs) == 0 {
		return kerr.InvalidRegistration, "no log directories in the registration"
	}
	seen := map[[16]byte]bool{}
	for _, d := range req.LogDirs {
		if reservedDir(d) {
			return kerr.InvalidRegistration, fmt.Sprintf("reserved directory id %x", d)
		}
		if seen[d] {
			return kerr.InvalidRegistration, fmt.Sprintf("directory id %x twice", d)
		}
		seen[d] = true
	}
	for _, id := range sortedBrokerIDs(latest) {
		br := latest.Brokers[id]
		if id == req.BrokerID {
			continue
		}
		for _, d := range br.LogDirs {
			if seen[d] {
				return kerr.InvalidRegistration, fmt.Sprintf("broker %d is registered with directory %x", id, d)
			}
		}
	}
	return nil, ""
}

// reservedDir is Kafka's DirectoryId.reserved: the first 100 ids (MIGRATING, UNASSIGNED,
// LOST and room for more) are never a real directory's.
func reservedDir(d [16]byte) bool {
	return binary.BigEndian.Uint64(d[:8]) == 0 && binary.BigEndian.Uint64(d[8:]) < 100
}

// checkFeatures is Kafka's rule: every feature the broker lists must support its
// finalized level (0 when not finalized), every finalized feature the broker does not
// list must be at level 0, and metadata.version must be listed. One difference: a log
// that has not finalized metadata.version (Kafka always has) accepts any range of it.
func checkFeatures(latest *metadata.Image, req *kmsg.BrokerRegistrationRequest) (*kerr.Error, string) {
	listed := map[string]bool{}
	for _, f := range req.Features {
		if f.MinSupportedVersion > f.MaxSupportedVersion {
			return kerr.InvalidRegistration, fmt.Sprintf("feature %s range %d-%d", f.Name, f.MinSupportedVersion, f.MaxSupportedVersion)
		}
		if listed[f.Name] {
			return kerr.InvalidRegistration, fmt.Sprintf("feature %s twice", f.Name)
		}
		listed[f.Name] = true
		level, ok := latest.Features[f.Name]
		if !ok && f.Name == metadataVersionFeature {
			continue
		}
		if level < f.MinSupportedVersion || level > f.MaxSupportedVersion {
			return kerr.UnsupportedVersion, fmt.Sprintf("the broker does not support finalized level %d of %s (it supports %d-%d)",
				level, f.Name, f.MinSupportedVersion, f.MaxSupportedVersion)
		}
	}
	if !listed[metadataVersionFeature] {
		return kerr.InvalidRegistration, "the registration does not list " + metadataVersionFeature
	}
	for _, name := range slices.Sorted(maps.Keys(latest.Features)) {
		if level := latest.Features[name]; !listed[name] && level != 0 {
			return kerr.UnsupportedVersion, fmt.Sprintf("the broker does not support finalized level %d of %s", level, name)
		}
	}
	return nil, ""
}

// sameRegistration reports whether rec would register br again unchanged.
func sameRegistration(br *metadata.Broker, rec *wire.RegisterBrokerRecord) bool {
	if !slices.EqualFunc(br.Endpoints, rec.EndPoints, func(e metadata.Endpoint, r wire.RegisterBrokerRecordEndPoint) bool {
		return e == metadata.Endpoint{Name: r.Name, Host: r.Host, Port: r.Port, SecurityProtocol: r.SecurityProtocol}
	}) || !slices.EqualFunc(br.Features, rec.Features, func(f metadata.FeatureRange, r wire.RegisterBrokerRecordFeature) bool {
		return f == metadata.FeatureRange{Name: r.Name, Min: r.MinSupportedVersion, Max: r.MaxSupportedVersion}
	}) || !slices.Equal(br.LogDirs, rec.LogDirs) {
		return false
	}
	return (br.Rack == nil) == (rec.Rack == nil) && (br.Rack == nil || *br.Rack == *rec.Rack)
}

// heartbeat is BrokerHeartbeat (63), Kafka's BrokerHeartbeatManager state machine without
// its controlled-shutdown wait: in part 1 no other replica can take a partition over, so
// a broker that wants to shut down is fenced at once (its partitions leaderless) and told
// to go.
func (c *Core) heartbeat(latest *metadata.Image, now time.Time, req *kmsg.BrokerHeartbeatRequest) Result {
	br := latest.Brokers[req.BrokerID]
	if br == nil {
		return errorResult(req, kerr.StaleBrokerEpoch, fmt.Sprintf("broker %d is not registered", req.BrokerID))
	}
	if br.Epoch != req.BrokerEpoch {
		return errorResult(req, kerr.StaleBrokerEpoch, fmt.Sprintf("broker %d has epoch %d, not %d", br.ID, br.Epoch, req.BrokerEpoch))
	}
	s := c.sessions[br.ID]
	if s == nil || s.epoch != br.Epoch {
		s = &session{epoch: br.Epoch}
		c.sessions[br.ID] = s
	}
	s.lastContact, s.lastHeartbeat = now, now

	// A broker's epoch is the raft index of its registration: applied past it, the
	// broker has seen itself registered (Kafka's registerBrokerRecordOffset).
	caughtUp := req.CurrentMetadataOffset >= br.Epoch
	fenced, shutdown := br.Fenced, false
	var recs []wire.MetadataRecord
	switch {
	case br.Fenced && req.WantShutdown:
		shutdown = true
	case br.Fenced && !req.WantFence && caughtUp:
		recs, fenced = c.unfence(latest, br), false
	case !br.Fenced && (req.WantFence || req.WantShutdown):
		recs, fenced, shutdown = c.fence(latest, br), true, req.WantShutdown
	}
	return Result{Records: recs, Reply: func(uint64) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
		resp.SetVersion(req.GetVersion())
		resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown = caughtUp, fenced, shutdown
		return resp
	}}
}

// unregister is UnregisterBroker (64): what the broker leads becomes leaderless, then
// the registration goes.
func (c *Core) unregister(latest *metadata.Image, req *kmsg.UnregisterBrokerRequest) Result {
	br := latest.Brokers[req.BrokerID]
	if br == nil {
		return errorResult(req, kerr.BrokerIDNotRegistered, fmt.Sprintf("broker %d is not registered", req.BrokerID))
	}
	recs := append(c.resign(latest, br.ID), at(&wire.UnregisterBrokerRecord{BrokerID: br.ID, BrokerEpoch: br.Epoch}))
	delete(c.sessions, br.ID)
	return Result{Records: recs, Reply: func(uint64) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
		resp.SetVersion(req.GetVersion())
		return resp
	}}
}

// fence is Kafka's handleBrokerFenced for part 1: every partition br leads loses its
// leader (its data is on br only), then br is fenced.
func (c *Core) fence(latest *metadata.Image, br *metadata.Broker) []wire.MetadataRecord {
	return append(c.resign(latest, br.ID), at(&wire.BrokerRegistrationChangeRecord{BrokerID: br.ID, BrokerEpoch: br.Epoch, Fenced: 1}))
}

// unfence is Kafka's handleBrokerUnfenced for part 1: br is unfenced and leads every
// leaderless partition whose only replica it is.
func (c *Core) unfence(latest *metadata.Image, br *metadata.Broker) []wire.MetadataRecord {
	recs := []wire.MetadataRecord{at(&wire.BrokerRegistrationChangeRecord{BrokerID: br.ID, BrokerEpoch: br.Epoch, Fenced: -1})}
	return append(recs, c.leaderChanges(latest, func(p *metadata.Partition) int32 {
		if p.Leader == -1 && len(p.Replicas) == 1 && p.Replicas[0] == br.ID {
			return br.ID
		}
		return -2
	})...)
}

// resign takes every leadership of broker id away.
func (c *Core) resign(latest *metadata.Image, id int32) []wire.MetadataRecord {
	return c.leaderChanges(latest, func(p *metadata.Partition) int32 {
		if p.Leader == id {
			return -1
		}
		return -2
	})
}

// repairLeaders restores what fence and unfence keep, over every partition: a leader
// that is not an unfenced registered broker is removed, a leaderless partition whose only
// replica is one gets it as leader. Run at a term's first tick and after a batch that
// hit MaxPartitionChanges.
func (c *Core) repairLeaders(latest *metadata.Image) []wire.MetadataRecord {
	eligible := func(id int32) bool {
		br := latest.Brokers[id]
		return br != nil && !br.Fenced && !br.InControlledShutdown
	}
	return c.leaderChanges(latest, func(p *metadata.Partition) int32 {
		switch {
		case p.Leader >= 0 && !eligible(p.Leader):
			return -1
		case p.Leader == -1 && len(p.Replicas) == 1 && eligible(p.Replicas[0]):
			return p.Replicas[0]
		}
		return -2
	})
}

// leaderChanges is a PartitionChangeRecord for every partition whose new leader (-1
// none, -2 unchanged) leader returns, in topic-id order, at most MaxPartitionChanges of
// them; the rest are left to the next tick's rescan.
func (c *Core) leaderChanges(latest *metadata.Image, leader func(*metadata.Partition) int32) []wire.MetadataRecord {
	var recs []wire.MetadataRecord
	ids := slices.SortedFunc(maps.Keys(latest.TopicsByID), func(a, b metadata.TopicID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		for i, p := range latest.TopicsByID[id].Partitions {
			l := leader(p)
			if l == -2 {
				continue
			}
			if len(recs) == c.cfg.MaxPartitionChanges {
				c.rescan = true
				return recs
			}
			r := wire.NewPartitionChangeRecord()
			r.PartitionID, r.TopicID, r.Leader = int32(i), id, l
			recs = append(recs, at(&r))
		}
	}
	return recs
}

func sortedBrokerIDs(im *metadata.Image) []int32 { return slices.Sorted(maps.Keys(im.Brokers)) }
