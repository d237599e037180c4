package testcluster

import (
	"strings"
	"testing"
)

func TestMetricsSum(t *testing.T) {
	const body = `# TYPE events_total counter
events_total{type="a",worker="w1"} 2
events_total{type="a",worker="w10"} 3
events_total{type="b",worker="w1"} 5
# TYPE online gauge
online{worker="w1"} 1
# TYPE took_seconds histogram
took_seconds_bucket{op="x",le="+Inf"} 7
took_seconds_sum{op="x"} 0.5
took_seconds_count{op="x"} 7
`
	m := ParseMetrics(t, strings.NewReader(body))
	tests := []struct {
		name   string
		family string
		labels map[string]string
		want   float64
	}{
		{"every series", "events_total", nil, 10},
		{"by one label", "events_total", map[string]string{"type": "a"}, 5},
		{"a value is matched whole, not as a prefix", "events_total", map[string]string{"worker": "w1"}, 7},
		{"by two labels", "events_total", map[string]string{"type": "b", "worker": "w1"}, 5},
		{"a label no series has", "events_total", map[string]string{"queue": "q"}, 0},
		{"no such value", "events_total", map[string]string{"type": "c"}, 0},
		{"a gauge", "online", map[string]string{"worker": "w1"}, 1},
		{"a histogram counts its samples", "took_seconds", map[string]string{"op": "x"}, 7},
		{"no such family", "missing_total", nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.Sum(tc.family, tc.labels); got != tc.want {
				t.Errorf("Sum(%s, %v) = %v, want %v", tc.family, tc.labels, got, tc.want)
			}
		})
	}
}
