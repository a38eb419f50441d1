package sharepartition

import "slices"

// A batch whose records have many distinct states (P7's worst case: a consumer
// that accepts and rejects alternately, so every record differs from its
// neighbours) costs a 56-byte run per record as runs. Such a batch is packed
// at the end of the step that made it so: two bytes per offset, holding the
// state, the delivery count and a reference into a small table of the owner,
// lock and staging parts its records have (one entry per acquisition lock or
// per staged transaction and ack type, not per record).
//
// Every rule works on runs and records, so carve hands out the carved range of a
// packed batch decoded as runs (pend), which the caller changes in place; the next
// access to the batch writes them back (settle), so a step that touches a few
// records of a packed batch costs what those records cost, not the batch. A record
// no code can hold (a delivery count above 31, a 256th owner entry) turns the batch
// back into runs; the step's end packs it again, with a fresh owner table. Owner
// entries are never removed before that, so the table may hold entries no code
// refers to any more: anyOwner is a filter that may answer true in vain, never
// false wrongly.

const (
	// packCountLimit is the largest delivery count a packed code holds (5 bits). A
	// batch with a higher count stays as runs: share.delivery.count.limit is at most
	// 10 in Kafka, so only a foreign writer's state or an unusual limit gets there.
	packCountLimit = 31
	// packMaxOwners is the most distinct owner entries a packed batch refers to (8 bits).
	packMaxOwners = 255
	// packOffsetsPerRun bounds the offsets per run of a batch worth packing: a run costs
	// 56 bytes and a packed offset 2, so packing at most 32 offsets per run never takes
	// more memory, and a batch spanning many offsets with few states (a 10^9-offset log
	// batch) always stays as runs.
	packOffsetsPerRun = 32
)

// packMinRuns is the fewest runs a batch must have to be packed: below it the
// table and slice headers cost what they save, and a step on a batch with few
// states is cheaper on runs. A variable so that the model tests can pack the small
// batches they make.
var packMinRuns = 16

// packed is the per-offset state of a batch: code i describes offset lo+i. Offsets
// of the batch below lo are below the SPSO: terminal and never read again.
type packed struct {
	lo    int64
	codes []uint16 // state (bits 0-2), delivery count (bits 3-7), owner reference (bits 8-15; 0: none)
	// owners are the distinct non-plain records the codes refer to, delivery count 0.
	owners []record
	// pend are the runs the last carve handed out, possibly changed since: they hold
	// the truth for their offsets until settle writes them back.
	pend []run
}

func code(r *record, ref int) uint16 {
	return uint16(r.state) | uint16(r.count)<<3 | uint16(ref)<<8
}

func codeState(c uint16) State { return State(c & 7) }

// plain reports whether r has no owner, lock or staging: its state and delivery
// count say everything about it.
func (r *record) plain() bool {
	return r.member == "" && r.deadlineMs == 0 && r.stagedPID == -1 && r.stagedEpoch == -1 &&
		r.stagedAck == ackNone && !r.abortArchive
}

// record decodes code c.
func (p *packed) record(c uint16) record {
	var r record
	if ref := c >> 8; ref != 0 {
		r = p.owners[ref-1]
	} else {
		r.clearOwner()
	}
	r.state, r.count = codeState(c), int16(c>>3&31)
	return r
}

// deadRecord stands for the offsets of a packed batch below its lo.
func deadRecord() record {
	r := record{state: Archived}
	r.clearOwner()
	return r
}

// maybePack packs b (as runs, coalesced) when that is smaller and possible.
func (b *batch) maybePack(spso int64) {
	lo := max(b.first, spso)
	if len(b.runs) < max(packMinRuns, 2) || b.last < lo || b.last-lo+1 > packOffsetsPerRun*int64(len(b.runs)) {
		return
	}
	p := &packed{lo: lo}
	var index map[record]int // owner look-up once the table is no longer tiny
	ref := func(r *record) int {
		if r.plain() {
			return 0
		}
		key := *r
		key.count = 0
		if index != nil {
			if i, ok := index[key]; ok {
				return i
			}
		} else {
			for i := len(p.owners) - 1; i >= 0; i-- {
				if p.owners[i] == key {
					return i + 1
				}
			}
		}
		if len(p.owners) == packMaxOwners {
			return -1
		}
		p.owners = append(p.owners, key)
		if index == nil && len(p.owners) > 8 {
			index = make(map[record]int, 2*len(p.owners))
			for i, o := range p.owners {
				index[o] = i + 1
			}
		} else if index != nil {
			index[key] = len(p.owners)
		}
		return len(p.owners)
	}
	for i := range b.runs {
		r := &b.runs[i]
		if r.last < lo {
			continue
		}
		if r.rec.count < 0 || r.rec.count > packCountLimit {
			return
		}
		k := ref(&r.rec)
		if k < 0 {
			return
		}
		c := code(&r.rec, k)
		if p.codes == nil {
			p.codes = make([]uint16, 0, b.last-lo+1)
		}
		for range r.last - max(r.first, lo) + 1 {
			p.codes = append(p.codes, c)
		}
	}
	b.pk, b.runs = p, nil
}

// encode returns the code of r, adding an owner entry if needed, or false when no
// code can hold r.
func (p *packed) encode(r *record) (uint16, bool) {
	if r.count < 0 || r.count > packCountLimit {
		return 0, false
	}
	if r.plain() {
		return code(r, 0), true
	}
	key := *r
	key.count = 0
	for i := len(p.owners) - 1; i >= 0; i-- {
		if p.owners[i] == key {
			return code(r, i+1), true
		}
	}
	if len(p.owners) == packMaxOwners {
		return 0, false
	}
	p.owners = append(p.owners, key)
	return code(r, len(p.owners)), true
}

// settle writes back the runs the last carve of a packed b handed out, or turns b
// into runs when one of them no code can hold.
func (b *batch) settle() {
	p := b.pk
	if p == nil || p.pend == nil {
		return
	}
	pend := p.pend
	p.pend = nil
	for i := range pend {
		r := &pend[i]
		if r.last < p.lo {
			continue // below the SPSO: never read again
		}
		c, ok := p.encode(&r.rec)
		if !ok {
			b.unpack()
			i, j := b.cut(pend[0].first), b.cut(pend[len(pend)-1].last+1)
			b.runs = slices.Replace(b.runs, i, j, pend...)
			return
		}
		for o := max(r.first, p.lo); o <= r.last; o++ {
			p.codes[o-p.lo] = c
		}
	}
}

// carve decodes [lo, hi] (inside the batch) into runs for the caller to change,
// which settle writes back.
func (p *packed) carve(b *batch, lo, hi int64) []run {
	var out []run
	if lo < p.lo {
		out = append(out, run{first: lo, last: min(hi, p.lo-1), rec: deadRecord()})
		lo = p.lo
	}
	if lo <= hi {
		p.eachCode(lo, hi, func(first, last int64, c uint16) bool {
			out = append(out, run{first: first, last: last, rec: p.record(c)})
			return true
		})
	}
	p.pend = out
	return out
}

// unpack turns a packed b (settled) back into runs.
func (b *batch) unpack() {
	p := b.pk
	n := 1
	if p.lo > b.first {
		n++
	}
	for i := 1; i < len(p.codes); i++ {
		if p.codes[i] != p.codes[i-1] {
			n++
		}
	}
	runs := make([]run, 0, n)
	if p.lo > b.first {
		runs = append(runs, run{first: b.first, last: p.lo - 1, rec: deadRecord()})
	}
	p.eachCode(p.lo, b.last, func(first, last int64, c uint16) bool {
		runs = append(runs, run{first: first, last: last, rec: p.record(c)})
		return true
	})
	b.pk, b.runs = nil, runs
}

// eachCode calls f for the maximal stretches of equal codes in [lo, hi] (inside
// [p.lo, batch last]), clipped to it, until f returns false.
func (p *packed) eachCode(lo, hi int64, f func(first, last int64, c uint16) bool) {
	i, end := int(lo-p.lo), int(hi-p.lo)
	for i <= end {
		c, j := p.codes[i], i
		for j < end && p.codes[j+1] == c {
			j++
		}
		if !f(p.lo+int64(i), p.lo+int64(j), c) {
			return
		}
		i = j + 1
	}
}

// find returns the first offset in [lo, hi] whose state satisfies want, or false
// (p settled).
func (p *packed) find(lo, hi int64, want func(State) bool) (int64, bool) {
	lo = max(lo, p.lo)
	for i, end := lo-p.lo, hi-p.lo; i <= end; i++ {
		if want(codeState(p.codes[i])) {
			return p.lo + i, true
		}
	}
	return 0, false
}

// anyOwner reports whether an owner entry satisfies f: false means that no record
// of the batch does (for an f that only owned records can satisfy).
func (p *packed) anyOwner(f func(r *record) bool) bool {
	for i := range p.owners {
		if f(&p.owners[i]) {
			return true
		}
	}
	return false
}

// trim drops the codes below the SPSO once they are most of the batch (p settled).
func (p *packed) trim(spso int64) {
	if k := spso - p.lo; k > 0 && k >= int64(len(p.codes))/2 {
		k = min(k, int64(len(p.codes)))
		p.codes = append([]uint16(nil), p.codes[k:]...)
		p.lo += k
	}
}

func (p *packed) clone() *packed {
	if p == nil {
		return nil
	}
	c := *p
	c.codes = append([]uint16(nil), p.codes...)
	c.owners = append([]record(nil), p.owners...)
	c.pend = append([]run(nil), p.pend...)
	return &c
}

// findState returns the first offset in [lo, hi] whose state satisfies want.
func (b *batch) findState(lo, hi int64, want func(State) bool) (int64, bool) {
	b.settle()
	if b.pk != nil {
		return b.pk.find(lo, hi, want)
	}
	found, at := false, int64(0)
	b.each(lo, hi, func(first, _ int64, r *record) bool {
		if want(r.state) {
			found, at = true, first
		}
		return !found
	})
	return at, found
}

// stretch returns the record of offset o (a copy, for reading) and the last offset
// up to hi that shares it.
func (b *batch) stretch(o, hi int64) (int64, record) {
	b.settle()
	switch p := b.pk; {
	case p != nil:
		if o < p.lo {
			return min(hi, p.lo-1), deadRecord()
		}
		i, end := o-p.lo, hi-p.lo
		c, j := p.codes[i], i
		for j < end && p.codes[j+1] == c {
			j++
		}
		return p.lo + j, p.record(c)
	case b.runs != nil:
		r := &b.runs[b.runIndex(o)]
		return min(hi, r.last), r.rec
	}
	return hi, b.rec
}

// anyOwner is packed.anyOwner of a packed b, settled first.
func (b *batch) anyOwner(f func(r *record) bool) bool {
	b.settle()
	return b.pk == nil || b.pk.anyOwner(f)
}

// changeMatching calls f on every record of a batch with per-offset state that
// satisfies match, carved so that f may change it. match must not depend on the
// delivery count, and for a packed batch only owned records may satisfy it.
func (sp *SharePartition) changeMatching(b *batch, match func(*record) bool, f func(r *run)) {
	if b.pk != nil && !b.anyOwner(match) {
		return
	}
	var todo [][2]int64
	b.each(b.first, b.last, func(first, last int64, r *record) bool {
		if match(r) {
			todo = append(todo, [2]int64{first, last})
		}
		return true
	})
	for _, rg := range todo {
		rs := sp.carve(b, rg[0], rg[1])
		for i := range rs {
			if match(&rs[i].rec) {
				f(&rs[i])
			}
		}
	}
}

// each calls f for the stretches of [lo, hi] (clipped to the batch) that share one
// record, in offset order, until f returns false: the whole range of a batch-level
// state, its runs, or its packed codes. r is only valid during the call and must not
// be changed.
func (b *batch) each(lo, hi int64, f func(first, last int64, r *record) bool) {
	lo, hi = max(lo, b.first), min(hi, b.last)
	if lo > hi {
		return
	}
	b.settle()
	switch {
	case b.pk != nil:
		p := b.pk
		if lo < p.lo {
			dead := deadRecord()
			if !f(lo, min(hi, p.lo-1), &dead) {
				return
			}
			lo = p.lo
		}
		if lo > hi {
			return
		}
		var r record // one for the whole walk: f gets its address
		p.eachCode(lo, hi, func(first, last int64, c uint16) bool {
			r = p.record(c)
			return f(first, last, &r)
		})
	case b.runs != nil:
		rs := b.overlapping(lo, hi)
		for i := range rs {
			if !f(max(rs[i].first, lo), min(rs[i].last, hi), &rs[i].rec) {
				return
			}
		}
	default:
		f(lo, hi, &b.rec)
	}
}

// uniform reports whether every record of b has the batch-level state b.rec.
func (b *batch) uniform() bool { return b.runs == nil && b.pk == nil }

// runCount is the number of state entries b holds: 1 for batch-level state.
func (b *batch) runCount() int {
	b.settle()
	switch {
	case b.pk != nil:
		n := 0
		b.each(b.first, b.last, func(int64, int64, *record) bool { n++; return true })
		return n
	case b.runs != nil:
		return len(b.runs)
	}
	return 1
}
