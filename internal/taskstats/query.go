package taskstats

import (
	"fmt"
	"math"
	"time"
)

// The runtime histogram: Bins logarithmic bins from MinRuntime to
// MaxRuntime seconds, each Growth times as wide as the one before. A
// runtime is estimated as its bin's geometric middle, within
// sqrt(Growth)-1 (7.46%) of the true value; runtimes outside the range
// count in the first or the last bin.
const (
	Bins       = 128
	MinRuntime = 1e-3
	MaxRuntime = 1e5
)

var (
	// Growth is the ratio of a bin's upper bound to its lower one.
	Growth    = math.Pow(MaxRuntime/MinRuntime, 1.0/Bins)
	logGrowth = math.Log(Growth)
	// MaxRelativeError bounds how far an estimated percentile is from
	// the runtime of that rank, relatively, inside the range.
	MaxRelativeError = math.Sqrt(Growth) - 1
)

// Bin is the histogram bin of a runtime in seconds.
func Bin(runtime float64) int {
	if !(runtime > MinRuntime) {
		return 0
	}
	b := int(math.Log(runtime/MinRuntime) / logGrowth)
	return min(max(b, 0), Bins-1)
}

// binValue is the estimate of a runtime in bin b: its geometric middle.
func binValue(b int) float64 { return binValues[b] }

var binValues = func() (v [Bins]float64) {
	for b := range v {
		v[b] = MinRuntime * math.Pow(Growth, float64(b)+0.5)
	}
	return v
}()

// Limits of a query.
const (
	MaxWindow  = 7 * 24 * time.Hour
	MinStep    = time.Minute
	MaxBuckets = 10080
)

// Query selects buckets: N buckets of Step from From, the filters exact
// and case-insensitive (ASCII, as the task list's), "" or "All" for none.
type Query struct {
	From                    time.Time
	Step                    time.Duration
	N                       int
	TaskName, Worker, Queue string
}

// End is the end of the last bucket.
func (q Query) End() time.Time { return q.From.Add(time.Duration(q.N) * q.Step) }

// NewQuery is the query for the buckets of step over the window before
// now: aligned to multiples of step since the Unix epoch, the last one
// holding now, as many as cover window.
func NewQuery(now time.Time, window, step time.Duration) (Query, error) {
	switch {
	case window <= 0 || window > MaxWindow:
		return Query{}, fmt.Errorf("window must be between 1 and %d seconds", int64(MaxWindow/time.Second))
	case step < MinStep || step%MinStep != 0:
		return Query{}, fmt.Errorf("step must be a multiple of 60 seconds")
	case step > window:
		return Query{}, fmt.Errorf("step (%d s) must not exceed window (%d s)", int64(step/time.Second), int64(window/time.Second))
	}
	n := int((window + step - 1) / step)
	if n > MaxBuckets {
		return Query{}, fmt.Errorf("window/step makes %d buckets, more than %d", n, MaxBuckets)
	}
	s := int64(step / time.Second)
	last := floorDiv(now.Unix(), s) * s
	from := time.Unix(last-int64(n-1)*s, 0).UTC()
	return Query{From: from, Step: step, N: n}, nil
}

// Bucket is one step's counts.
type Bucket struct {
	Start  time.Time
	Counts [NumKinds]int64
	// P50 and P95 are the successes' runtime percentiles, seconds; nil
	// without a success with a runtime.
	P50, P95 *float64
}

// Result answers a Query.
type Result struct {
	Buckets []Bucket
	// KeptSince, when not nil, is when the counts start being whole: the
	// window reaches back before it.
	KeptSince *time.Time
	// Folded is how many of the window's events a filtered query could
	// not see, counted under `other`.
	Folded int64
}

// Fold is the filters' case folding: ASCII only, as the task list's.
func Fold(s string) string {
	if s == "All" {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

func foldEqual(filter, v string) bool {
	if len(filter) != len(v) {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != filter[i] {
			return false
		}
	}
	return true
}

// Stats answers q from the minutes kept. Its cost follows the window's
// minutes, not the keys: without a filter it reads each minute's total;
// with one, the cells of the keys the filter takes (found by the
// minute's index when the minute has many), so a read holds the lock
// that Add waits for only briefly whatever the number of keys.
func (a *Aggregate) Stats(q Query) Result {
	name, worker, queue := Fold(q.TaskName), Fold(q.Worker), Fold(q.Queue)
	filtered := name != "" || worker != "" || queue != ""
	res := Result{Buckets: make([]Bucket, q.N)}
	stepMin := int64(q.Step / time.Minute)
	first := floorDiv(q.From.Unix(), 60)
	for b := range res.Buckets {
		res.Buckets[b].Start = q.From.Add(time.Duration(b) * q.Step).UTC()
	}
	var hist [Bins]int64
	var runs int64
	cur := int64(-1) // the bucket hist holds
	var pcts []float64
	// flush sets the percentiles of the bucket hist holds.
	flush := func() {
		if runs == 0 {
			return
		}
		if pcts == nil { // one allocation for every bucket's percentiles
			pcts = make([]float64, 0, 2*q.N)
		}
		pcts = append(pcts, percentile(&hist, runs, 0.50), percentile(&hist, runs, 0.95))
		bk := &res.Buckets[cur]
		bk.P50, bk.P95 = &pcts[len(pcts)-2], &pcts[len(pcts)-1]
		clear(hist[:])
		runs = 0
	}
	// add adds a cell's counts to the current bucket, times sign.
	add := func(c *cell, sign int64) {
		bk := &res.Buckets[cur]
		for k, n := range c.n {
			bk.Counts[k] += sign * int64(n)
		}
		for _, h := range c.hist {
			hist[h>>24] += sign * int64(h&0xffffff)
			runs += sign * int64(h&0xffffff)
		}
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	// Which keys the filters take, by id; the held ones taken (ids) and
	// not taken (skip), the smaller list then looked up in each minute.
	var take []bool
	var ids, skip []uint32
	if filtered {
		take = make([]bool, len(a.ents))
		for id := 1; id < len(a.ents); id++ {
			e := &a.ents[id]
			if e.refs == 0 {
				continue
			}
			if (name == "" || foldEqual(name, e.name)) && (worker == "" || foldEqual(worker, e.worker)) &&
				(queue == "" || foldEqual(queue, e.queue)) {
				take[id] = true
				ids = append(ids, uint32(id))
			} else {
				skip = append(skip, uint32(id))
			}
		}
	}
	// A filter taking most keys reads each minute's total less the cells
	// of the keys it does not take (`other` among them).
	subtract := len(skip) < len(ids)
	now := a.nowMinute()
	// Only the minutes both in the window and kept are visited.
	lo := max(first, now-a.retentionMinutes())
	hi := min(first+int64(q.N)*stepMin, now+futureMinutes+1)
	for m := lo; m < hi; m++ {
		mi := &a.ring[floorMod(m, a.ringLen)]
		if mi.cells == nil || mi.m != m {
			continue
		}
		if b := (m - first) / stepMin; b != cur {
			flush()
			cur = b
		}
		if !filtered {
			add(mi.total, 1)
			continue
		}
		sign, list := int64(1), ids
		if subtract {
			add(mi.total, 1)
			sign, list = -1, skip
		}
		if mi.index != nil && 4*(len(list)+1) < len(mi.cells) {
			// Few keys to look at among many cells: look them up.
			if j, ok := mi.index[otherKey]; ok {
				res.Folded += sumCounts(&mi.cells[j])
				if subtract {
					add(&mi.cells[j], -1)
				}
			}
			for _, id := range list {
				if j, ok := mi.index[id]; ok {
					add(&mi.cells[j], sign)
				}
			}
			continue
		}
		for i := range mi.cells {
			c := &mi.cells[i]
			if c.key == otherKey {
				res.Folded += sumCounts(c)
			}
			if take[c.key] != subtract {
				add(c, sign)
			}
		}
	}
	flush()
	kept := max(a.since, a.droppedBefore, now-a.retentionMinutes())
	if kept > first {
		t := time.Unix(kept*60, 0).UTC()
		res.KeptSince = &t
	}
	return res
}

func sumCounts(c *cell) int64 {
	var s int64
	for _, n := range c.n {
		s += int64(n)
	}
	return s
}

// Percentiles estimates the 50th and 95th percentiles of the runtimes
// counted in hist by bin; nil when it holds none.
func Percentiles(hist *[Bins]int64) (p50, p95 *float64) {
	var n int64
	for _, c := range hist {
		n += c
	}
	if n <= 0 {
		return nil, nil
	}
	a, b := percentile(hist, n, 0.50), percentile(hist, n, 0.95)
	return &a, &b
}

// percentile is the nearest-rank percentile p of n runtimes in hist.
func percentile(hist *[Bins]int64, n int64, p float64) float64 {
	rank := int64(math.Ceil(p * float64(n)))
	rank = max(rank, 1)
	var seen int64
	for b, c := range hist {
		seen += c
		if seen >= rank {
			return binValue(b)
		}
	}
	return binValue(Bins - 1)
}
