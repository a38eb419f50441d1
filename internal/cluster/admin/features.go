package admin

import (
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
)

// Feature flags (KIP-584) as exactq finalizes them: the image's Features map holds each
// finalized level (a feature at 0 is not finalized, KRaft's rule), FeatureLevelRecords
// change it. The rules are Kafka 4.4's controller's (FeatureControlManager.updateFeatures),
// the same internal/broker applies to features.json today.
//
// The features exactq knows:
//   - share.version, supported 0-1: 1 enables share groups (KIP-932), 0 disables them.
//     Kafka 4.4's level 2 (KIP-1191, the dead-letter queue) is not implemented.
//   - transaction.version, supported 0-2 but finalized at 2 for good: exactq implements
//     only KIP-890's protocol, so no other level is accepted.
const (
	ShareVersionFeature       = "share.version"
	TransactionVersionFeature = "transaction.version"
)

// FeatureSpec is one feature exactq supports: the highest level it runs at and the level a
// new cluster starts with.
type FeatureSpec struct {
	Name     string
	MaxLevel int16
	Initial  int16
	Fixed    bool // only Initial is allowed (transaction.version)
}

// SupportedFeatures is every feature exactq supports, in the order ApiVersions lists them.
var SupportedFeatures = []FeatureSpec{
	{Name: ShareVersionFeature, MaxLevel: 1, Initial: 1},
	{Name: TransactionVersionFeature, MaxLevel: 2, Initial: 2, Fixed: true},
}

// FeatureSpecOf returns the spec of a supported feature.
func FeatureSpecOf(name string) (FeatureSpec, bool) {
	for _, f := range SupportedFeatures {
		if f.Name == name {
			return f, true
		}
	}
	return FeatureSpec{}, false
}

// InitialFeatures are the FeatureLevelRecords of a new cluster: every supported feature at
// its initial level, in name order (levels of 0 are not written: KRaft has no record for a
// feature that is not finalized).
func InitialFeatures() []wire.MetadataRecord {
	levels := map[string]int16{}
	for _, s := range SupportedFeatures {
		levels[s.Name] = s.Initial
	}
	return FeatureRecords(levels)
}

// FeatureRecords is a FeatureLevelRecord per finalized level (above 0), in name order.
func FeatureRecords(levels map[string]int16) []wire.MetadataRecord {
	var out []wire.MetadataRecord
	for _, name := range slices.Sorted(maps.Keys(levels)) {
		if levels[name] > 0 {
			out = append(out, versioned(&wire.FeatureLevelRecord{Name: name, FeatureLevel: levels[name]}))
		}
	}
	return out
}

// versioned sets r to the highest version wire encodes, as metadata.Image.Records does.
// (Record versions are to be gated by metadata.version once exactq finalizes one.)
func versioned(r wire.MetadataRecord) wire.MetadataRecord {
	r.SetVersion(r.MaxVersion())
	return r
}

// CheckFeatureLevel says whether a finalized level read from a pre-cluster features.json
// or the log is one exactq can run at: "" if so, else why not.
func CheckFeatureLevel(name string, level int16) string {
	s, ok := FeatureSpecOf(name)
	if !ok || level < 0 || level > s.MaxLevel || (s.Fixed && level != s.Initial) {
		return fmt.Sprintf("%s=%d is not a level this broker supports", name, level)
	}
	return ""
}

// FeatureUpdate is one entry of an UpdateFeatures request.
type FeatureUpdate struct {
	Name        string
	Level       int16
	UpgradeType int8 // 1 upgrade, 2 safe downgrade, 3 unsafe downgrade
}

// UpdateFeatures is UpdateFeatures v0-v2 (r.Version set) against im, as a KRaft
// controller answers it (ControllerApis.handleUpdateFeatures): the FeatureLevelRecords of
// the levels that change, and the response. v0's AllowDowngrade is not read: the upgrade
// type is the v1+ field's default, upgrade; ValidateOnly is v1+. Every update is checked
// in request order against the current level and the first that fails fails them all
// (INVALID_UPDATE_VERSION with Kafka's message); v0-v1 successes list every feature with
// error NONE and message "NONE", v2 lists none. nodeID is named in Kafka's "Local
// controller N" reasons; changed maps each changed feature to its new level (share.version
// going to 0 drops the share sessions).
func UpdateFeatures(im *metadata.Image, r *kmsg.UpdateFeaturesRequest, nodeID int32) (recs []wire.MetadataRecord, changed map[string]int16, resp *kmsg.UpdateFeaturesResponse) {
	resp = r.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	resp.Version = r.Version
	updates := make([]FeatureUpdate, 0, len(r.FeatureUpdates))
	for _, u := range r.FeatureUpdates {
		t := u.UpgradeType
		if r.Version < 1 {
			t = 1
		}
		updates = append(updates, FeatureUpdate{Name: u.Feature, Level: u.MaxVersionLevel, UpgradeType: t})
	}
	recs, changed, code, msg := FeatureChanges(im, updates, r.Version >= 1 && r.ValidateOnly, nodeID)
	if code != 0 {
		resp.ErrorCode = code
		m := "The update failed for all features since the following feature had an error: " + msg
		resp.ErrorMessage = &m
		return nil, nil, resp
	}
	if r.Version <= 1 {
		none := "NONE" // Errors.NONE.message()
		for _, u := range r.FeatureUpdates {
			fr := kmsg.NewUpdateFeaturesResponseResult()
			fr.Feature, fr.ErrorMessage = u.Feature, &none
			resp.Results = append(resp.Results, fr)
		}
	}
	return recs, changed, resp
}

// FeatureChanges applies feature updates to im's levels (FeatureControlManager.
// updateFeatures): the records of the levels that change (none when validateOnly or when
// nothing changes) and the changed levels, or the first update's error code and reason.
func FeatureChanges(im *metadata.Image, updates []FeatureUpdate, validateOnly bool, nodeID int32) (recs []wire.MetadataRecord, changed map[string]int16, code int16, msg string) {
	next := maps.Clone(im.Features)
	for _, u := range updates {
		if m := checkFeatureUpdate(u, im.Features[u.Name], nodeID); m != "" {
			return nil, nil, kerr.InvalidUpdateVersion.Code, fmt.Sprintf("Invalid update version %d for feature %s. %s", u.Level, u.Name, m)
		}
		if u.Level > 0 {
			next[u.Name] = u.Level
		} else {
			delete(next, u.Name)
		}
	}
	if validateOnly || maps.Equal(next, im.Features) {
		return nil, nil, 0, ""
	}
	changed = map[string]int16{}
	for _, s := range SupportedFeatures {
		if next[s.Name] != im.Features[s.Name] {
			changed[s.Name] = next[s.Name]
			recs = append(recs, versioned(&wire.FeatureLevelRecord{Name: s.Name, FeatureLevel: next[s.Name]}))
		}
	}
	return recs, changed, 0, ""
}

// checkFeatureUpdate is FeatureControlManager.updateFeature's checks of one update
// against the current level, with Kafka's reasons; "" when valid.
func checkFeatureUpdate(u FeatureUpdate, current int16, nodeID int32) string {
	if u.UpgradeType < 1 || u.UpgradeType > 3 {
		return "The controller does not support the given upgrade type."
	}
	if u.Level < 0 {
		return "A feature version cannot be less than 0."
	}
	s, known := FeatureSpecOf(u.Name)
	switch {
	case !known && u.Level > 0:
		// QuorumFeatures.reasonNotSupported for a feature nothing supports (range 0-0).
		return fmt.Sprintf("Local controller %d does not support this feature.", nodeID)
	case known && u.Level > s.MaxLevel:
		return fmt.Sprintf("Local controller %d only supports versions 0-%d", nodeID, s.MaxLevel)
	}
	if u.Level < current && u.UpgradeType == 1 {
		return "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
	}
	if u.Level > current && u.UpgradeType != 1 {
		return "Can't downgrade to a newer version."
	}
	switch {
	case !known:
		// Feature.featureFromName fails in Feature.validateVersion.
		return "Feature " + u.Name + " not found."
	case s.Fixed && u.Level != s.Initial:
		return fmt.Sprintf("exactq implements only %s %d (KIP-890 transactions); it cannot be changed.", s.Name, s.Initial)
	}
	return ""
}
