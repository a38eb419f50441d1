package cluster

import (
	"fmt"
	"time"
)

// fault is the fault schedule's move: until chaosUntil a random fault every meanFault on
// average, then everything healed once.
func (w *world) fault() {
	if w.now >= w.chaosUntil {
		w.healAll()
		return
	}
	defer w.schedule(&event{at: w.now + w.faultDelay(), kind: evFault})
	n := w.nodes[w.rng.IntN(len(w.nodes))]
	switch r := w.rng.IntN(100); {
	case r < 22:
		up := 0
		for _, m := range w.nodes {
			if m.up {
				up++
			}
		}
		if !n.up || up == 1 {
			return
		}
		w.stats["fault.crash"]++
		n.crash()
		w.schedule(&event{at: w.now + time.Duration(300+w.rng.IntN(6000))*time.Millisecond, kind: evRestart, node: n.index})
	case r < 44:
		w.stats["fault.partition"]++
		w.partition()
	case r < 62:
		w.stats["fault.heal"]++
		w.healCuts()
	case r < 75:
		if !n.up {
			return
		}
		jump := time.Duration(500+w.rng.IntN(15000)) * time.Millisecond
		w.stats["fault.clockjump"]++
		n.skew += jump
		w.tracef("n%d's clock jumps %v ahead (skew %v)", n.id, jump, n.skew)
	case r < 88:
		if !n.up || n.paused() {
			return
		}
		d := time.Duration(200+w.rng.IntN(4000)) * time.Millisecond
		w.stats["fault.pause"]++
		// A stalled process: its monotonic clock runs on, it handles nothing meanwhile.
		n.pausedUntil = w.now + d
		w.tracef("n%d pauses for %v", n.id, d)
		w.schedule(&event{at: n.pausedUntil, kind: evResume, node: n.index, gen: n.gen})
	case r < 94:
		w.startReconfig()
	default:
		w.f.dropPct, w.f.dupPct = w.rng.IntN(15), w.rng.IntN(5)
		w.tracef("network: drop %d%%, dup %d%%", w.f.dropPct, w.f.dupPct)
	}
}

// partition cuts links: one node off both ways, one direction between two nodes, or the
// nodes split into two groups. A cut resets the connections it crosses.
func (w *world) partition() {
	v := len(w.nodes)
	cutPair := func(a, b int) {
		if a != b && !w.cut[a][b] {
			w.cut[a][b] = true
			w.connGen[a][b]++
		}
	}
	switch w.rng.IntN(3) {
	case 0:
		a := w.rng.IntN(v)
		for b := range v {
			cutPair(a, b)
			cutPair(b, a)
		}
		w.tracef("partition: n%d isolated", a+1)
	case 1:
		a, b := w.rng.IntN(v), w.rng.IntN(v)
		cutPair(a, b)
		w.tracef("partition: n%d -> n%d cut", a+1, b+1)
	default:
		side := make([]bool, v)
		for i := range side {
			side[i] = w.rng.IntN(2) == 0
		}
		var s string
		for a := range v {
			for b := range v {
				if side[a] != side[b] {
					cutPair(a, b)
				}
			}
			if side[a] {
				s += fmt.Sprintf(" n%d", a+1)
			}
		}
		w.tracef("partition: {%s } from the rest", s)
	}
}

func (w *world) healCuts() {
	for a := range w.cut {
		for b := range w.cut[a] {
			w.cut[a][b] = false
		}
	}
	w.tracef("partitions healed")
}

// healAll ends the chaos: no cut, every node up and running, the network clean.
func (w *world) healAll() {
	w.tracef("chaos ends: healing everything")
	w.healCuts()
	w.f.dropPct, w.f.dupPct = 0, 0
	for _, n := range w.nodes {
		if !n.up {
			n.restart()
		} else if n.paused() {
			n.pausedUntil = w.now
			w.schedule(&event{at: w.now, kind: evResume, node: n.index, gen: n.gen})
		}
	}
}
