package conformance

// UpdateFeatures (key 57) and the finalized features of ApiVersions, as a single-node KRaft
// cluster of Kafka 4.4 answers them (QuorumController.updateFeatures,
// FeatureControlManager.updateFeatures): what kafka-features.sh and Admin.updateFeatures /
// describeFeatures use.

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// featureUpdate is one entry of an UpdateFeatures request.
type featureUpdate struct {
	name        string
	level       int16
	upgradeType int8 // 1 upgrade, 2 safe downgrade, 3 unsafe downgrade
}

func (c *wireConn) updateFeatures(version int16, validateOnly bool, updates ...featureUpdate) *kmsg.UpdateFeaturesResponse {
	c.t.Helper()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.Version, req.ValidateOnly = version, validateOnly
	for _, u := range updates {
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = u.name, u.level, u.upgradeType
		fu.AllowDowngrade = u.upgradeType != 1
		req.FeatureUpdates = append(req.FeatureUpdates, fu)
	}
	return c.roundTrip(req).(*kmsg.UpdateFeaturesResponse)
}

// finalized returns the finalized feature levels and their epoch from ApiVersions v4.
func (c *wireConn) finalized() (map[string]int16, int64) {
	c.t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 4
	req.ClientSoftwareName, req.ClientSoftwareVersion = "conformance", "1.0"
	r := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
	wantCode(c.t, "ApiVersions", r.ErrorCode, nil)
	out := map[string]int16{}
	for _, f := range r.FinalizedFeatures {
		if f.MinVersionLevel != f.MaxVersionLevel {
			c.t.Fatalf("finalized %s: min level %d, max %d", f.Name, f.MinVersionLevel, f.MaxVersionLevel)
		}
		out[f.Name] = f.MaxVersionLevel
	}
	return out, r.FinalizedFeaturesEpoch
}

// setShareVersion sets share.version with UpdateFeatures v2 and checks it took.
func (c *wireConn) setShareVersion(level int16) {
	c.t.Helper()
	typ := int8(1)
	if level == 0 {
		typ = 2
	}
	r := c.updateFeatures(2, false, featureUpdate{"share.version", level, typ})
	wantCode(c.t, "UpdateFeatures share.version", r.ErrorCode, nil)
	if got, _ := c.finalized(); got["share.version"] != level {
		c.t.Fatalf("finalized share.version %d after setting it to %d", got["share.version"], level)
	}
}

// wantUpdateFails checks an UpdateFeatures refused with INVALID_UPDATE_VERSION and
// Kafka's message for reason.
func wantUpdateFails(t testing.TB, r *kmsg.UpdateFeaturesResponse, reason string) {
	t.Helper()
	wantCode(t, "UpdateFeatures", r.ErrorCode, kerr.InvalidUpdateVersion)
	want := "The update failed for all features since the following feature had an error: " + reason
	if r.ErrorMessage == nil || *r.ErrorMessage != want {
		t.Fatalf("UpdateFeatures message %s, want %q", deref(r.ErrorMessage), want)
	}
	if len(r.Results) != 0 {
		t.Fatalf("UpdateFeatures error with results %+v", r.Results)
	}
}

func TestUpdateFeatures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.dial()
	levels, epoch := c.finalized()
	if levels["share.version"] != 1 || levels["transaction.version"] != 2 || len(levels) != 2 {
		t.Fatalf("initial finalized features %v", levels)
	}

	wantUpdateFails(t, c.updateFeatures(2, false, featureUpdate{"share.version", 2, 1}),
		"Invalid update version 2 for feature share.version. Local controller 1 only supports versions 0-1")
	wantUpdateFails(t, c.updateFeatures(2, false, featureUpdate{"share.version", 0, 1}),
		"Invalid update version 0 for feature share.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
	wantUpdateFails(t, c.updateFeatures(2, false, featureUpdate{"no.such.version", 1, 1}),
		"Invalid update version 1 for feature no.such.version. Local controller 1 does not support this feature.")
	wantUpdateFails(t, c.updateFeatures(2, false, featureUpdate{"no.such.version", 0, 2}),
		"Invalid update version 0 for feature no.such.version. Feature no.such.version not found.")
	wantUpdateFails(t, c.updateFeatures(2, false, featureUpdate{"share.version", 1, 5}),
		"Invalid update version 1 for feature share.version. The controller does not support the given upgrade type.")
	wantUpdateFails(t, c.updateFeatures(2, false, featureUpdate{"share.version", -1, 2}),
		"Invalid update version -1 for feature share.version. A feature version cannot be less than 0.")
	// exactq implements only transaction.version 2.
	r := c.updateFeatures(2, false, featureUpdate{"transaction.version", 1, 2})
	wantCode(t, "transaction.version 1", r.ErrorCode, kerr.InvalidUpdateVersion)
	if r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "exactq implements only transaction.version 2") {
		t.Fatalf("transaction.version 1: %s", deref(r.ErrorMessage))
	}
	// One bad update fails the whole request.
	wantUpdateFails(t, c.updateFeatures(2, false, featureUpdate{"share.version", 0, 2}, featureUpdate{"transaction.version", 3, 1}),
		"Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2")
	// ValidateOnly (v1+) checks and changes nothing; v0-v1 list each feature with "NONE".
	r = c.updateFeatures(1, true, featureUpdate{"share.version", 0, 2})
	wantCode(t, "validate-only downgrade", r.ErrorCode, nil)
	if len(r.Results) != 1 || r.Results[0].Feature != "share.version" || r.Results[0].ErrorCode != 0 || deref(r.Results[0].ErrorMessage) != `"NONE"` {
		t.Fatalf("v1 results %+v", r.Results)
	}
	if got, ep := c.finalized(); got["share.version"] != 1 || ep != epoch {
		t.Fatalf("after failed and validate-only updates: %v epoch %d, want share.version 1 epoch %d", got, ep, epoch)
	}
	// A no-op (the current levels) succeeds without a new epoch.
	r = c.updateFeatures(2, false, featureUpdate{"share.version", 1, 1}, featureUpdate{"transaction.version", 2, 1})
	wantCode(t, "no-op update", r.ErrorCode, nil)
	if len(r.Results) != 0 {
		t.Fatalf("v2 results %+v, want none", r.Results)
	}
	if _, ep := c.finalized(); ep != epoch {
		t.Fatalf("epoch %d after a no-op, want %d", ep, epoch)
	}
	// v0 has no upgrade type; as in Kafka, AllowDowngrade is not read, so a downgrade fails.
	wantUpdateFails(t, c.updateFeatures(0, false, featureUpdate{"share.version", 0, 2}),
		"Invalid update version 0 for feature share.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")

	// A real downgrade: share.version leaves the finalized features, the epoch goes up,
	// and both survive a restart. The epoch is the metadata log's offset, as KRaft reports
	// it: it grows with every entry (a restart's new raft term appends one), not by one
	// per feature change.
	c.setShareVersion(0)
	levels, ep := c.finalized()
	if _, ok := levels["share.version"]; ok || levels["transaction.version"] != 2 || ep <= epoch {
		t.Fatalf("after disabling share groups: %v epoch %d (before: %d)", levels, ep, epoch)
	}
	e.tb.Restart()
	c = e.dial()
	levels, ep2 := c.finalized()
	if len(levels) != 1 || ep2 < ep {
		t.Fatalf("after restart: %v epoch %d, want only transaction.version at epoch %d or later", levels, ep2, ep)
	}
	c.setShareVersion(1)
	if _, ep3 := c.finalized(); ep3 <= ep2 {
		t.Fatalf("epoch %d after re-enabling, want above %d", ep3, ep2)
	}
}
