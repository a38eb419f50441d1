package broker

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
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
// finalized: Kafka removes a feature set to 0); the controller changes them.
type featureSet struct {
	b *Broker
}

func openFeatures(b *Broker) *featureSet {
	return &featureSet{b: b}
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

// applyFeatures is the publisher's part for finalized features: a level that changed is
// logged (not at start-up, logged reports the first image), and share groups switched off
// (SharePartitionManager.onShareVersionToggle) drop their share sessions and share
// partitions; acquired records come back when share groups are enabled again.
func (b *Broker) applyFeatures(prev, next *metadata.Image, logged bool) {
	if !logged {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(next.Features)) {
		if level := next.Features[name]; level != prev.Features[name] {
			b.logger.Info("finalized feature level changed", "feature", name, "level", level)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(prev.Features)) {
		if _, ok := next.Features[name]; !ok {
			b.logger.Info("finalized feature level changed", "feature", name, "level", 0)
		}
	}
	if prev.Features[shareVersionFeature] >= 1 && next.Features[shareVersionFeature] < 1 {
		if s := b.loadedShares(); s != nil {
			s.fetch.DropAll()
		}
	}
}
