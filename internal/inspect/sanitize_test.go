package inspect

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSanitizeMasksSecrets checks what /api/workers shows of a worker's
// replies: the broker password in stats masked as Flower 2.1 does, the
// failover alternates dropped, and passwords inside any URL masked, while
// the rest is left as the worker sent it.
func TestSanitizeMasksSecrets(t *testing.T) {
	for _, tc := range []struct {
		name, method, in string
		want             map[string]any
	}{
		{
			name:   "stats broker",
			method: "stats",
			in: `{"pid": 7, "broker": {"hostname": "rabbit", "userid": "celery", "password": "s3cret",
				"port": 5672, "alternates": ["amqp://celery:s3cret@other//"]}}`,
			want: map[string]any{"pid": float64(7), "broker": map[string]any{
				"hostname": "rabbit", "userid": "celery", "password": "**", "port": float64(5672)}},
		},
		{
			name:   "conf urls",
			method: "conf",
			in: `{"broker_url": "amqp://celery:s3cret@rabbit:5672/vh", "result_backend": "redis://:s3cret@redis:6379/1",
				"task_default_queue": "celery"}`,
			want: map[string]any{"broker_url": "amqp://celery:**@rabbit:5672/vh",
				"result_backend": "redis://:**@redis:6379/1", "task_default_queue": "celery"},
		},
		{
			name:   "no secret",
			method: "active_queues",
			in:     `{"name": "celery", "exchange": {"name": "celery", "type": "direct"}}`,
			want:   map[string]any{"name": "celery", "exchange": map[string]any{"name": "celery", "type": "direct"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := sanitize(tc.method, json.RawMessage(tc.in))
			if strings.Contains(string(out), "s3cret") {
				t.Errorf("the secret is still there: %s", out)
			}
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
