package sharestate

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func sb(first, last int64, state int8, count int16) StateBatch {
	return StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: state, DeliveryCount: count}
}

func bl(bs ...StateBatch) []StateBatch { return bs }

// The scenarios of Kafka's PersisterStateBatchCombinerTest, by their names there. Kafka
// runs only the rows marked shouldRun; all of them hold here.
func TestCombineKafkaScenarios(t *testing.T) {
	type row struct {
		name         string
		soFar, newer []StateBatch
		want         []StateBatch
		startOffset  int64
	}
	groups := map[string][]row{
		"CornerCases": {
			{"Current batches with start offset midway are pruned.", bl(sb(100, 130, 0, 1)), nil, bl(sb(120, 130, 0, 1)), 120},
			{"New batches with start offset midway are pruned.", nil, bl(sb(100, 130, 0, 1)), bl(sb(120, 130, 0, 1)), 120},
			{"Both current and new batches empty.", nil, nil, nil, 120},
		},
		"SameState": {
			{"Same state. batchSoFar and newBatch have same first and last offset.", bl(sb(100, 110, 0, 1)), bl(sb(100, 110, 0, 1)), bl(sb(100, 110, 0, 1)), -1},
			{"Same state. batchSoFar and newBatch have same first offset, newBatch last offset strictly smaller.", bl(sb(100, 110, 0, 1)), bl(sb(100, 105, 0, 1)), bl(sb(100, 110, 0, 1)), -1},
			{"Same state. batchSoFar and newBatch have same first offset, newBatch last offset strictly larger.", bl(sb(100, 110, 0, 1)), bl(sb(100, 115, 0, 1)), bl(sb(100, 115, 0, 1)), -1},
			{"Same state. newBatch first offset strictly larger and last offset strictly smaller than batchSoFar.", bl(sb(100, 110, 0, 1)), bl(sb(105, 108, 0, 1)), bl(sb(100, 110, 0, 1)), -1},
			{"Same state. newBatch first offset strictly larger and last offset equal to batchSoFar.", bl(sb(100, 110, 0, 1)), bl(sb(105, 110, 0, 1)), bl(sb(100, 110, 0, 1)), -1},
			{"Same state. newBatch first offset strictly larger and last offset strictly larger than batchSoFar.", bl(sb(100, 110, 0, 1)), bl(sb(105, 115, 0, 1)), bl(sb(100, 115, 0, 1)), -1},
			{"Same state. newBatch first offset is batchSoFar first offset + 1 (contiguous).", bl(sb(100, 110, 0, 1)), bl(sb(111, 115, 0, 1)), bl(sb(100, 115, 0, 1)), -1},
		},
		"ComplexCases": {
			{"Handle overlapping batches in newBatches, same state", bl(sb(100, 110, 0, 1), sb(121, 130, 0, 1)), bl(sb(111, 119, 2, 2), sb(116, 123, 2, 2)),
				bl(sb(100, 110, 0, 1), sb(111, 123, 2, 2), sb(124, 130, 0, 1)), -1},
			{"Handle overlapping batches in newBatches, different priority.", bl(sb(100, 110, 0, 1)), bl(sb(101, 105, 1, 2), sb(101, 115, 2, 2), sb(101, 120, 3, 2)),
				bl(sb(100, 100, 0, 1), sb(101, 120, 3, 2)), -1},
			{"Handle overlapping batches in newBatches, with pruning.", bl(sb(100, 110, 0, 1), sb(121, 130, 0, 1)), bl(sb(111, 119, 2, 2), sb(116, 123, 2, 2)),
				bl(sb(120, 123, 2, 2), sb(124, 130, 0, 1)), 120},
			{"Multiple higher state batch updates.", bl(sb(111, 120, 0, 1)), bl(sb(111, 113, 0, 2), sb(114, 114, 2, 1), sb(115, 119, 0, 2)),
				bl(sb(111, 113, 0, 2), sb(114, 114, 2, 1), sb(115, 119, 0, 2), sb(120, 120, 0, 1)), -1},
		},
		"DifferentStates": {
			{"newBatch higher state. newBatch first offset and last offset match batchSoFar.", bl(sb(100, 110, 0, 1)), bl(sb(100, 110, 0, 2)), bl(sb(100, 110, 0, 2)), -1},
			{"newBatch lower state. newBatch first offset and last offset match batchSoFar.", bl(sb(100, 110, 0, 3)), bl(sb(100, 110, 0, 1)), bl(sb(100, 110, 0, 3)), -1},
			{"newBatch higher state. newBatch first offset same and last offset smaller than batchSoFar.", bl(sb(100, 110, 0, 1)), bl(sb(100, 105, 0, 2)), bl(sb(100, 105, 0, 2), sb(106, 110, 0, 1)), -1},
			{"newBatch lower state. newBatch first offset same and last offset smaller than batchSoFar.", bl(sb(100, 110, 0, 3)), bl(sb(100, 105, 0, 1)), bl(sb(100, 110, 0, 3)), -1},
			{"newBatch higher state. newBatch first offset same and last offset strictly larger than batchSoFar.", bl(sb(100, 110, 0, 1)), bl(sb(100, 115, 0, 2)), bl(sb(100, 115, 0, 2)), -1},
			{"newBatch lower state. newBatch first offset same and last offset strictly larger than batchSoFar.", bl(sb(100, 110, 0, 3)), bl(sb(100, 115, 0, 1)), bl(sb(100, 110, 0, 3), sb(111, 115, 0, 1)), -1},
			{"newBatch higher state. newBatch first offset strictly larger and last offset strictly smaller than batchSoFar.", bl(sb(100, 115, 0, 1)), bl(sb(105, 110, 1, 1)),
				bl(sb(100, 104, 0, 1), sb(105, 110, 1, 1), sb(111, 115, 0, 1)), -1},
			{"newBatch lower state. newBatch first offset strictly larger and last offset strictly smaller than batchSoFar.", bl(sb(100, 115, 1, 1)), bl(sb(105, 110, 0, 1)), bl(sb(100, 115, 1, 1)), -1},
			{"newBatch higher state. newBatch first offset strictly larger and last offset same as batchSoFar.", bl(sb(100, 110, 0, 1)), bl(sb(105, 110, 0, 2)), bl(sb(100, 104, 0, 1), sb(105, 110, 0, 2)), -1},
			{"newBatch lower state. newBatch first offset strictly larger and last offset same as batchSoFar.", bl(sb(100, 110, 0, 2)), bl(sb(105, 110, 0, 1)), bl(sb(100, 110, 0, 2)), -1},
			{"newBatch higher state. newBatch first and last offsets strictly larger than batchSoFar.", bl(sb(100, 110, 0, 1)), bl(sb(105, 115, 0, 2)), bl(sb(100, 104, 0, 1), sb(105, 115, 0, 2)), -1},
			{"newBatch lower state. newBatch first and last offsets strictly larger than batchSoFar.", bl(sb(100, 110, 0, 2)), bl(sb(105, 115, 0, 1)), bl(sb(100, 110, 0, 2), sb(111, 115, 0, 1)), -1},
		},
	}
	for group, rows := range groups {
		t.Run("testStateBatchCombine"+group, func(t *testing.T) {
			for _, r := range rows {
				t.Run(r.name, func(t *testing.T) {
					got := combine(r.soFar, r.newer, r.startOffset)
					if !slices.Equal(got, r.want) && !(len(got) == 0 && len(r.want) == 0) {
						t.Fatalf("got %v\nwant %v", got, r.want)
					}
				})
			}
		})
	}
}

// Kafka's first ComplexCases row expects [(100-110,0,1), (111-123,2,2)] and drops 124-130:
// its expectation is wrong and the row is not run (shouldRun false). The union keeps
// 124-130 of the old batch, which is what combine returns (asserted above).

func TestCombineStagedBatchesStayDistinct(t *testing.T) {
	staged := func(first, last int64, pid int64, epoch int16) StateBatch {
		return StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: StateTxPending, DeliveryCount: 1,
			TxnProducerID: pid, TxnProducerEpoch: epoch, TxnAckType: AckAccept, TxnCommitState: StateAcknowledged}
	}
	got := combine(bl(staged(0, 4, 7, 0)), bl(staged(5, 9, 8, 0)), -1)
	if want := bl(staged(0, 4, 7, 0), staged(5, 9, 8, 0)); !slices.Equal(got, want) {
		t.Fatalf("different producers coalesced: %v", got)
	}
	got = combine(bl(staged(0, 4, 7, 0)), bl(staged(5, 9, 7, 0)), -1)
	if want := bl(staged(0, 9, 7, 0)); !slices.Equal(got, want) {
		t.Fatalf("same staging not coalesced: %v", got)
	}
	// Same count: TX_PENDING (5) outranks ACKNOWLEDGED (2).
	got = combine(bl(sb(0, 9, StateAcknowledged, 1)), bl(staged(3, 4, 7, 0)), -1)
	if want := bl(sb(0, 2, 2, 1), staged(3, 4, 7, 0), sb(5, 9, 2, 1)); !slices.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
}

// mergeInto must agree with combine on canonical state.
func TestMergeIntoMatchesCombine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var raw []StateBatch
		for i := range rapid.IntRange(0, 6).Draw(rt, "old") {
			raw = append(raw, drawBatch(rt, fmt.Sprint("o", i)))
		}
		old := combine(nil, raw, -1)
		var add []StateBatch
		for i := range rapid.IntRange(0, 4).Draw(rt, "new") {
			add = append(add, drawBatch(rt, fmt.Sprint("n", i)))
		}
		start := rapid.Int64Range(-1, 15).Draw(rt, "start")
		want := combine(old, add, start)
		got := mergeInto(slices.Clone(old), add, start, nil)
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			rt.Fatalf("mergeInto %v\ncombine %v", got, want)
		}
	})
}
