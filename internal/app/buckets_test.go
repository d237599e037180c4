package app

import (
	"context"
	"strings"
	"testing"
)

// TestNewRefusesBadRuntimeBuckets: buckets the Prometheus client would
// panic on stop New with an error naming the option, before a broker is
// started or dialled.
func TestNewRefusesBadRuntimeBuckets(t *testing.T) {
	for _, buckets := range [][]float64{{1, 0.5}, {}, {0, 1}} {
		a, err := New(context.Background(), Config{EmbeddedAddr: "127.0.0.1:0", TaskRuntimeBuckets: buckets})
		if err == nil {
			a.Close()
			t.Fatalf("buckets %v: New succeeded", buckets)
		}
		if !strings.Contains(err.Error(), "task_runtime_metric_buckets: ") {
			t.Errorf("buckets %v: error %q does not name the option", buckets, err)
		}
	}
}
