package inspect

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSanitizeMasksSecrets checks what /api/workers shows of a worker's
// replies: the broker's settings in stats masked by Celery's rule (its
// password, Sentinel's password in transport_options), the failover
// alternates dropped as Flower 2.1 does, every secret setting in conf
// masked at any depth, and passwords inside any URL masked whole, while the
// rest is left as the worker sent it.
func TestSanitizeMasksSecrets(t *testing.T) {
	for _, tc := range []struct {
		name, method, in string
		want             map[string]any
	}{
		{
			name:   "stats broker",
			method: "stats",
			in: `{"pid": 7, "broker": {"hostname": "rabbit", "userid": "celery", "password": "s3cret",
				"port": 5672, "alternates": ["amqp://celery:s3cret@other//"],
				"transport_options": {"visibility_timeout": 60, "sentinel_kwargs": {"password": "s3cret"}}},
				"total": {"app.refresh_token": 3}}`,
			want: map[string]any{"pid": float64(7), "broker": map[string]any{
				"hostname": "rabbit", "userid": "celery", "password": "********", "port": float64(5672),
				"transport_options": map[string]any{"visibility_timeout": float64(60),
					"sentinel_kwargs": map[string]any{"password": "********"}}},
				// Task names are not settings: a count stays a count.
				"total": map[string]any{"app.refresh_token": float64(3)}},
		},
		{
			name:   "conf uncensored",
			method: "conf",
			in: `{"broker_password": "s3cret", "my_api_key": "s3cret", "aws_secret_access_key": "s3cret",
				"broker_transport_options": {"sentinel_kwargs": {"password": "s3cret"}, "master_name": "m"},
				"beat_schedule": {"b": {"task": "t", "kwargs": {"token": "s3cret"}}},
				"my_urls": ["redis://:s3@cret@h1/0;redis://:s3:c/ret@h2/0"]}`,
			want: map[string]any{"broker_password": "********", "my_api_key": "********", "aws_secret_access_key": "********",
				"broker_transport_options": map[string]any{"sentinel_kwargs": map[string]any{"password": "********"}, "master_name": "m"},
				"beat_schedule":            map[string]any{"b": map[string]any{"task": "t", "kwargs": map[string]any{"token": "********"}}},
				"my_urls":                  []any{"redis://:********@h1/0;redis://:********@h2/0"}},
		},
		{
			name:   "active task",
			method: "active",
			in:     `[{"id": "1", "args": ["redis://:s3@cret@h/0"], "delivery_info": {"routing_key": "celery", "priority": 0}}]`,
			want:   nil, // checked below: a list
		},
		{
			name:   "conf urls",
			method: "conf",
			in: `{"broker_url": "amqp://celery:s3cret@rabbit:5672/vh", "result_backend": "redis://:s3@cret@redis:6379/1",
				"task_default_queue": "celery"}`,
			want: map[string]any{"broker_url": "amqp://celery:********@rabbit:5672/vh",
				"result_backend": "redis://:********@redis:6379/1", "task_default_queue": "celery"},
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
			if tc.want == nil {
				if want := `[{"args":["redis://:********@h/0"],"delivery_info":{"priority":0,"routing_key":"celery"},"id":"1"}]`; string(out) != want {
					t.Errorf("got %s, want %s", out, want)
				}
				return
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

// TestSanitizePlainTypedValues checks that the task requests of active,
// reserved and scheduled read as the task records do: kombu >= 5.3 typed
// JSON as the strings kombu 5.2 wrote, and the Python reprs of those values
// in args and kwargs reprs as the reprs of those strings.
func TestSanitizePlainTypedValues(t *testing.T) {
	for _, tc := range []struct {
		name, method, in, want string
	}{
		{
			name:   "scheduled, typed JSON",
			method: "scheduled",
			in: `[{"eta": "2026-01-01T00:00:00+00:00", "request": {"id": "1",
				"args": [{"__type__": "decimal", "__value__": "3.14"}],
				"kwargs": {"dt": {"__type__": "datetime", "__value__": "2024-01-02T03:04:05+00:00"},
					"u": {"__type__": "uuid", "__value__": {"hex": "12345678123456781234567812345678"}}}}}]`,
			want: `[{"eta":"2026-01-01T00:00:00+00:00","request":{"args":["3.14"],"id":"1",` +
				`"kwargs":{"dt":"2024-01-02T03:04:05Z","u":"12345678-1234-5678-1234-567812345678"}}}]`,
		},
		{
			name:   "reserved, typed JSON",
			method: "reserved",
			in:     `[{"id": "1", "args": [{"__type__": "date", "__value__": "2024-01-02"}], "kwargs": {}}]`,
			want:   `[{"args":["2024-01-02T00:00:00"],"id":"1","kwargs":{}}]`,
		},
		{
			name:   "active, reprs",
			method: "active",
			in:     `[{"id": "1", "args": "[Decimal('6')]", "kwargs": "{'u': UUID('12345678-1234-5678-1234-567812345678')}"}]`,
			want:   `[{"args":"['6']","id":"1","kwargs":"{'u': '12345678-1234-5678-1234-567812345678'}"}]`,
		},
		{
			name:   "a string args elsewhere stays",
			method: "conf",
			in:     `{"args": "Decimal('6')"}`,
			want:   `{"args":"Decimal('6')"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(sanitize(tc.method, json.RawMessage(tc.in))); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
