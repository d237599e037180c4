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
func binValue(b int) float64 { return MinRuntime * math.Pow(Growth, float64(b)+0.5) }

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

// Stats answers q from the minutes kept.
func (a *Aggregate) Stats(q Query) Result {
	name, worker, queue := Fold(q.TaskName), Fold(q.Worker), Fold(q.Queue)
	filtered := name != "" || worker != "" || queue != ""
	a.mu.RLock()
	defer a.mu.RUnlock()
	// Which keys the filters take, by id.
	var take []bool
	if filtered {
		take = make([]bool, len(a.ents))
		for id := 1; id < len(a.ents); id++ {
			e := &a.ents[id]
			take[id] = e.refs > 0 && (name == "" || foldEqual(name, e.name)) &&
				(worker == "" || foldEqual(worker, e.worker)) && (queue == "" || foldEqual(queue, e.queue))
		}
	}
	res := Result{Buckets: make([]Bucket, q.N)}
	stepMin := int64(q.Step / time.Minute)
	first := floorDiv(q.From.Unix(), 60)
	var hist [Bins]int64
	var pcts []float64
	now := a.nowMinute()
	for b := range res.Buckets {
		bk := &res.Buckets[b]
		bk.Start = q.From.Add(time.Duration(b) * q.Step).UTC()
		clear(hist[:])
		var runs int64
		for m := first + int64(b)*stepMin; m < first+int64(b+1)*stepMin; m++ {
			if m < now-a.retentionMinutes() || m > now+futureMinutes {
				continue
			}
			mi := &a.ring[floorMod(m, a.ringLen)]
			if mi.cells == nil || mi.m != m {
				continue
			}
			for i := range mi.cells {
				c := &mi.cells[i]
				if filtered && !take[c.key] {
					if c.key == otherKey {
						for _, n := range c.n {
							res.Folded += int64(n)
						}
					}
					continue
				}
				for k, n := range c.n {
					bk.Counts[k] += int64(n)
				}
				for _, h := range c.hist {
					hist[h>>24] += int64(h & 0xffffff)
					runs += int64(h & 0xffffff)
				}
			}
		}
		if runs > 0 {
			// One allocation for every bucket's percentiles.
			if pcts == nil {
				pcts = make([]float64, 0, 2*q.N)
			}
			pcts = append(pcts, percentile(&hist, runs, 0.50), percentile(&hist, runs, 0.95))
			bk.P50, bk.P95 = &pcts[len(pcts)-2], &pcts[len(pcts)-1]
		}
	}
	kept := max(a.since, a.droppedBefore, now-a.retentionMinutes())
	if kept > first {
		t := time.Unix(kept*60, 0).UTC()
		res.KeptSince = &t
	}
	return res
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
