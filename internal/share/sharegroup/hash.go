package sharegroup

import "unicode/utf16"

// javaStringHash is Java's String.hashCode over UTF-16 code units (wrapping int32).
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// partitionFor is GroupCoordinatorService.partitionFor, the same choice the classic
// coordinator makes: Utils.abs(groupId.hashCode()) % partitions.
func partitionFor(groupID string, partitions int32) int32 {
	h := javaStringHash(groupID)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}
