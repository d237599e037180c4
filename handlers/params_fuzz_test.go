package handlers

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/contract"
)

// FuzzRequestParams feeds hostile task bodies and query strings through the
// parameter parsing that runs before anything reaches a broker: it must
// answer with an error or a valid message, never panic.
func FuzzRequestParams(f *testing.F) {
	for _, seed := range []struct{ body, query string }{
		{`{"args": [1, 2], "kwargs": {"a": 1}}`, "limit=10&offset=0"},
		{`{"countdown": "3", "expires": 60}`, "refresh=true"},
		{`{"eta": "2030-01-01 00:00:00.000001", "expires": "2030-01-01T00:00:00Z"}`, "terminate=perhaps"},
		{`{"countdown": 1e308, "priority": 9, "queue": "a b"}`, "limit="},
		{`{"task_id": "x\u0000y", "headers": {"k": [1, {"a": null}]}}`, "queue=%ZZ&ratelimit=10/m"},
	} {
		f.Add(seed.body, seed.query)
	}
	h := New(Config{Now: func() time.Time { return time.Unix(1795368848, 0) }})
	f.Fuzz(func(t *testing.T, body, query string) {
		var req models.TaskApplyRequest
		if json.Unmarshal([]byte(body), &req) == nil {
			msg, err := h.taskMessage("proj.task", &req)
			if err == nil && (msg.ID == "" || msg.Name != "proj.task") {
				t.Fatalf("invalid message without error: %+v", msg)
			}
		}
		if q, err := url.ParseQuery(query); err == nil {
			for _, op := range contract.Embedded().Operations() {
				_ = strictParams(op, q)
			}
		}
		r := httptest.NewRequest("POST", "/api/worker/queue/add-consumer/w", strings.NewReader(query))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		_ = formToQuery(r, 1<<16)
	})
}
