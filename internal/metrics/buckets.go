package metrics

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxRuntimeBuckets bounds the buckets of flower_task_runtime_seconds:
// each is a series per worker and task name.
const MaxRuntimeBuckets = 100

// DefaultRuntimeBuckets are flower_task_runtime_seconds' buckets unless
// told otherwise (--task_runtime_metric_buckets): Flower's default, the
// Python client's Histogram.DEFAULT_BUCKETS, which has 0.075, 0.75 and 7.5
// beyond the Go client's prometheus.DefBuckets, so that a dashboard's
// le="0.75" reads the same from stamen as from Flower.
var DefaultRuntimeBuckets = []float64{.005, .01, .025, .05, .075, .1, .25, .5, .75, 1, 2.5, 5, 7.5, 10}

// ParseRuntimeBuckets reads Flower's --task_runtime_metric_buckets: a
// comma-separated list of upper bounds in seconds, as Tornado reads a
// multiple float option. inf (or +inf, infinity), which Flower's
// Python client wants last, is accepted there and dropped: the Go client
// adds the +Inf bucket itself.
func ParseRuntimeBuckets(s string) ([]float64, error) {
	parts := strings.Split(s, ",")
	buckets := make([]float64, 0, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, fmt.Errorf("bucket %d (%q) is not a number", i+1, strings.TrimSpace(p))
		}
		if math.IsInf(v, 1) && i == len(parts)-1 {
			break
		}
		buckets = append(buckets, v)
	}
	if err := CheckRuntimeBuckets(buckets); err != nil {
		return nil, err
	}
	return buckets, nil
}

// CheckRuntimeBuckets says what is wrong with buckets for
// flower_task_runtime_seconds, if anything: they must be finite, positive
// and strictly increasing, at least one and at most MaxRuntimeBuckets
// (the Go client would panic on some of these, and take an empty list for
// its default).
func CheckRuntimeBuckets(buckets []float64) error {
	if len(buckets) == 0 {
		return errors.New("want at least one finite bucket")
	}
	if len(buckets) > MaxRuntimeBuckets {
		return fmt.Errorf("want at most %d buckets, got %d", MaxRuntimeBuckets, len(buckets))
	}
	for i, v := range buckets {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			return fmt.Errorf("bucket %d is %v: want a finite number (inf only last)", i+1, v)
		case v <= 0:
			return fmt.Errorf("bucket %d is %v: want a positive number of seconds", i+1, v)
		case i > 0 && v <= buckets[i-1]:
			return fmt.Errorf("bucket %d (%v) is not above bucket %d (%v): want increasing values", i+1, v, i, buckets[i-1])
		}
	}
	return nil
}
