package broker

// SkipOffsetTombstonesForTest makes topic deletions leave the groups' committed offsets
// alone, as a crash between the removal of the topic's record and the tombstones would.
func SkipOffsetTombstonesForTest(b *Broker, skip bool) {
	b.coord.mu.Lock()
	b.coord.skipOffsetTombstones = skip
	b.coord.mu.Unlock()
}
