package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/server"
)

// fetchTarget is one partition a fetch reads, after fetch-session resolution.
type fetchTarget struct {
	topic       string
	topicID     [16]byte
	partition   int32
	offset      int64
	maxBytes    int32
	leaderEpoch int32 // -1 when the client did not say
}

// maxFetchWait caps a client's MaxWaitMs so one request cannot pin a connection for hours.
const maxFetchWait = 5 * time.Minute

func (b *Broker) handleFetch(req *server.Request, ctx context.Context, r *kmsg.FetchRequest) server.Reply {
	sess, code := b.sessions.begin(r, req.Conn.ID)
	if code != 0 {
		fr := newFetchReply(r.ResponseKind().(*kmsg.FetchResponse))
		fr.finish(sess)
		return server.Reply{Resp: fr}
	}
	targets := sess.targets()
	readCommitted := r.IsolationLevel == 1
	responseMax, minBytes := b.fetchBounds(r)

	fr, n, hasError := b.readFetch(r, targets, responseMax, readCommitted)
	wait := time.Duration(r.MaxWaitMillis) * time.Millisecond
	if wait > maxFetchWait {
		wait = maxFetchWait
	}
	if n >= minBytes || wait <= 0 || hasError || len(targets) == 0 {
		fr.finish(sess)
		return server.Reply{Resp: fr}
	}

	// Long poll: answer when MinBytes are available or MaxWaitMs has passed. This runs in
	// the reply's Wait, so the connection's next request is handled meanwhile. Each read
	// replaces (and releases) the previous one; the server releases the one returned.
	return server.Reply{Wait: func() kmsg.Response {
		wake := make(chan struct{}, 1)
		var watched []*partition
		for _, tg := range targets {
			if p := b.lookupPartition(tg, r.Version); p != nil {
				p.watch(wake)
				watched = append(watched, p)
			}
		}
		defer func() {
			for _, p := range watched {
				p.unwatch(wake)
			}
		}()
		timer := time.NewTimer(wait)
		defer timer.Stop()
		reread := func() {
			next, nn, he := b.readFetch(r, targets, responseMax, readCommitted)
			fr.Release()
			fr, n, hasError = next, nn, he
		}
		for {
			select {
			case <-wake:
				reread()
				if n < minBytes && !hasError {
					continue
				}
			case <-timer.C:
				reread()
			case <-ctx.Done():
			}
			fr.finish(sess)
			return fr
		}
	}}
}

// fetchBounds is KafkaApis.handleFetchRequest's limits: the response carries at most
// min(MaxBytes, fetch.max.bytes) of records (the first batch still goes out whole, KIP-74),
// and MinBytes is capped by that, so a long poll cannot wait for more than it may answer.
// Fetch v0-v2 have no MaxBytes (Kafka's field default is Int.MaxValue).
func (b *Broker) fetchBounds(r *kmsg.FetchRequest) (responseMax int32, minBytes int) {
	responseMax = b.defaults.topic.FetchMaxBytes()
	if r.Version >= 3 {
		responseMax = max(min(r.MaxBytes, responseMax), 0)
	}
	return responseMax, int(min(r.MinBytes, responseMax))
}

// finish completes the response for the fetch session (KIP-227): session id, and for an
// incremental fetch only the partitions the client needs to see.
func (fr *fetchReply) finish(sess *fetchSession) {
	sess.ctx.FinishFunc(fr.FetchResponse, fr.hasRecords)
}

func (b *Broker) lookupPartition(tg fetchTarget, version int16) *partition {
	return partitionOf(b.fetchTopic(tg, version), tg.partition)
}

func (b *Broker) fetchTopic(tg fetchTarget, version int16) *topic {
	if version >= 13 {
		return b.topics.getByID(tg.topicID)
	}
	return b.topics.get(tg.topic)
}

// readFetch reads every target once and builds the response, its records as file chunks
// (see fetchReply). It returns the number of record bytes in it and whether any partition
// carries an error (an error is news worth answering at once, as Kafka does).
func (b *Broker) readFetch(r *kmsg.FetchRequest, targets []fetchTarget, responseMax int32, readCommitted bool) (*fetchReply, int, bool) {
	fr := newFetchReply(r.ResponseKind().(*kmsg.FetchResponse))
	fr.recs = make([]partRecords, 0, len(targets))
	fr.chunks = make([]log.Chunk, 0, len(targets))
	resp := fr.FetchResponse
	total := 0
	hasError := false
	var cur *kmsg.FetchResponseTopic
	for _, tg := range targets {
		if cur == nil || cur.Topic != tg.topic || cur.TopicID != tg.topicID {
			resp.Topics = append(resp.Topics, kmsg.NewFetchResponseTopic())
			cur = &resp.Topics[len(resp.Topics)-1]
			cur.Topic, cur.TopicID = tg.topic, tg.topicID
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = tg.partition
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
		rp.PreferredReadReplica = -1
		// Never null: librdkafka rejects a null records field (Kafka always sends an empty
		// one, even on error partitions). Records read are attached to fr, not here.
		rp.RecordBatches = []byte{}
		budget := int(responseMax) - total
		n := b.readPartition(r.Version, tg, &rp, fr, budget, total == 0, readCommitted)
		if rp.ErrorCode != 0 {
			hasError = true
		}
		total += int(n)
		cur.Partitions = append(cur.Partitions, rp)
	}
	if len(fr.leaders) > 0 && r.Version >= 16 {
		b.fetchEndpoints(resp, fr.leaders)
	}
	return fr, total, hasError
}

// readPartition fills one partition of a fetch response and attaches its records to fr,
// returning their length. firstInResponse implements KIP-74: the first non-empty
// partition of a response always gets at least one whole batch, even when it exceeds the
// limits, so a consumer is never stuck behind a big batch.
func (b *Broker) readPartition(version int16, tg fetchTarget, rp *kmsg.FetchResponseTopicPartition, fr *fetchReply, budget int, firstInResponse, readCommitted bool) int64 {
	t := b.fetchTopic(tg, version)
	missing := kerr.UnknownTopicOrPartition
	if version >= 13 {
		missing = kerr.UnknownTopicID
	}
	rt := b.routeTo(t, tg.partition, missing)
	if rt.err == nil {
		rt.err = rt.checkEpoch(tg.leaderEpoch)
	}
	if rt.err != nil {
		rp.ErrorCode = rt.err.Code
		if version >= 12 && rt.hinted() {
			// KIP-951 (Fetch v12+ carries CurrentLeader; NodeEndpoints from v16).
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = rt.leader, rt.epoch
			if rt.leader >= 0 {
				fr.leaders[rt.leader] = true
			}
		}
		return 0
	}
	p := rt.p
	hw := p.highWatermark()
	lso := p.lastStableOffset()
	rp.HighWatermark = hw
	rp.LastStableOffset = lso
	rp.LogStartOffset = p.log.StartOffset()
	if tg.offset < rp.LogStartOffset || tg.offset > p.log.EndOffset() {
		rp.ErrorCode = kerr.OffsetOutOfRange.Code
		return 0
	}
	// read_committed reads only decided transactions: up to the last stable offset.
	upTo := hw
	if readCommitted {
		upTo = lso
		rp.AbortedTransactions = p.abortedIn(tg.offset, lso)
	}
	if tg.offset >= upTo {
		return 0
	}
	limit := tg.maxBytes
	if limit > int32(budget) {
		limit = int32(max(budget, 0))
	}
	if limit <= 0 && !firstInResponse {
		return 0
	}
	// The log returns an oversized first batch (KIP-74); only the response's first
	// partition may carry one.
	n, err := fr.readRecords(p.log, tg, limit, upTo, func(n int64) bool { return n <= int64(limit) || firstInResponse })
	switch {
	case errors.Is(err, log.ErrOffsetOutOfRange):
		// Retention moved the start past the offset between the check and the read.
		rp.ErrorCode = kerr.OffsetOutOfRange.Code
		rp.LogStartOffset = p.log.StartOffset()
		return 0
	case err != nil:
		b.storageError("fetch read", err, "topic", tg.topic, "partition", tg.partition)
		rp.ErrorCode = kerr.KafkaStorageError.Code
		return 0
	}
	return n
}
