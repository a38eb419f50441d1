package client

import (
	"sort"
)

// generalAssign is Java's AbstractStickyAssignor.GeneralAssignmentBuilder (members
// subscribe to different topics): keep every valid owned partition, give the unassigned
// ones to the least loaded eligible member, then move partitions from members with two
// or more partitions more than an eligible peer until balanced, preferring moves back to a
// partition's previous owner and avoiding moving partitions back and forth (the
// PartitionMovements bookkeeping). If the moves do not lower the balance score, the
// assignment before them is kept.
func generalAssign(members []groupMember, partitions map[string]int32, owned map[string][]TopicPartition, maxGen int32) (map[string][]TopicPartition, error) {
	b := &generalBuilder{
		partitions:       partitions,
		subs:             map[string]*groupMember{},
		current:          map[string][]TopicPartition{},
		topicConsumers:   map[string][]string{},
		consumerTopics:   map[string][]string{},
		partitionOwner:   map[TopicPartition]string{},
		inSorted:         map[string]bool{},
		movements:        newPartitionMovements(),
		maxGen:           maxGen,
		totalPartitions:  0,
		consumerTopicSet: map[string]map[string]bool{},
	}
	for _, n := range partitions {
		b.totalPartitions += int(n)
	}
	for t := range partitions {
		b.topicConsumers[t] = nil
	}
	for i := range members {
		m := &members[i]
		b.subs[m.id] = m
		set := map[string]bool{}
		for _, t := range dedupe(m.topics) {
			if _, ok := partitions[t]; ok {
				b.consumerTopics[m.id] = append(b.consumerTopics[m.id], t)
				b.topicConsumers[t] = append(b.topicConsumers[t], m.id)
			}
			set[t] = true
		}
		b.consumerTopicSet[m.id] = set
		b.current[m.id] = append([]TopicPartition{}, owned[m.id]...)
	}
	for c, tps := range b.current {
		for _, tp := range tps {
			b.partitionOwner[tp] = c
		}
	}
	topics := sortedKeys(b.topicConsumers)
	sort.SliceStable(topics, func(i, j int) bool {
		ni, nj := len(b.topicConsumers[topics[i]]), len(b.topicConsumers[topics[j]])
		if ni != nj {
			return ni < nj
		}
		return topics[i] < topics[j]
	})
	b.sortedAll = allPartitionsSorted(topics, partitions)
	return b.build(), nil
}

type generalBuilder struct {
	partitions       map[string]int32
	subs             map[string]*groupMember
	current          map[string][]TopicPartition // the assignment being built
	topicConsumers   map[string][]string         // topic → members that may get it
	consumerTopics   map[string][]string         // member → existing subscribed topics
	consumerTopicSet map[string]map[string]bool  // member → every subscribed topic
	partitionOwner   map[TopicPartition]string
	sortedAll        []TopicPartition
	// inSorted is Java's sortedCurrentSubscriptions as a set; its order (by assignment
	// size, then member id) is computed on demand by sorted.
	inSorted           map[string]bool
	movements          *partitionMovements
	maxGen             int32
	totalPartitions    int
	revocationRequired bool
}

type prevOwner struct {
	consumer   string
	generation int32
}

func (b *generalBuilder) sorted() []string {
	out := make([]string, 0, len(b.inSorted))
	for c := range b.inSorted {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		ni, nj := len(b.current[out[i]]), len(b.current[out[j]])
		if ni != nj {
			return ni < nj
		}
		return out[i] < out[j]
	})
	return out
}

func (b *generalBuilder) build() map[string][]TopicPartition {
	prev := b.prepopulate()
	assigned := b.assignOwned()
	var unassigned []TopicPartition
	for _, tp := range b.sortedAll {
		if !assigned[tp] {
			unassigned = append(unassigned, tp)
		}
	}
	for c := range b.current {
		b.inSorted[c] = true
	}
	b.balance(prev, unassigned)
	return b.current
}

// prepopulate records, per partition, the owner from an older generation (Java's
// prevAssignment), used to move a partition back to where it was.
func (b *generalBuilder) prepopulate() map[TopicPartition]prevOwner {
	prev := map[TopicPartition]prevOwner{}
	update := func(m *groupMember, gen int32) {
		for _, tp := range m.owned {
			if p, ok := prev[tp]; !ok || gen > p.generation {
				prev[tp] = prevOwner{m.id, gen}
			}
		}
	}
	for _, id := range sortedKeys(b.subs) {
		m := b.subs[id]
		switch {
		case m.generation != defaultGeneration && m.generation < b.maxGen:
			update(m, m.generation)
		case m.generation == defaultGeneration && b.maxGen > defaultGeneration:
			update(m, defaultGeneration)
		}
	}
	return prev
}

// assignOwned drops owned partitions of topics the member no longer subscribes to.
func (b *generalBuilder) assignOwned() map[TopicPartition]bool {
	assigned := map[TopicPartition]bool{}
	for c, tps := range b.current {
		kept := tps[:0]
		for _, tp := range tps {
			if !b.consumerTopicSet[c][tp.Topic] {
				b.revocationRequired = true
				delete(b.partitionOwner, tp)
				continue
			}
			kept = append(kept, tp)
			assigned[tp] = true
		}
		b.current[c] = kept
	}
	return assigned
}

func (b *generalBuilder) maxAssignmentSize(c string) int {
	topics := b.consumerTopics[c]
	if len(topics) == len(b.partitions) {
		return b.totalPartitions
	}
	n := 0
	for _, t := range topics {
		n += int(b.partitions[t])
	}
	return n
}

func (b *generalBuilder) isBalanced() bool {
	order := b.sorted()
	if len(order) == 0 {
		return true
	}
	lo, hi := len(b.current[order[0]]), len(b.current[order[len(order)-1]])
	if lo >= hi-1 {
		return true
	}
	owner := map[TopicPartition]string{}
	for c, tps := range b.current {
		for _, tp := range tps {
			owner[tp] = c
		}
	}
	for _, c := range order {
		count := len(b.current[c])
		if count == b.maxAssignmentSize(c) {
			continue
		}
		mine := map[TopicPartition]bool{}
		for _, tp := range b.current[c] {
			mine[tp] = true
		}
		for _, t := range b.consumerTopics[c] {
			for p := int32(0); p < b.partitions[t]; p++ {
				tp := TopicPartition{t, p}
				if mine[tp] {
					continue
				}
				other, ok := owner[tp]
				if ok && count+1 < len(b.current[other]) {
					return false
				}
			}
		}
	}
	return true
}

func balanceScore(a map[string][]TopicPartition) int {
	ids := sortedKeys(a)
	score := 0
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			d := len(a[ids[i]]) - len(a[ids[j]])
			if d < 0 {
				d = -d
			}
			score += d
		}
	}
	return score
}

// maybeAssign gives each unassigned partition to the least loaded member that may have it.
func (b *generalBuilder) maybeAssign(unassigned []TopicPartition) {
	for _, tp := range unassigned {
		if len(b.topicConsumers[tp.Topic]) == 0 {
			continue
		}
		for _, c := range b.sorted() {
			if b.consumerTopicSet[c][tp.Topic] {
				b.current[c] = append(b.current[c], tp)
				b.partitionOwner[tp] = c
				break
			}
		}
	}
}

func (b *generalBuilder) topicCanMove(t string) bool { return len(b.topicConsumers[t]) >= 2 }

func (b *generalBuilder) consumerCanMove(c string) bool {
	if len(b.current[c]) < b.maxAssignmentSize(c) {
		return true
	}
	for _, tp := range b.current[c] {
		if b.topicCanMove(tp.Topic) {
			return true
		}
	}
	return false
}

func (b *generalBuilder) balance(prev map[TopicPartition]prevOwner, unassigned []TopicPartition) {
	initializing := true
	if order := b.sorted(); len(order) > 0 {
		initializing = len(b.current[order[len(order)-1]]) == 0
	}
	b.maybeAssign(unassigned)

	// Only partitions of topics with two or more subscribers, and members that can gain
	// or lose a partition, take part in the moves.
	filter := func(tps []TopicPartition) []TopicPartition {
		out := tps[:0:0]
		for _, tp := range tps {
			if b.topicCanMove(tp.Topic) {
				out = append(out, tp)
			}
		}
		return out
	}
	movable := filter(b.sortedAll)
	unassigned = filter(unassigned)
	fixed := map[string][]TopicPartition{}
	for _, c := range sortedKeys(b.consumerTopicSet) {
		if !b.consumerCanMove(c) {
			delete(b.inSorted, c)
			fixed[c] = b.current[c]
			delete(b.current, c)
		}
	}

	pre := copyAssignment(b.current)
	preOwner := make(map[TopicPartition]string, len(b.partitionOwner))
	for tp, c := range b.partitionOwner {
		preOwner[tp] = c
	}
	if !b.revocationRequired {
		b.performReassignments(unassigned, prev)
	}
	moved := b.performReassignments(movable, prev)
	if !initializing && moved && balanceScore(b.current) >= balanceScore(pre) {
		b.current = pre
		b.partitionOwner = preOwner
	}
	for c, tps := range fixed {
		b.current[c] = tps
		b.inSorted[c] = true
	}
}

func copyAssignment(a map[string][]TopicPartition) map[string][]TopicPartition {
	out := make(map[string][]TopicPartition, len(a))
	for c, tps := range a {
		out[c] = append([]TopicPartition{}, tps...)
	}
	return out
}

func (b *generalBuilder) performReassignments(parts []TopicPartition, prev map[TopicPartition]prevOwner) bool {
	performed := false
	for {
		modified := false
		for _, tp := range parts {
			if b.isBalanced() {
				break
			}
			c, ok := b.partitionOwner[tp]
			if !ok {
				continue
			}
			if p, ok := prev[tp]; ok && b.inSorted[p.consumer] && len(b.current[c]) > len(b.current[p.consumer])+1 {
				b.reassign(tp, p.consumer)
				performed, modified = true, true
				continue
			}
			for _, other := range b.topicConsumers[tp.Topic] {
				if b.inSorted[other] && len(b.current[c]) > len(b.current[other])+1 {
					b.reassignToLeastLoaded(tp)
					performed, modified = true, true
					break
				}
			}
		}
		if !modified {
			return performed
		}
	}
}

func (b *generalBuilder) reassignToLeastLoaded(tp TopicPartition) {
	for _, c := range b.sorted() {
		if b.consumerTopicSet[c][tp.Topic] {
			b.reassign(tp, c)
			return
		}
	}
}

func (b *generalBuilder) reassign(tp TopicPartition, to string) {
	from := b.partitionOwner[tp]
	move := b.movements.actualPartitionToMove(tp, from, to)
	old := b.partitionOwner[move]
	b.movements.move(move, old, to)
	b.current[old] = removeTP(b.current[old], move)
	b.current[to] = append(b.current[to], move)
	b.partitionOwner[move] = to
}

// partitionMovements is Java's PartitionMovements: the moves made in this assignment,
// so that moving a partition from A to B when another partition of the same topic already
// moved from B to A moves that one back instead (keeping both where they were).
type partitionMovements struct {
	byTopic map[string]map[movePair]map[TopicPartition]bool
	byPart  map[TopicPartition]movePair
}

type movePair struct{ src, dst string }

func newPartitionMovements() *partitionMovements {
	return &partitionMovements{byTopic: map[string]map[movePair]map[TopicPartition]bool{}, byPart: map[TopicPartition]movePair{}}
}

func (pm *partitionMovements) remove(tp TopicPartition) movePair {
	pair := pm.byPart[tp]
	delete(pm.byPart, tp)
	t := pm.byTopic[tp.Topic]
	delete(t[pair], tp)
	if len(t[pair]) == 0 {
		delete(t, pair)
	}
	if len(t) == 0 {
		delete(pm.byTopic, tp.Topic)
	}
	return pair
}

func (pm *partitionMovements) add(tp TopicPartition, pair movePair) {
	pm.byPart[tp] = pair
	t := pm.byTopic[tp.Topic]
	if t == nil {
		t = map[movePair]map[TopicPartition]bool{}
		pm.byTopic[tp.Topic] = t
	}
	if t[pair] == nil {
		t[pair] = map[TopicPartition]bool{}
	}
	t[pair][tp] = true
}

func (pm *partitionMovements) move(tp TopicPartition, from, to string) {
	if _, ok := pm.byPart[tp]; ok {
		existing := pm.remove(tp)
		if existing.src != to {
			pm.add(tp, movePair{existing.src, to})
		}
		return
	}
	pm.add(tp, movePair{from, to})
}

// actualPartitionToMove returns tp, or a partition of the same topic that earlier moved
// from to's side to from's side (Java returns any element of that set; we take the
// smallest, for determinism).
func (pm *partitionMovements) actualPartitionToMove(tp TopicPartition, from, to string) TopicPartition {
	t, ok := pm.byTopic[tp.Topic]
	if !ok {
		return tp
	}
	if pair, ok := pm.byPart[tp]; ok {
		from = pair.src
	}
	set, ok := t[movePair{to, from}]
	if !ok || len(set) == 0 {
		return tp
	}
	var best TopicPartition
	first := true
	for cand := range set {
		if first || tpLess(cand, best) {
			best, first = cand, false
		}
	}
	return best
}
