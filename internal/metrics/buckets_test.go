package metrics

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestParseRuntimeBuckets: Flower's --task_runtime_metric_buckets, a
// comma-separated list of floats ending in inf or not; what the Go client
// would panic on, or silently replace by its default, is refused.
func TestParseRuntimeBuckets(t *testing.T) {
	hundred := make([]string, MaxRuntimeBuckets)
	for i := range hundred {
		hundred[i] = fmt.Sprint(i + 1)
	}
	for _, tc := range []struct {
		in      string
		want    []float64
		wantErr string
	}{
		{in: "0.5,1,2", want: []float64{0.5, 1, 2}},
		{in: " 0.1, 0.5 ,10 ", want: []float64{0.1, 0.5, 10}},
		{in: "0.5,1,inf", want: []float64{0.5, 1}},
		{in: "0.5,+Inf", want: []float64{0.5}},
		{in: "1e-3,Infinity", want: []float64{0.001}},
		{in: strings.Join(hundred, ","), want: func() []float64 {
			f := make([]float64, MaxRuntimeBuckets)
			for i := range f {
				f[i] = float64(i + 1)
			}
			return f
		}()},
		{in: strings.Join(hundred, ",") + ",101", wantErr: "want at most 100 buckets, got 101"},
		{in: "", wantErr: `bucket 1 ("") is not a number`},
		{in: "0.5,,1", wantErr: `bucket 2 ("") is not a number`},
		{in: "0.5,soon", wantErr: `bucket 2 ("soon") is not a number`},
		{in: "inf", wantErr: "want at least one finite bucket"},
		{in: "0.5,inf,1", wantErr: "bucket 2 is +Inf: want a finite number"},
		{in: "nan,1", wantErr: "bucket 1 is NaN"},
		{in: "-inf,1", wantErr: "bucket 1 is -Inf"},
		{in: "0,1", wantErr: "bucket 1 is 0: want a positive number"},
		{in: "-1,1", wantErr: "bucket 1 is -1: want a positive number"},
		{in: "1,0.5", wantErr: "bucket 2 (0.5) is not above bucket 1 (1): want increasing values"},
		{in: "1,1", wantErr: "bucket 2 (1) is not above bucket 1 (1)"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRuntimeBuckets(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseRuntimeBuckets(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ParseRuntimeBuckets(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// runtimeLEs are the le labels of flower_task_runtime_seconds' buckets in
// a scrape.
func runtimeLEs(body string) []string {
	var les []string
	for _, m := range regexp.MustCompile(`flower_task_runtime_seconds_bucket\{[^}]*le="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		les = append(les, m[1])
	}
	return les
}

// TestRuntimeBuckets: flower_task_runtime_seconds has the buckets New is
// given, else Flower's default ones (the Python client's), and +Inf.
func TestRuntimeBuckets(t *testing.T) {
	for _, tc := range []struct {
		buckets []float64
		want    []string
	}{
		{nil, []string{"0.005", "0.01", "0.025", "0.05", "0.075", "0.1", "0.25", "0.5", "0.75", "1", "2.5", "5", "7.5", "10", "+Inf"}},
		{[]float64{0.0005, 0.5, 2}, []string{"0.0005", "0.5", "2", "+Inf"}},
	} {
		m := New(tc.buckets)
		m.Observe(Event{Type: "task-succeeded", UUID: "a", Task: "task1", Worker: "worker1", Runtime: 0.3})
		if got := runtimeLEs(scrape(t, m)); !slices.Equal(got, tc.want) {
			t.Errorf("buckets %v: le %v, want %v", tc.buckets, got, tc.want)
		}
	}
}
