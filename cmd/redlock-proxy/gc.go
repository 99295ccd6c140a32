package main

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// proxy.gc_headroom: the least the heap may grow between two garbage
// collections.
//
// Go starts a collection when the heap has grown by GOGC percent (100) of
// what the last one found live, stacks and globals included, and at 4 MB
// at least. Serving locks, the proxy keeps about a megabyte live and
// allocates tens of megabytes a second, so with the default it collects
// tens of times a second. A fixed higher GOGC would collect less often, but
// would also multiply the heap of a proxy with many clients, whose stacks
// and buffers are most of its memory. The tuner instead reads, once a
// second, what the last collection found and sets GOGC so that the heap
// may grow by the headroom, never below Go's own 100: a small heap gets
// room to grow by the headroom, a large one is left as Go would have it.

// heapMinimum is Go's least heap goal at GOGC=100; it scales with GOGC.
const heapMinimum = 4 << 20

// gcPercent returns the GOGC that lets a heap grow by headroom bytes past
// live, where scan is what the collector scans for GOGC (live heap, stacks
// and globals), and no further: the least heap goal, which GOGC scales too,
// is kept at most live+headroom. Never below 100, Go's default.
func gcPercent(headroom, live, scan uint64) int {
	if headroom == 0 || scan == 0 {
		return 100
	}
	p := (headroom*100 + scan - 1) / scan
	if most := (live + headroom) * 100 / heapMinimum; p > most {
		p = most
	}
	return int(max(p, 100))
}

// gcTuner applies proxy.gc_headroom while the proxy runs.
type gcTuner struct {
	headroom atomic.Int64
	last     int // the GOGC it set last
	samples  []metrics.Sample
}

// gcTunerOff says why the tuner does not run: GOGC set in the environment
// is the operator's choice and is kept.
func gcTunerOff() string {
	if v := os.Getenv("GOGC"); v != "" {
		return "GOGC=" + v + " is set in the environment"
	}
	return ""
}

func newGCTuner(headroom int64) *gcTuner {
	g := &gcTuner{last: 100, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	g.headroom.Store(headroom)
	return g
}

// tune sets GOGC from the last collection's figures. It leaves a value
// within an eighth of the one wanted as it is.
func (g *gcTuner) tune() int {
	metrics.Read(g.samples)
	var v [3]uint64
	for i, s := range g.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	want := gcPercent(uint64(g.headroom.Load()), v[0], v[0]+v[1]+v[2])
	if d := want - g.last; d > g.last/8 || -d > g.last/8 {
		debug.SetGCPercent(want)
		g.last = want
	}
	return g.last
}

// run tunes once a second until stop is closed.
func (g *gcTuner) run(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		g.tune()
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}
