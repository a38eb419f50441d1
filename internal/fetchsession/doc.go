// Package fetchsession implements incremental fetch sessions (KIP-227) as Kafka 4.4's
// FetchManager, FetchSessionCacheShard, FetchSession and FetchContext do: a cache of
// sessions keyed by id, the session epoch protocol, the session's partition set updated by
// incremental requests and ForgottenTopics, and the filtering of incremental responses down
// to the partitions that changed since the session last sent them.
//
// The package is pure: it does no I/O, starts no goroutines and reads time only through the
// clock given to NewCache. A Cache is safe for concurrent use (one mutex); a Context belongs
// to one request.
//
// # How the broker uses it
//
//	ctx, code := cache.Begin(req, conn.ID)
//	if code != 0 { answer a FetchResponse with ErrorCode=code, SessionID=0, no topics }
//	for _, p := range ctx.Partitions() { read p.Key at p.FetchOffset ... }
//	// build resp with one partition per ctx.Partitions() entry (built with
//	// kmsg.NewFetchResponseTopicPartition so PreferredReadReplica is -1), grouped by topic,
//	// keyed by TopicID when ctx.UsesTopicIDs() else by name
//	ctx.Finish(&resp) // filters an incremental response, sets SessionID / ErrorCode
//
// Finish may come long after Begin (a long poll); if another request of the same session
// was begun in between, Finish answers INVALID_FETCH_SESSION_EPOCH, as Kafka does for a
// duplicate request.
//
// # Rules (from Kafka)
//
//   - Version < 7, or SessionEpoch -1: sessionless full fetch; a non-zero SessionID given with
//     epoch -1 closes that session. The response has SessionID 0.
//   - SessionEpoch 0: full fetch; a non-zero SessionID closes that session first. Finish
//     then tries to cache a new session holding every partition of the response and answers
//     its id (epoch 1 is the next expected), or 0 when the cache has no room.
//   - Epoch > 0 (or < -1): incremental. Unknown id → FETCH_SESSION_ID_NOT_FOUND (70); epoch
//     not the expected one → INVALID_FETCH_SESSION_EPOCH (71); a session created at version
//     ≥ 13 (topic ids) used at < 13 or the reverse → FETCH_SESSION_TOPIC_ID_ERROR (106).
//     Otherwise the request's partitions are added or updated, ForgottenTopics removed, and
//     the epoch advances (after 2^31-1 it wraps to 1). If no partition is left the session is
//     closed and the request is served sessionless.
//   - An incremental response keeps a partition only if it has records, an error, a
//     preferred read replica, a diverging epoch, or a high watermark / log start offset that
//     differs from what the session last sent. exactq also resends on a last stable offset
//     change (Kafka does not; it is harmless and keeps read_committed consumers current).
//     After an error the session forgets the sent high watermark so the partition is sent
//     again when the error clears. Partitions that returned records move to the end of the
//     session's order, so the broker serves partitions round-robin under MaxBytes.
//   - Eviction when all slots are used: the least recently used session if it has been idle
//     longer than the eviction age (Kafka: 120 s); else the "least valuable" evictable session
//     (fewest partitions, then lowest id; followers' sessions rank above consumers') if the
//     new session would have strictly more partitions (or is a follower's and the other is
//     not). A session only becomes evictable this way once, at one of its uses, it is older
//     than the eviction age — Kafka's rule, which protects new sessions from churn.
//
// # Topic ids
//
// From version 13 requests name topics by id only. The session keys partitions by topic id
// and resolves names with the TopicName callback given to NewCache; a partition whose id is
// unknown keeps an empty Topic (the broker answers it UNKNOWN_TOPIC_ID) and is resolved
// again on later requests. Before version 13 partitions are keyed by name.
package fetchsession
