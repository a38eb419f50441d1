package broker

import (
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/server"
)

// Feature flags (KIP-584), as KRaft keeps them: the finalized level of each feature is a
// FeatureLevelRecord in the metadata log, and FinalizedFeaturesEpoch is the index of the
// image it is read from (KRaft reports the metadata offset), so it grows with every
// change. UpdateFeatures follows Kafka 4.4's controller (internal/cluster/admin has the
// supported features and the rules); ApiVersions reports them. Kafka has no
// DescribeFeatures RPC: Admin.describeFeatures and `kafka-features.sh describe` read
// ApiVersions.

const shareVersionFeature = admin.ShareVersionFeature

// featureSet reads the finalized levels from the metadata image (a level of 0 is not
// finalized: Kafka removes a feature set to 0) and changes them through the log.
type featureSet struct {
	mu     sync.Mutex // serializes updates: each is checked against the levels before it
	nodeID int32      // named in Kafka's "Local controller N ..." reasons
	b      *Broker
}

func openFeatures(b *Broker) *featureSet {
	return &featureSet{nodeID: b.cfg.NodeID, b: b}
}

// level returns a feature's finalized level (0 when not finalized).
func (f *featureSet) level(name string) int16 {
	im, _ := f.b.image()
	return im.Features[name]
}

// snapshot returns the finalized levels (not to be changed) and their epoch.
func (f *featureSet) snapshot() (map[string]int16, int64) {
	im, idx := f.b.image()
	return im.Features, int64(idx)
}

// Features implements server.Handler: supported feature ranges and the finalized levels
// with their epoch, as DefaultApiVersionManager.apiVersionResponse reports them.
func (b *Broker) Features(resp *kmsg.ApiVersionsResponse) {
	levels, epoch := b.features.snapshot()
	for _, s := range admin.SupportedFeatures {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = s.Name, 0, s.MaxLevel
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	}
	for _, name := range slices.Sorted(maps.Keys(levels)) {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = name, levels[name], levels[name]
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
	resp.FinalizedFeaturesEpoch = epoch
}

// shareGroupsEnabled is KafkaApis.isShareGroupProtocolEnabled: share.version >= 1.
func (b *Broker) shareGroupsEnabled() bool {
	return b.features.level(shareVersionFeature) >= 1
}

// handleUpdateFeatures serves UpdateFeatures v0-v2 as a single-node KRaft controller
// (ControllerApis.handleUpdateFeatures, QuorumController.updateFeatures; the rules are
// admin.UpdateFeatures'): the new levels are in the metadata log before it answers.
func (b *Broker) handleUpdateFeatures(req *server.Request, r *kmsg.UpdateFeaturesRequest) server.Reply {
	f := b.features
	f.mu.Lock()
	defer f.mu.Unlock()
	r.Version = req.Version
	im, _ := b.image()
	recs, changed, resp := admin.UpdateFeatures(im, r, f.nodeID)
	if len(recs) > 0 {
		if _, err := b.propose(recs...); err != nil {
			resp = r.ResponseKind().(*kmsg.UpdateFeaturesResponse)
			resp.Version = req.Version
			resp.ErrorCode = kerr.FeatureUpdateFailed.Code
			m := "The update failed for all features since the following feature had an error: " +
				"Unable to update finalized features due to an unexpected server error: " + err.Error()
			resp.ErrorMessage = &m
			return server.Reply{Resp: resp}
		}
	}
	for name, level := range changed {
		b.logger.Info("finalized feature level changed", "feature", name, "level", level)
	}
	if level, ok := changed[shareVersionFeature]; ok && level < 1 {
		// SharePartitionManager.onShareVersionToggle: share sessions and share partitions
		// are dropped; acquired records come back when share groups are enabled again.
		if s := b.loadedShares(); s != nil {
			s.fetch.DropAll()
		}
	}
	return server.Reply{Resp: resp}
}
