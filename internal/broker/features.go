package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/server"
)

// Feature flags (KIP-584), as a single-node KRaft cluster keeps them: the finalized level of
// each feature lives in <data>/features.json, written atomically on every change with an
// epoch one higher (FinalizedFeaturesEpoch); UpdateFeatures changes them as Kafka 4.4's
// controller does (QuorumController.updateFeatures, FeatureControlManager.updateFeatures);
// ApiVersions reports them. Kafka has no DescribeFeatures RPC: Admin.describeFeatures and
// `kafka-features.sh describe` read ApiVersions.
//
// The features exactq knows:
//   - share.version, supported 0-1: 1 enables share groups (KIP-932); 0 disables them, and
//     the share RPCs then answer UNSUPPORTED_VERSION where KafkaApis does. Kafka 4.4 also
//     has level 2 (the dead-letter queue, KIP-1191), which exactq does not implement.
//   - transaction.version, supported 0-2 but finalized at 2 for good: exactq implements only
//     KIP-890's protocol, so UpdateFeatures refuses any other level.

const (
	shareVersionFeature       = "share.version"
	transactionVersionFeature = "transaction.version"
	featuresFile              = "features.json"
)

// featureSpec is one feature exactq supports: the level range it can run at and the level a
// new data directory starts with.
type featureSpec struct {
	name       string
	maxLevel   int16
	initial    int16
	fixedLevel bool // only the initial level is allowed (transaction.version)
}

var supportedFeatures = []featureSpec{
	{name: shareVersionFeature, maxLevel: 1, initial: 1},
	{name: transactionVersionFeature, maxLevel: transactionVersionLevel, initial: transactionVersionLevel, fixedLevel: true},
}

func featureSpecOf(name string) (featureSpec, bool) {
	for _, f := range supportedFeatures {
		if f.name == name {
			return f, true
		}
	}
	return featureSpec{}, false
}

// featureSet is the finalized feature levels; levels of 0 are not finalized (Kafka removes
// a feature set to 0 from the finalized map).
type featureSet struct {
	mu     sync.Mutex
	nodeID int32 // named in Kafka's "Local controller N ..." reasons
	path   string
	epoch  int64
	levels map[string]int16
}

type featuresJSON struct {
	Version int              `json:"version"`
	Epoch   int64            `json:"epoch"`
	Levels  map[string]int16 `json:"levels"`
}

// openFeatures reads <dir>/features.json, or starts with every supported feature at its
// initial level (epoch 1) when there is none yet; the file is written on the first change.
func openFeatures(dir string, nodeID int32) (*featureSet, error) {
	f := &featureSet{nodeID: nodeID, path: filepath.Join(dir, featuresFile), epoch: 1, levels: map[string]int16{}}
	b, err := os.ReadFile(f.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		for _, s := range supportedFeatures {
			if s.initial > 0 {
				f.levels[s.name] = s.initial
			}
		}
		return f, nil
	case err != nil:
		return nil, err
	}
	var j featuresJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("corrupt %s: %w", f.path, err)
	}
	f.epoch = j.Epoch
	for name, level := range j.Levels {
		s, ok := featureSpecOf(name)
		if !ok || level < 0 || level > s.maxLevel || (s.fixedLevel && level != s.initial) {
			return nil, fmt.Errorf("%s: %s=%d is not a level this broker supports", f.path, name, level)
		}
		if level > 0 {
			f.levels[name] = level
		}
	}
	// A fixed feature is always finalized at its level.
	for _, s := range supportedFeatures {
		if s.fixedLevel {
			f.levels[s.name] = s.initial
		}
	}
	return f, nil
}

// level returns a feature's finalized level (0 when not finalized).
func (f *featureSet) level(name string) int16 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.levels[name]
}

// snapshot returns the finalized levels and their epoch.
func (f *featureSet) snapshot() (map[string]int16, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.levels), f.epoch
}

// featureUpdate is one entry of an UpdateFeatures request.
type featureUpdate struct {
	name        string
	level       int16
	upgradeType int8 // 1 upgrade, 2 safe downgrade, 3 unsafe downgrade
}

// update applies UpdateFeatures (FeatureControlManager.updateFeatures): every update is
// validated in request order, the first error fails them all (INVALID_UPDATE_VERSION with
// Kafka's message); unless validateOnly, the new levels are made durable before returning.
// changed lists the features whose level changed.
func (f *featureSet) update(updates []featureUpdate, validateOnly bool) (changed map[string]int16, code int16, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := maps.Clone(f.levels)
	for _, u := range updates {
		if m := validateFeatureUpdate(u, f.levels[u.name], f.nodeID); m != "" {
			return nil, kerr.InvalidUpdateVersion.Code, fmt.Sprintf("Invalid update version %d for feature %s. %s", u.level, u.name, m)
		}
		if u.level > 0 {
			next[u.name] = u.level
		} else {
			delete(next, u.name)
		}
	}
	if validateOnly || maps.Equal(next, f.levels) {
		return nil, 0, ""
	}
	changed = map[string]int16{}
	for _, s := range supportedFeatures {
		if next[s.name] != f.levels[s.name] {
			changed[s.name] = next[s.name]
		}
	}
	j := featuresJSON{Version: 1, Epoch: f.epoch + 1, Levels: map[string]int16{}}
	for _, s := range supportedFeatures {
		j.Levels[s.name] = next[s.name]
	}
	if err := writeJSONAtomic(f.path, j); err != nil {
		return nil, kerr.FeatureUpdateFailed.Code, "Unable to update finalized features due to an unexpected server error: " + err.Error()
	}
	f.levels, f.epoch = next, j.Epoch
	return changed, 0, ""
}

// validateFeatureUpdate is FeatureControlManager.updateFeature's checks for one update
// against the current level, with Kafka's reasons; "" when valid.
func validateFeatureUpdate(u featureUpdate, current int16, nodeID int32) string {
	if u.upgradeType < 1 || u.upgradeType > 3 {
		return "The controller does not support the given upgrade type."
	}
	if u.level < 0 {
		return "A feature version cannot be less than 0."
	}
	s, known := featureSpecOf(u.name)
	switch {
	case !known && u.level > 0:
		// QuorumFeatures.reasonNotSupported for a feature nothing supports (range 0-0).
		return fmt.Sprintf("Local controller %d does not support this feature.", nodeID)
	case known && u.level > s.maxLevel:
		return fmt.Sprintf("Local controller %d only supports versions 0-%d", nodeID, s.maxLevel)
	}
	if u.level < current && u.upgradeType == 1 {
		return "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
	}
	if u.level > current && u.upgradeType != 1 {
		return "Can't downgrade to a newer version."
	}
	switch {
	case !known:
		// Feature.featureFromName fails in Feature.validateVersion.
		return "Feature " + u.name + " not found."
	case s.fixedLevel && u.level != s.initial:
		return fmt.Sprintf("exactq implements only %s %d (KIP-890 transactions); it cannot be changed.", s.name, s.initial)
	}
	return ""
}

// Features implements server.Handler: supported feature ranges and the finalized levels
// with their epoch, as DefaultApiVersionManager.apiVersionResponse reports them.
func (b *Broker) Features(resp *kmsg.ApiVersionsResponse) {
	levels, epoch := b.features.snapshot()
	for _, s := range supportedFeatures {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = s.name, 0, s.maxLevel
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
// (ControllerApis.handleUpdateFeatures, QuorumController.updateFeatures). As there, v0's
// AllowDowngrade is not read: the upgrade type is the v1+ field's default, upgrade.
// v0-v1 successes list every feature with error NONE and message "NONE"; v2 lists none.
func (b *Broker) handleUpdateFeatures(req *server.Request, r *kmsg.UpdateFeaturesRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	resp.Version = req.Version
	updates := make([]featureUpdate, 0, len(r.FeatureUpdates))
	for _, u := range r.FeatureUpdates {
		t := u.UpgradeType
		if req.Version < 1 {
			t = 1
		}
		updates = append(updates, featureUpdate{name: u.Feature, level: u.MaxVersionLevel, upgradeType: t})
	}
	changed, code, msg := b.features.update(updates, req.Version >= 1 && r.ValidateOnly)
	if code != 0 {
		resp.ErrorCode = code
		m := "The update failed for all features since the following feature had an error: " + msg
		resp.ErrorMessage = &m
		return server.Reply{Resp: resp}
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
	if req.Version <= 1 {
		none := "NONE" // Errors.NONE.message()
		for _, u := range r.FeatureUpdates {
			fr := kmsg.NewUpdateFeaturesResponseResult()
			fr.Feature, fr.ErrorMessage = u.Feature, &none
			resp.Results = append(resp.Results, fr)
		}
	}
	return server.Reply{Resp: resp}
}
