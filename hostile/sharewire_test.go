package hostile

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
)

// shareMember is a share-group member spoken by hand (ShareGroupHeartbeat, ShareFetch,
// ShareAcknowledge), so that a test controls every offset it acknowledges and decodes no
// acquired range itself.
type shareMember struct {
	c        *rawConn
	group    string
	memberID string
	epoch    int32 // member epoch
	session  int32 // share session epoch
	topicID  [16]byte
}

func newMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// joinShareGroup heartbeats into group until the member is assigned partition 0 of topic.
func joinShareGroup(t *testing.T, c *rawConn, group, topic string) *shareMember {
	t.Helper()
	m := &shareMember{c: c, group: group, memberID: newMemberID()}
	err := await.Until(20*time.Second, 100*time.Millisecond, func() error {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.SetVersion(1)
		req.GroupID, req.MemberID, req.MemberEpoch = group, m.memberID, m.epoch
		req.SubscribedTopicNames = []string{topic}
		resp, err := c.roundTrip(req, 10*time.Second)
		if err != nil {
			return await.Stop(fmt.Errorf("ShareGroupHeartbeat: %v", err))
		}
		hb := resp.(*kmsg.ShareGroupHeartbeatResponse)
		if hb.ErrorCode != 0 {
			return await.Stop(fmt.Errorf("ShareGroupHeartbeat: error %d", hb.ErrorCode))
		}
		m.epoch = hb.MemberEpoch
		if hb.Assignment == nil || len(hb.Assignment.TopicPartitions) == 0 {
			return fmt.Errorf("share member of %s never assigned %s", group, topic)
		}
		m.topicID = hb.Assignment.TopicPartitions[0].TopicID
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fetch sends one ShareFetch for partition 0 and returns the acquired ranges.
func (m *shareMember) fetch(timeout time.Duration) ([]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, error) {
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID = &m.group, &m.memberID
	req.ShareSessionEpoch = m.session
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 500, 1, 1<<20, 500, 500
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = m.topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := m.c.roundTrip(req, timeout)
	if err != nil {
		return nil, err
	}
	m.session++
	sf := resp.(*kmsg.ShareFetchResponse)
	if sf.ErrorCode != 0 {
		return nil, fmt.Errorf("ShareFetch: error %d", sf.ErrorCode)
	}
	var out []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, tp := range sf.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("ShareFetch partition: error %d", p.ErrorCode)
			}
			out = append(out, p.AcquiredRecords...)
		}
	}
	return out, nil
}

// ack acknowledges [first, last] of partition 0 with ackType (1 accept, 2 release, 3 reject).
func (m *shareMember) ack(first, last int64, ackType int8, timeout time.Duration) error {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = &m.group, &m.memberID
	req.ShareSessionEpoch = m.session
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = m.topicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = first, last, []int8{ackType}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.SetVersion(1)
	resp, err := m.c.roundTrip(req, timeout)
	if err != nil {
		return err
	}
	m.session++
	if sa := resp.(*kmsg.ShareAcknowledgeResponse); sa.ErrorCode != 0 {
		return fmt.Errorf("ShareAcknowledge: error %d", sa.ErrorCode)
	}
	return nil
}
