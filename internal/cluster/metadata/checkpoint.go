package metadata

import (
	"github.com/exactq/exactq/wire"
)

// Records is the image as records, the body of a checkpoint: applied in order to Empty()
// they give an image equal to im (TestCheckpointReplays). Deterministic: features,
// brokers, topics (each with its partitions and configs), then the other configs, the ACLs,
// the SCRAM credentials and the producer-id block, each in key order. Records are written at the highest version
// (every field the image keeps is in it).
func (im *Image) Records() []wire.MetadataRecord {
	var out []wire.MetadataRecord
	add := func(r wire.MetadataRecord) {
		r.SetVersion(r.MaxVersion())
		out = append(out, r)
	}
	if im.Cluster.ID != "" {
		add(&wire.ClusterRecord{ClusterID: im.Cluster.ID, CreatedMillis: im.Cluster.CreatedMillis})
	}
	for _, name := range sortedKeys(im.Features) {
		add(&wire.FeatureLevelRecord{Name: name, FeatureLevel: im.Features[name]})
	}
	for _, id := range sortedKeys(im.Brokers) {
		br := im.Brokers[id]
		r := wire.NewRegisterBrokerRecord()
		r.BrokerID, r.IncarnationID, r.BrokerEpoch, r.Rack = br.ID, br.IncarnationID, br.Epoch, br.Rack
		r.Fenced, r.InControlledShutdown, r.LogDirs, r.CordonedLogDirs = br.Fenced, br.InControlledShutdown, br.LogDirs, br.CordonedLogDirs
		for _, e := range br.Endpoints {
			r.EndPoints = append(r.EndPoints, wire.RegisterBrokerRecordEndPoint{Name: e.Name, Host: e.Host, Port: e.Port, SecurityProtocol: e.SecurityProtocol})
		}
		for _, f := range br.Features {
			r.Features = append(r.Features, wire.RegisterBrokerRecordFeature{Name: f.Name, MinSupportedVersion: f.Min, MaxSupportedVersion: f.Max})
		}
		add(&r)
	}
	configs := func(res ConfigResource) {
		m := im.Configs[res]
		for _, name := range sortedKeys(m) {
			v := m[name]
			add(&wire.ConfigRecord{ResourceType: res.Type, ResourceName: res.Name, Name: name, Value: &v})
		}
	}
	for _, name := range sortedKeys(im.TopicsByName) {
		t := im.TopicsByID[im.TopicsByName[name]]
		add(&wire.TopicRecord{Name: t.Name, TopicID: t.ID})
		for i, p := range t.Partitions {
			add(&wire.PartitionRecord{PartitionID: int32(i), TopicID: t.ID, Replicas: p.Replicas, ISR: p.ISR,
				RemovingReplicas: p.RemovingReplicas, AddingReplicas: p.AddingReplicas, Leader: p.Leader,
				LeaderRecoveryState: p.LeaderRecoveryState, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				Directories: p.Directories, EligibleLeaderReplicas: p.ELR, LastKnownELR: p.LastKnownELR})
		}
		configs(ConfigResource{ResourceTopic, t.Name})
	}
	for _, res := range sortedResources(im.Configs) {
		if res.Type != ResourceTopic {
			configs(res)
		}
	}
	im.securityRecords(add)
	if im.ProducerIDs.Next != 0 {
		add(&wire.ProducerIdsRecord{BrokerID: im.ProducerIDs.BrokerID, BrokerEpoch: im.ProducerIDs.BrokerEpoch, NextProducerID: im.ProducerIDs.Next})
	}
	return out
}

// Replay is the image of a checkpoint's records: Apply of them to Empty().
func Replay(records []wire.MetadataRecord) (*Image, error) {
	im, _, err := Apply(Empty(), records)
	return im, err
}
