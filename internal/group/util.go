package group

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func sortStrings(s []string) { slices.Sort(s) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortFetchPartitions(ps []kmsg.OffsetFetchResponseGroupTopicPartition) {
	slices.SortFunc(ps, func(a, b kmsg.OffsetFetchResponseGroupTopicPartition) int {
		return cmp.Compare(a.Partition, b.Partition)
	})
}
