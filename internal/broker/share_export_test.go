package broker

// ShareStateTopicsForTest returns, per topic id, how many share partitions of any group
// have durable state in the share-state store (nil when share groups were never used).
func ShareStateTopicsForTest(b *Broker) map[[16]byte]int {
	s := b.loadedShares()
	if s == nil {
		return nil
	}
	out := map[[16]byte]int{}
	for _, k := range s.store.Keys() {
		out[k.TopicID]++
	}
	return out
}

// ShareGroupTopicsForTest returns the topic ids a share group has initialized share state for.
func ShareGroupTopicsForTest(b *Broker, groupID string) [][16]byte {
	s := b.loadedShares()
	if s == nil {
		return nil
	}
	var out [][16]byte
	for id := range s.members.InitializedPartitions(groupID) {
		out = append(out, id)
	}
	return out
}
