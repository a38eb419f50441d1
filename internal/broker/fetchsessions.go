package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/fetchsession"
)

// fetchSessions adapts the KIP-227 session cache to the fetch handler.
type fetchSessions struct{ cache *fetchsession.Cache }

func newFetchSessions(b *Broker) *fetchSessions {
	names := func(id [16]byte) (string, bool) {
		if t := b.topics.getByID(id); t != nil {
			return t.name, true
		}
		return "", false
	}
	slots := int(b.defaults.topic.MaxIncrementalFetchSessionCacheSlots())
	return &fetchSessions{cache: fetchsession.NewCache(slots, b.now, fetchsession.WithTopicNames(names))}
}

type fetchSession struct {
	ctx  *fetchsession.Context
	list []fetchTarget
}

// begin resolves the request against the cache; a non-zero code is a whole-response error.
func (s *fetchSessions) begin(r *kmsg.FetchRequest, connID uint64) (*fetchSession, int16) {
	ctx, code := s.cache.Begin(r, connID)
	fs := &fetchSession{ctx: ctx}
	if code != 0 {
		return fs, code
	}
	for _, p := range ctx.Partitions() {
		fs.list = append(fs.list, fetchTarget{
			topic: p.Key.Topic, topicID: p.Key.TopicID, partition: p.Key.Partition,
			offset: p.FetchOffset, maxBytes: p.MaxBytes, leaderEpoch: p.CurrentLeaderEpoch,
		})
	}
	return fs, 0
}

func (fs *fetchSession) targets() []fetchTarget { return fs.list }

// finish sets the session fields and trims an incremental response to what changed.
func (fs *fetchSession) finish(resp *kmsg.FetchResponse) { fs.ctx.Finish(resp) }

// connClosed keeps sessions: Kafka lets a client resume a session on a new connection, and
// the cache evicts idle ones under pressure.
func (s *fetchSessions) connClosed(connID uint64) {}
