package share

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/share/sharestate"
)

// ShareAcknowledge serves ShareAcknowledge v1-v2 (KafkaApis.handleShareAcknowledgeRequest,
// SharePartitionManager.acknowledgeSessionUpdate and acknowledge). Acknowledgements are
// applied in memory at once and answered only when their store writes are durable, so the
// answer is always the func, which the broker runs in server.Reply.Wait; a request whose
// every partition fails validation is answered at once. With epoch -1 the session is then
// closed and the member's remaining records are released.
func (m *Manager) ShareAcknowledge(ctx context.Context, connID uint64, version int16, req *kmsg.ShareAcknowledgeRequest) (kmsg.Response, func() kmsg.Response) {
	req.Version = version
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := func(e *kerr.Error) (kmsg.Response, func() kmsg.Response) {
		resp.ErrorCode = e.Code
		return resp, nil
	}
	if e := requestError(version, req.GroupID, req.MemberID); e != nil {
		return fail(e)
	}
	group, member := *req.GroupID, *req.MemberID
	key := sessionKey{group, member}
	m.mu.Lock()
	serr := m.sessions.ackContext(key, req.ShareSessionEpoch)
	m.mu.Unlock()
	if serr != nil {
		return fail(serr)
	}
	renew := version >= 2 && req.IsRenewAck
	var acks []ackResult
	pending := false
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			a := m.acknowledge(group, member, tp{t.TopicID, p.Partition}, ackAckBatches(p.AcknowledgementBatches), version >= 2, renew)
			pending = pending || a.w != nil
			acks = append(acks, a)
		}
	}
	final := req.ShareSessionEpoch == finalEpoch
	lockMs := int32(m.cfg.Groups(group).partitionConfig().RecordLockDurationMs)
	finish := func() kmsg.Response {
		m.settle(key, acks, final)
		resp.AcquisitionLockTimeoutMillis = lockMs // v2+; kmsg drops it for v1
		topicIdx := make(map[[16]byte]int)
		for _, a := range acks {
			ti, ok := topicIdx[a.t.topicID]
			if !ok {
				rt := kmsg.NewShareAcknowledgeResponseTopic()
				rt.TopicID = a.t.topicID
				resp.Topics = append(resp.Topics, rt)
				ti = len(resp.Topics) - 1
				topicIdx[a.t.topicID] = ti
			}
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = a.t.partition
			rp.ErrorCode = errCode(a.err)
			rp.ErrorMessage = errMessage(a.err)
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, rp)
		}
		return resp
	}
	if !pending && !final {
		return finish(), nil
	}
	return nil, finish
}

// ackResult is one partition's acknowledgement: an immediate error, or the write that
// makes it durable.
type ackResult struct {
	t   tp
	err error
	w   *write
}

// wait turns the pending write into the partition's result.
func (a *ackResult) wait() {
	if a.w != nil {
		if err := a.w.wait(); err != nil {
			a.err = err
		}
		a.w = nil
	}
}

// acknowledge applies one partition's acknowledgements (Kafka's
// validateAcknowledgementBatches, then SharePartition.acknowledge) and starts their
// write. Ownership is checked by member id only: neither the session nor the group
// assignment is consulted, as in Kafka (gotcha G13).
func (m *Manager) acknowledge(group, member string, t tp, batches []sharepartition.AckBatch, renewSupported, isRenewAck bool) ackResult {
	r := ackResult{t: t}
	if _, ok := m.logs.TopicName(t.topicID); !ok {
		r.err = kerr.UnknownTopicID
		return r
	}
	if len(batches) == 0 {
		return r
	}
	if err := sharepartition.ValidateAckBatches(batches, renewSupported, isRenewAck); err != nil {
		r.err = kerr.InvalidRequest
		return r
	}
	key := sharestate.Key{GroupID: group, TopicID: t.topicID, Partition: t.partition}
	r.w, r.err = m.step(key, func(sp *sharepartition.SharePartition) (sharepartition.Update, error) {
		return sp.Acknowledge(m.nowMs(), member, batches)
	})
	return r
}

// shareError maps a sharepartition error to its Kafka error.
func shareError(err error) *kerr.Error {
	code := sharepartition.ErrorCode(err)
	if ke := kerr.ErrorForCode(code); ke != nil {
		if k, ok := ke.(*kerr.Error); ok {
			return k
		}
	}
	return kerr.UnknownServerError
}

func fetchAckBatches(in []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) []sharepartition.AckBatch {
	out := make([]sharepartition.AckBatch, len(in))
	for i, b := range in {
		out[i] = sharepartition.AckBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, Types: ackTypes(b.AcknowledgeTypes)}
	}
	return out
}

func ackAckBatches(in []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) []sharepartition.AckBatch {
	out := make([]sharepartition.AckBatch, len(in))
	for i, b := range in {
		out[i] = sharepartition.AckBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, Types: ackTypes(b.AcknowledgeTypes)}
	}
	return out
}

func ackTypes(in []int8) []sharepartition.AckType {
	out := make([]sharepartition.AckType, len(in))
	for i, t := range in {
		out[i] = sharepartition.AckType(t)
	}
	return out
}

// closeSession removes a share session and releases the member's acquired records
// (Kafka's releaseSession). With wait it returns once the releases are durable.
func (m *Manager) closeSession(key sessionKey, wait bool) {
	m.mu.Lock()
	m.sessions.remove(key)
	m.mu.Unlock()
	ws := m.releaseMember(key.group, key.member)
	if wait {
		for _, w := range ws {
			_ = w.wait()
		}
	}
}

// releaseMember gives back every record the member holds on this broker's live share
// partitions of the group (SharePartition.ReleaseMember): AVAILABLE again, or ARCHIVED at
// the delivery limit, delivery counts kept. Kafka releases the session's partitions only;
// releasing on every partition of the group also covers partitions the member forgot from
// its session or fetched in an earlier session, whose locks would otherwise just expire.
func (m *Manager) releaseMember(group, member string) []*write {
	m.mu.Lock()
	var ps []*partition
	for k, p := range m.parts {
		if k.GroupID == group {
			ps = append(ps, p)
		}
	}
	m.mu.Unlock()
	var ws []*write
	for _, p := range ps {
		p.mu.Lock()
		if !p.dropped && p.sp != nil {
			if w := p.persistAndWake(p.sp.ReleaseMember(member)); w != nil {
				ws = append(ws, w)
			}
		}
		p.mu.Unlock()
	}
	return ws
}

// MemberRemoved is the share-group coordinator's OnMemberRemoved hook (a member left or
// was fenced). As in Kafka 4.4, whose group coordinator does not touch share sessions at
// all, a member's share session on this broker outlives its leave: clients leave the group
// first and then close the session with their last acknowledgements (confluent-kafka's
// ShareConsumer sends the leave heartbeat, then ShareAcknowledge epoch -1), and those
// must apply. The session is closed, and the member's remaining records released, by the
// client's epoch -1, the close of the connection that created it, or the records' lock
// expiry; until then it is served as any other (a positive-epoch ShareFetch still fetches,
// as in Kafka, where ShareFetch consults no group membership). A member with no session
// here has nothing left that could acknowledge its records, so they are released at once
// (Kafka waits for the lock expiry); its staged (TX_PENDING) records are untouched either
// way. It does not wait for the writes.
func (m *Manager) MemberRemoved(groupID, memberID string) {
	m.mu.Lock()
	_, open := m.sessions.sessions[sessionKey{groupID, memberID}]
	m.mu.Unlock()
	if !open {
		m.releaseMember(groupID, memberID)
	}
}

// ConnClosed closes the share sessions the connection created and releases their
// members' records, as Kafka's ClientConnectionDisconnectListener does (kip-932 2.11). A
// session that was re-created on another connection is not touched. It does not wait for
// the writes.
func (m *Manager) ConnClosed(connID uint64) {
	m.mu.Lock()
	keys := m.sessions.byConn(connID)
	for _, k := range keys {
		m.sessions.remove(k)
	}
	m.mu.Unlock()
	for _, k := range keys {
		m.releaseMember(k.group, k.member)
	}
}
