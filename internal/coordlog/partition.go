package coordlog

import "unicode/utf16"

// JavaStringHash is Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, in
// wrapping 32-bit arithmetic.
func JavaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// PartitionFor is the partition of an internal topic with n partitions that owns key, as
// each of Kafka's coordinators chooses it: Utils.abs(key.hashCode()) % n (the
// partitionFor of GroupCoordinatorService, TransactionStateManager and
// ShareCoordinatorService). Clients never compute it, but tooling and a future migration
// from Kafka data directories do, so it must be Kafka's to the bit.
func PartitionFor(key string, n int32) int32 {
	h := JavaStringHash(key)
	if h == -1<<31 { // Utils.abs maps Integer.MIN_VALUE to 0
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}
