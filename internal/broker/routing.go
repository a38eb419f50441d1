package broker

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/metadata"
)

// Routing (docs/architecture.md, "Placement and routing (part 1)"): a node opens the logs
// of the partitions it holds a replica of (the image's assignment) and serves a partition
// only while the image names it the leader; a request for any other partition gets
// NOT_LEADER_OR_FOLLOWER, with the leader and its endpoint where the request's version has
// room for them (KIP-951), so a client need not ask Metadata first. Leader epochs are the
// image's: Metadata, Fetch, ListOffsets and the epoch stamped on appended batches agree.
//
// A lone voter (the zero-config node) leads every partition it has, whatever the image
// says: nobody else can, and a controlled shutdown leaves every partition leaderless in
// the image until the next start's unfence, which a full disk may never commit; serving
// on a full disk is what a single node did before the metadata log. Its leader epochs are
// still the image's, which grow by two at every restart (leaderless at the controlled
// shutdown or the new incarnation's registration, leader again at the unfence), as
// KRaft's do with one replica; clients take a higher epoch from Metadata as any leader
// change.

// clustered reports whether this node has other voters (and so other brokers).
func (b *Broker) clustered() bool { return b.meta != nil && b.meta.Clustered() }

// leaderOf is the leader of an image partition as this node serves it.
func (b *Broker) leaderOf(ip *metadata.Partition) int32 {
	if !b.clustered() {
		return b.cfg.NodeID
	}
	return ip.Leader
}

// hosts reports whether this node holds a replica of ip, so its log is opened here.
func (b *Broker) hosts(ip *metadata.Partition) bool {
	return !b.clustered() || slices.Contains(ip.Replicas, b.cfg.NodeID)
}

// route is what serving one partition comes to: the partition, or the error to answer and
// the leader to name in the hint (-1 none).
type route struct {
	p             *partition
	err           *kerr.Error
	leader, epoch int32
}

// routeTo routes partition i of t (nil: unknown) by the image the registry matches;
// missing is the error for an unknown topic or partition.
func (b *Broker) routeTo(t *topic, i int32, missing *kerr.Error) route {
	none := route{err: missing, leader: -1, epoch: -1}
	if t == nil {
		return none
	}
	ip := imagePartition(b.pub.image(), t.id, i)
	if ip == nil {
		return none
	}
	leader := b.leaderOf(ip)
	if leader != b.cfg.NodeID {
		return route{err: kerr.NotLeaderForPartition, leader: leader, epoch: ip.LeaderEpoch}
	}
	p := t.partition(i)
	if p == nil {
		// Its log is offline here (see publisher).
		return route{err: kerr.KafkaStorageError, leader: -1, epoch: -1}
	}
	return route{p: p, leader: leader, epoch: ip.LeaderEpoch}
}

// imagePartition is partition i of topic id in im, nil when im has no such partition.
func imagePartition(im *metadata.Image, id metadata.TopicID, i int32) *metadata.Partition {
	it := im.TopicsByID[id]
	if it == nil || i < 0 || int(i) >= len(it.Partitions) {
		return nil
	}
	return it.Partitions[i]
}

// checkEpoch answers a client's CurrentLeaderEpoch (-1: not given) against the route's.
func (r route) checkEpoch(clientEpoch int32) *kerr.Error {
	switch {
	case clientEpoch < 0 || clientEpoch == r.epoch:
		return nil
	case clientEpoch < r.epoch:
		return kerr.FencedLeaderEpoch
	default:
		return kerr.UnknownLeaderEpoch
	}
}

// hinted reports whether an error carries KIP-951's leader hint.
func (r route) hinted() bool {
	return r.err == kerr.NotLeaderForPartition || r.err == kerr.FencedLeaderEpoch
}

// endpoint is a broker as Metadata and the KIP-951 hints give it out.
type endpoint struct {
	id     int32
	host   string
	port   int32
	rack   *string
	fenced bool
}

// brokers are the brokers clients are given: a lone voter itself (its advertised address,
// registered or not), a cluster node every unfenced registered broker with its PLAINTEXT
// endpoint (advertised.listeners), in id order, as KRaft's brokers answer.
func (b *Broker) brokers() []endpoint { return b.brokersFenced(false) }

// brokersFenced is brokers, with the fenced ones too (marked) when fenced is set
// (DescribeCluster v2's IncludeFencedBrokers, KIP-1073).
func (b *Broker) brokersFenced(fenced bool) []endpoint {
	if !b.clustered() {
		var rack *string
		if b.cfg.Rack != "" {
			r := b.cfg.Rack
			rack = &r
		}
		return []endpoint{{id: b.cfg.NodeID, host: b.cfg.AdvertisedHost, port: b.cfg.AdvertisedPort, rack: rack}}
	}
	im := b.pub.image()
	var out []endpoint
	for _, id := range slices.Sorted(maps.Keys(im.Brokers)) {
		br := im.Brokers[id]
		if br.Fenced && !fenced {
			continue
		}
		if e, ok := endpointOf(br); ok {
			e.fenced = br.Fenced
			out = append(out, e)
		}
	}
	return out
}

// endpointOf is a registered broker's client endpoint.
func endpointOf(br *metadata.Broker) (endpoint, bool) {
	for _, e := range br.Endpoints {
		if e.Name == "PLAINTEXT" {
			return endpoint{id: br.ID, host: e.Host, port: int32(e.Port), rack: br.Rack}, true
		}
	}
	return endpoint{}, false
}

// leaderEndpoints are the endpoints of the leaders named in hints, for a response's
// NodeEndpoints (kmsg's Brokers), in id order.
func (b *Broker) leaderEndpoints(leaders map[int32]bool) []endpoint {
	var out []endpoint
	for _, e := range b.brokers() {
		if leaders[e.id] {
			out = append(out, e)
		}
	}
	return out
}

// controllerID is Metadata's and DescribeCluster's ControllerId: this node for a lone
// voter, the raft leader a cluster node knows of (-1 while an election is on).
func (b *Broker) controllerID() int32 {
	if !b.clustered() {
		return b.cfg.NodeID
	}
	id, ok := b.meta.Controller()
	if !ok {
		return -1
	}
	return id
}

// partitionState is one partition as Metadata and DescribeTopicPartitions report it.
type partitionState struct {
	err                    *kerr.Error
	leader, epoch          int32
	replicas, isr, offline []int32
	elr, lastKnownELR      []int32
}

// stateOf reports partition i of t from the image the registry matches: a partition
// without a leader, or led here with its log offline, is LEADER_NOT_AVAILABLE with leader
// -1 and its unavailable replicas offline.
func (b *Broker) stateOf(t *topic, i int32, ip *metadata.Partition) partitionState {
	s := partitionState{leader: b.leaderOf(ip), epoch: ip.LeaderEpoch, replicas: ip.Replicas, isr: ip.ISR,
		offline: []int32{}, elr: ip.ELR, lastKnownELR: ip.LastKnownELR}
	if !b.clustered() {
		s.replicas, s.isr = []int32{b.cfg.NodeID}, []int32{b.cfg.NodeID}
	}
	im := b.pub.image()
	for _, r := range s.replicas {
		if br := im.Brokers[r]; b.clustered() && (br == nil || br.Fenced) {
			s.offline = append(s.offline, r)
		}
	}
	switch {
	case s.leader == b.cfg.NodeID && t.partition(i) == nil:
		// Its log could not be opened here: as Kafka reports a partition whose only
		// replica is on an offline log directory.
		s.err, s.leader, s.offline = kerr.LeaderNotAvailable, -1, []int32{b.cfg.NodeID}
	case s.leader < 0:
		s.err = kerr.LeaderNotAvailable
	}
	return s
}

// produceHint fills a produce partition's KIP-951 hint (v10+).
func produceHint(r route, version int16, sp *kmsg.ProduceResponseTopicPartition, leaders map[int32]bool) {
	if version < 10 || !r.hinted() {
		return
	}
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = r.leader, r.epoch
	if r.leader >= 0 {
		leaders[r.leader] = true
	}
}

// produceEndpoints sets a produce response's NodeEndpoints (v10+) for the hinted leaders.
func (b *Broker) produceEndpoints(resp *kmsg.ProduceResponse, leaders map[int32]bool) {
	for _, e := range b.leaderEndpoints(leaders) {
		pb := kmsg.NewProduceResponseBroker()
		pb.NodeID, pb.Host, pb.Port, pb.Rack = e.id, e.host, e.port, e.rack
		resp.Brokers = append(resp.Brokers, pb)
	}
}

// fetchEndpoints sets a fetch response's NodeEndpoints (v16+) for the hinted leaders.
func (b *Broker) fetchEndpoints(resp *kmsg.FetchResponse, leaders map[int32]bool) {
	for _, e := range b.leaderEndpoints(leaders) {
		fb := kmsg.NewFetchResponseBroker()
		fb.NodeID, fb.Host, fb.Port, fb.Rack = e.id, e.host, e.port, e.rack
		resp.Brokers = append(resp.Brokers, fb)
	}
}

// leaderEpochOf is partition i of t's leader epoch in the image the registry matches, -1
// when unknown.
func (b *Broker) leaderEpochOf(t *topic, i int32) int32 {
	if t == nil {
		return -1
	}
	if ip := imagePartition(b.pub.image(), t.id, i); ip != nil {
		return ip.LeaderEpoch
	}
	return -1
}
