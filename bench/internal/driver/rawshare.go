package driver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share acknowledgement types on the wire (KIP-932).
const (
	ackAccept  int8 = 1
	ackRelease int8 = 2
	ackReject  int8 = 3
)

// rawShareMember is a share-group member that speaks ShareGroupHeartbeat, ShareFetch and
// ShareAcknowledge itself (kmsg requests over a plain kgo client), for what kgo's share
// consumer does not let a caller control: which partitions a fetch names, records held
// across fetches without acknowledging them, and whether a fetch acquired nothing. P7 builds
// its in-flight share state and measures the first share fetch after a restart with it; P3
// uses it to check that a group is drained. It works against any broker with KIP-932 share
// groups (exactq, Apache Kafka 4.1+), one leader per partition; the bench runs one broker.
type rawShareMember struct {
	cl      *kgo.Client
	group   string
	member  string
	topic   string
	topicID [16]byte
	leader  int32 // every partition of topic is led by this node (single-broker clusters)

	mu       sync.Mutex
	epoch    int32 // member epoch; 0 before the first heartbeat
	interval time.Duration
	session  int32 // share session epoch of the next request
	stopHB   func()
}

// newRawShareMember prepares a member of group for topic (not joined yet).
func newRawShareMember(ctx context.Context, brokers []string, group, topic string) (*rawShareMember, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	m := &rawShareMember{cl: cl, group: group, member: randomMemberID(), topic: topic, interval: time.Second}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0) {
		err = fmt.Errorf("no partitions for %s", topic)
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("bench: metadata for %s: %w", topic, err)
	}
	m.topicID, m.leader = resp.Topics[0].TopicID, resp.Topics[0].Partitions[0].Leader
	return m, nil
}

// randomMemberID is a client-generated member id as the Java client makes it (a random
// UUID in URL-safe base64, 22 characters).
func randomMemberID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// heartbeat sends one ShareGroupHeartbeat (subscribing to the topic) and returns how many
// partitions the answer assigns (-1 when it carries no assignment).
func (m *rawShareMember) heartbeat(ctx context.Context) (assigned int, err error) {
	m.mu.Lock()
	epoch := m.epoch
	m.mu.Unlock()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = m.group, m.member, epoch
	req.SubscribedTopicNames = []string{m.topic}
	resp, err := req.RequestWith(ctx, m.cl)
	if err == nil {
		err = errWithMessage(resp.ErrorCode, resp.ErrorMessage)
	}
	if err != nil {
		return -1, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch = resp.MemberEpoch
	if resp.HeartbeatIntervalMillis > 0 {
		m.interval = time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
	}
	if resp.Assignment == nil {
		return -1, nil
	}
	n := 0
	for _, tp := range resp.Assignment.TopicPartitions {
		n += len(tp.Partitions)
	}
	return n, nil
}

// join heartbeats until the coordinator answers (retrying while it loads) and, with
// partitions > 0, until it assigns that many partitions; then it keeps the membership
// alive with heartbeats at the coordinator's interval until leave.
func (m *rawShareMember) join(ctx context.Context, partitions int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		n, err := m.heartbeat(ctx)
		if err == nil && n >= partitions {
			break
		}
		if err != nil {
			last = err
			if !kerr.IsRetriable(err) && !errors.Is(err, kerr.CoordinatorLoadInProgress) && !errors.Is(err, kerr.NotCoordinator) &&
				!errors.Is(err, kerr.CoordinatorNotAvailable) {
				return fmt.Errorf("bench: share group heartbeat: %w", err)
			}
		} else {
			last = fmt.Errorf("%d of %d partitions assigned", max(n, 0), partitions)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: share group %s: not joined after %v: %w", m.group, timeout, last)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	hbCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m.mu.Lock()
			d := m.interval
			m.mu.Unlock()
			if sleepCtx(hbCtx, d) != nil {
				return
			}
			_, _ = m.heartbeat(hbCtx) // a missed beat is retried at the next interval
		}
	}()
	m.stopHB = func() { cancel(); <-done }
	return nil
}

// close ends the share session (epoch -1: the broker releases what the member still holds)
// and leaves the group; errors are ignored (the broker cleans up on its own).
func (m *rawShareMember) close(ctx context.Context) {
	if m.stopHB != nil {
		m.stopHB()
	}
	if m.session > 0 {
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.member, -1
		_, _ = m.cl.Broker(int(m.leader)).RetriableRequest(ctx, req)
	}
	leave := kmsg.NewPtrShareGroupHeartbeatRequest()
	leave.GroupID, leave.MemberID, leave.MemberEpoch = m.group, m.member, -1
	_, _ = leave.RequestWith(ctx, m.cl)
	m.cl.Close()
}

// ackBatch is a share acknowledgement of offsets First..Last: Types has one type for the
// whole range or one per offset.
type ackBatch struct {
	First, Last int64
	Types       []int8
}

// shareFetch is one ShareFetch: it adds (or keeps) partitions in the member's share session
// with their acknowledgements, removes forget from it, and returns the acquired offset
// ranges per partition. A partition-level or acknowledgement error fails the call.
func (m *rawShareMember) shareFetch(ctx context.Context, parts []int32, acks map[int32][]ackBatch, forget []int32,
	maxWait time.Duration, maxRecords int32) (map[int32][]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, error) {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.member, m.session
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(maxWait/time.Millisecond), 1, 64<<20
	req.MaxRecords, req.BatchSize = maxRecords, maxRecords
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = m.topicID
	for _, p := range parts {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		for _, b := range acks[p] {
			ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.First, b.Last, b.Types
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	if len(rt.Partitions) > 0 {
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		f := kmsg.NewShareFetchRequestForgottenTopicsData()
		f.TopicID, f.Partitions = m.topicID, forget
		req.ForgottenTopicsData = append(req.ForgottenTopicsData, f)
	}
	resp, err := req.RequestWith(ctx, m.cl.Broker(int(m.leader)))
	if err != nil {
		return nil, fmt.Errorf("bench: ShareFetch: %w", err)
	}
	m.session = nextSessionEpoch(m.session)
	if err := errWithMessage(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, fmt.Errorf("bench: ShareFetch: %w", err)
	}
	out := map[int32][]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := errWithMessage(p.AcknowledgeErrorCode, p.AcknowledgeErrorMessage); err != nil {
				return nil, fmt.Errorf("bench: ShareFetch acknowledgement, partition %d: %w", p.Partition, err)
			}
			if err := errWithMessage(p.ErrorCode, p.ErrorMessage); err != nil {
				return nil, fmt.Errorf("bench: ShareFetch partition %d: %w", p.Partition, err)
			}
			if len(p.AcquiredRecords) > 0 {
				out[p.Partition] = append(out[p.Partition], p.AcquiredRecords...)
			}
		}
	}
	return out, nil
}

// acknowledge sends acks in a ShareAcknowledge of the current share session.
func (m *rawShareMember) acknowledge(ctx context.Context, acks map[int32][]ackBatch) error {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.member, m.session
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = m.topicID
	parts := make([]int32, 0, len(acks))
	for p := range acks {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		rp.Partition = p
		for _, b := range acks[p] {
			ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.First, b.Last, b.Types
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, m.cl.Broker(int(m.leader)))
	if err != nil {
		return fmt.Errorf("bench: ShareAcknowledge: %w", err)
	}
	m.session = nextSessionEpoch(m.session)
	if err := errWithMessage(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return fmt.Errorf("bench: ShareAcknowledge: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := errWithMessage(p.ErrorCode, p.ErrorMessage); err != nil {
				return fmt.Errorf("bench: ShareAcknowledge partition %d: %w", p.Partition, err)
			}
		}
	}
	return nil
}

// nextSessionEpoch follows a share session epoch (it wraps to 1, never to 0 or -1).
func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// errWithMessage is the kerr error of code with the broker's message, if any.
func errWithMessage(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err != nil && msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// probeShareDrained joins group as a fresh member and checks that a share fetch of every
// partition acquires nothing (twice, waiting up to wait each time): the broker holds no
// record of the topic as available for the group. It returns the offsets it acquired, if
// any (released again when it leaves).
func probeShareDrained(ctx context.Context, brokers []string, group, topic string, partitions []int32, wait time.Duration) ([]int64, error) {
	m, err := newRawShareMember(ctx, brokers, group, topic)
	if err != nil {
		return nil, err
	}
	defer m.close(context.WithoutCancel(ctx))
	if err := m.join(ctx, 0, 30*time.Second); err != nil {
		return nil, err
	}
	var got []int64
	for range 2 {
		acq, err := m.shareFetch(ctx, partitions, nil, nil, wait, 500)
		if err != nil {
			return nil, err
		}
		for _, rs := range acq {
			for _, r := range rs {
				for o := r.FirstOffset; o <= r.LastOffset; o++ {
					got = append(got, o)
				}
			}
		}
	}
	return got, nil
}
