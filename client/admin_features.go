package client

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FeatureUpgradeType is how UpdateFeatures may move a feature's level (KIP-584, KIP-778).
type FeatureUpgradeType int8

const (
	// FeatureUpgrade only raises levels.
	FeatureUpgrade FeatureUpgradeType = 1
	// FeatureSafeDowngrade lowers a level where no metadata is lost.
	FeatureSafeDowngrade FeatureUpgradeType = 2
	// FeatureUnsafeDowngrade lowers a level even if metadata is lost.
	FeatureUnsafeDowngrade FeatureUpgradeType = 3
)

// FeatureUpdate is one feature's new finalized level; level 0 with a downgrade type removes
// the feature (share.version 0 disables share groups).
type FeatureUpdate struct {
	Feature string
	Level   int16
	Type    FeatureUpgradeType
}

// UpdateFeatures changes finalized feature levels (UpdateFeatures, what `kafka-features.sh
// upgrade|downgrade` sends); with validateOnly the broker only checks them. All or none
// apply: an invalid update fails the request with kerr.InvalidUpdateVersion and the
// broker's reason.
func (a *Admin) UpdateFeatures(ctx context.Context, validateOnly bool, updates ...FeatureUpdate) error {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.TimeoutMillis = a.timeoutMillis()
	req.ValidateOnly = validateOnly
	for _, u := range updates {
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = u.Feature, u.Level, int8(u.Type)
		fu.AllowDowngrade = u.Type != FeatureUpgrade // v0
		req.FeatureUpdates = append(req.FeatureUpdates, fu)
	}
	resp, err := a.cl.do(ctx, anyBroker(), req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.UpdateFeaturesResponse)
	if err := kerrWithMessage(r.ErrorCode, r.ErrorMessage); err != nil {
		return err
	}
	for _, fr := range r.Results { // v0-v1
		if err := kerrWithMessage(fr.ErrorCode, nil); err != nil {
			return fmt.Errorf("%s: %w", fr.Feature, err)
		}
	}
	return nil
}

// Features is what a broker reports of its features (ApiVersions v3+; Kafka has no other
// describe RPC): the level range it supports and the finalized levels with their epoch.
type Features struct {
	Supported map[string][2]int16 // feature -> {min, max} level
	Finalized map[string]int16    // feature -> level; absent means level 0
	Epoch     int64
}

// DescribeFeatures asks a broker for its features, as Admin.describeFeatures and
// `kafka-features.sh describe` do.
func (a *Admin) DescribeFeatures(ctx context.Context) (Features, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = softwareName, softwareVersion
	resp, err := a.cl.do(ctx, anyBroker(), req)
	if err != nil {
		return Features{}, err
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if err := kerrWithMessage(r.ErrorCode, nil); err != nil {
		return Features{}, err
	}
	f := Features{Supported: map[string][2]int16{}, Finalized: map[string]int16{}, Epoch: r.FinalizedFeaturesEpoch}
	for _, s := range r.SupportedFeatures {
		f.Supported[s.Name] = [2]int16{s.MinVersion, s.MaxVersion}
	}
	for _, ff := range r.FinalizedFeatures {
		f.Finalized[ff.Name] = ff.MaxVersionLevel
	}
	return f, nil
}
