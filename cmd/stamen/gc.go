package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// defaultGCPercent replaces Go's 100 unless GOGC is set. The task state is
// a few large pointer-free arrays, which a collection does not scan, so
// collecting five times as often costs little CPU, while it keeps the
// process within about a third of its live heap instead of over twice it
// (bench/RESULTS.md: about 270 MB resident at a million tasks).
const defaultGCPercent = 20

// gcHeadroom is the least the heap may grow between two collections. At
// 20% alone a small state collects very often: at 10,000 tasks the live
// heap is about 15 MB, 3 MB of headroom, and the reads' garbage (about
// 120 KB a task list) ran 60 to 90 collections a second, a share of two
// cores and the reads' tail (bench/RESULTS.md, reads under load). With the
// headroom the percent rises while the live heap is under five times it,
// and stays 20 above that (a million tasks), so the memory a large state
// costs is unchanged and a small one costs at most this much more.
const gcHeadroom = 32 << 20

// gcTuner keeps the GC percent at defaultGCPercent, or higher so that the
// heap may grow by at least gcHeadroom, as the live heap changes: it
// re-reads the live heap after every collection.
type gcTuner struct {
	sample  []metrics.Sample
	percent int
}

// tuneGC sets the GC percent and keeps it tuned for the life of the
// process.
func tuneGC() {
	g := &gcTuner{sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	g.tune()
	g.arm()
}

// gcTick is garbage as soon as it is made: its finalizer runs after the
// next collection, and arms the next one. (A pointer field keeps it off the
// tiny allocator, whose objects may never be finalized.)
type gcTick struct{ g *gcTuner }

func (g *gcTuner) arm() {
	runtime.SetFinalizer(&gcTick{g: g}, func(t *gcTick) {
		t.g.tune()
		t.g.arm()
	})
}

func (g *gcTuner) tune() {
	metrics.Read(g.sample)
	var live uint64
	if g.sample[0].Value.Kind() == metrics.KindUint64 {
		live = g.sample[0].Value.Uint64()
	}
	p := gcPercentFor(live)
	if p != g.percent {
		g.percent = p
		debug.SetGCPercent(p)
	}
}

// gcPercentFor is the percent that lets a live heap of live bytes grow by
// defaultGCPercent or gcHeadroom, whichever is more, rounded up to a
// multiple of 10 so that small changes of the live heap do not reset it
// after every collection.
func gcPercentFor(live uint64) int {
	const most = 1000 // an empty heap: the runtime's own 4 MB minimum scales with it
	if live == 0 {
		return most
	}
	p := int((gcHeadroom*100 + live - 1) / live)
	p = (p + 9) / 10 * 10
	return min(max(p, defaultGCPercent), most)
}
