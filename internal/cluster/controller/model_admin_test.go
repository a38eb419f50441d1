package controller

import (
	"slices"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// modelNode is the model's node id: not a broker of the model, so partitions placed on
// it (no broker unfenced) are told apart.
const modelNode = 9

var modelTopics = []string{"t1", "t2", "t3", "t4"}

// admin runs an admin request, checks that its batches apply (Core answers one that does
// not UNKNOWN_SERVER_ERROR) and, once answered, that every
// creation it answered is in the committed image with the answered id.
func (m *model) admin(t *rapid.T, req any) {
	r, err := m.core.Handle(m.l.latest, m.now, req)
	if err != nil {
		m.t.Fatal(err)
	}
	if r.Immediate && slices.Contains(codes(r.Reply(0)), kerr.UnknownServerError.Code) {
		// What Core answers a batch that would not apply.
		m.t.Fatalf("%T answered UNKNOWN_SERVER_ERROR: %+v", req, r.Reply(0))
	}
	m.checkResult(r)
	m.l.run(r, rapid.Bool().Draw(t, "hold"), func(resp kmsg.Response) {
		ct, ok := resp.(*kmsg.CreateTopicsResponse)
		if !ok {
			return
		}
		for _, tp := range ct.Topics {
			if tp.ErrorCode != 0 || tp.TopicID == ([16]byte{}) {
				continue
			}
			if got := m.l.committed.Topic(tp.Topic); got == nil || got.ID != tp.TopicID {
				m.t.Fatalf("%s answered with id %x; committed has %+v", tp.Topic, tp.TopicID, got)
			}
		}
	})
	m.check()
}

// checkResult: a new topic's id is one no topic had (live, in flight or lost with a
// term) and not drawn twice in the request; a new partition's replicas are latest's unfenced brokers, or this node while
// there is none; every batch but the last ends a topic or resource, so the next starts one.
func (m *model) checkResult(r Result) {
	var usable []int32
	for id, br := range m.l.latest.Brokers {
		if !br.Fenced && !br.InControlledShutdown {
			usable = append(usable, id)
		}
	}
	if len(usable) == 0 {
		usable = []int32{modelNode}
	}
	var ids []metadata.TopicID
	for _, rec := range r.Records {
		switch rec := rec.(type) {
		case *wire.TopicRecord:
			if _, used := m.topicIDs[rec.TopicID]; used || slices.Contains(ids, rec.TopicID) {
				m.t.Fatalf("topic %s given the id %x, which %s had", rec.Name, rec.TopicID, m.topicIDs[rec.TopicID])
			}
			ids = append(ids, rec.TopicID)
			m.topicIDs[rec.TopicID] = rec.Name
		case *wire.PartitionRecord:
			for _, b := range rec.Replicas {
				if !slices.Contains(usable, b) {
					m.t.Fatalf("partition %d placed on %d, not among %v", rec.PartitionID, b, usable)
				}
			}
		}
	}
	for i, b := range r.Batches() {
		if i == 0 {
			continue
		}
		switch b[0].(type) {
		case *wire.TopicRecord, *wire.RemoveTopicRecord, *wire.ConfigRecord, *wire.PartitionRecord:
		default:
			m.t.Fatalf("a batch starts with %T", b[0])
		}
	}
}

func (m *model) createTopics(t *rapid.T) {
	names := rapid.SliceOfN(rapid.SampledFrom(modelTopics), 1, 3).Draw(t, "names")
	req := createTopics(rapid.IntRange(0, 4).Draw(t, "validate") == 0)
	for _, n := range names {
		tp := newTopic(n, int32(rapid.IntRange(-1, 3).Draw(t, "partitions")))
		if rapid.Bool().Draw(t, "config") {
			v := rapid.SampledFrom([]string{"1000", "soon"}).Draw(t, "retention")
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = "retention.ms", &v
			tp.Configs = append(tp.Configs, c)
		}
		req.Topics = append(req.Topics, tp)
	}
	m.admin(t, req)
}

func (m *model) deleteTopics(t *rapid.T) {
	m.admin(t, deleteTopics(rapid.SliceOfNDistinct(rapid.SampledFrom(append(modelTopics, "a")), 1, 3, rapid.ID[string]).Draw(t, "names")...))
}

func (m *model) grow(t *rapid.T) {
	m.admin(t, createPartitions(rapid.IntRange(0, 4).Draw(t, "validate") == 0,
		rapid.SampledFrom(append(modelTopics, "a", "b")).Draw(t, "topic"), int32(rapid.IntRange(1, 6).Draw(t, "count"))))
}

func (m *model) alterConfigs(t *rapid.T) {
	name := rapid.SampledFrom(append(modelTopics, "a")).Draw(t, "topic")
	m.admin(t, incrementalSet(kmsg.ConfigResourceTypeTopic, name, "retention.ms", rapid.SampledFrom([]string{"1", "2", "x"}).Draw(t, "value")))
}

func (m *model) internal(t *rapid.T, req any) { m.admin(t, req) }
