package share

import "testing"

// TestFetchRecordsInEncodingOrder: a session whose partitions interleave topics (a0, b0,
// then a1) gets a response grouped by topic (a: 0, 1; b: 0); its Records follow that
// encoding order, which the broker's zero-copy encoding relies on (sfr checks it).
func TestFetchRecordsInEncodingOrder(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.init(group, topicB, 0)
	e.init(group, topicA, 1)
	e.fetch(fetchReq{member: "m", epoch: 0, parts: []int32{0}})
	e.fetch(fetchReq{member: "m", epoch: 1, topic: topicB, parts: []int32{0}})
	e.fetch(fetchReq{member: "m", epoch: 2, parts: []int32{1}})
	e.logs.produce(topicA, 0, 2, 0)
	e.logs.produce(topicB, 0, 2, 0)
	e.logs.produce(topicA, 1, 2, 0)
	resp := e.fetch(fetchReq{member: "m", epoch: 3})
	if len(resp.Topics) != 2 || resp.Topics[0].TopicID != topicA || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("response topics %+v, want a (0, 1) then b (0)", resp.Topics)
	}
	for _, want := range []struct {
		topic [16]byte
		p     int32
	}{{topicA, 0}, {topicA, 1}, {topicB, 0}} {
		e.wantAcquired(resp, want.topic, want.p, acquired{0, 1, 1})
	}
}
