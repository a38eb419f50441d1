package group

import "unicode/utf16"

// javaStringHash is Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units,
// in wrapping 32-bit arithmetic. Kafka places a group on __consumer_offsets partition
// Utils.abs(groupId.hashCode()) % partitions; clients never compute it, but tooling and a
// future migration from Kafka data directories do.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// partitionFor is Kafka's GroupCoordinatorService.partitionFor.
func partitionFor(groupID string, partitions int32) int32 {
	h := javaStringHash(groupID)
	if h == -1<<31 { // Utils.abs maps MIN_VALUE to 0
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}
