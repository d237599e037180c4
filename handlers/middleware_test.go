package handlers

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stamen-dev/stamen/internal/contract"
)

// TestParamsGivenOnce: on stamen's bulk operations and purge a typed
// parameter given twice is refused; elsewhere the last value counts, as in
// Flower.
func TestParamsGivenOnce(t *testing.T) {
	for _, c := range []struct {
		path, query string
		refused     bool
	}{
		{"/api/tasks/revoke", "max=10&dry_run=true&dry_run=false", true},
		{"/api/tasks/retry", "max=10&max=20", true},
		{"/api/queues/purge/celery", "force=false&force=true", true},
		{"/api/tasks/revoke", "max=10&dry_run=true&state=A&state=B", false},
		{"/api/task/revoke/x", "terminate=false&terminate=true", false},
		{"/api/tasks", "limit=1&limit=2", false},
	} {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		op, ok := contract.Embedded().Match("POST", c.path)
		if !ok {
			t.Fatalf("%s is no operation", c.path)
		}
		if err := strictParams(op, q); (err != nil) != c.refused {
			t.Errorf("%s?%s: %v, want refused %v", c.path, c.query, err, c.refused)
		}
	}
}

// TestFlowerParamsFollowTheSpec: the checks before routing apply to the
// operation the router finds, by the spec's parameters: a typed parameter
// of the operation is checked, one it does not take is not, a path that
// is no operation passes untouched, and a parameter's alias is renamed.
func TestFlowerParamsFollowTheSpec(t *testing.T) {
	var got *http.Request
	h := FlowerParams(1<<16, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r }))
	for _, c := range []struct {
		method, target string
		status         int
		query          string
	}{
		{"GET", "/api/tasks?limit=", 400, ""},
		{"GET", "/api/tasks/?limit=", 400, ""},
		{"GET", "/api/task/types?limit=", 200, "limit="},
		{"GET", "/api/workers?refresh=perhaps", 400, ""},
		{"GET", "/api/nothing?refresh=perhaps", 200, "refresh=perhaps"},
		{"POST", "/api/task/revoke/x?terminate=perhaps", 400, ""},
		// The wrong method: the router answers 405, the checks still apply.
		{"GET", "/api/task/revoke/x?terminate=perhaps", 400, ""},
		{"POST", "/api/task/rate-limit/t?workername=w&ratelimit=1%2Fs", 200, "rateLimit=1%2Fs&workername=w"},
		{"POST", "/api/task/rate-limit/t?rateLimit=2&ratelimit=1", 200, "rateLimit=2&ratelimit=1"},
	} {
		got = nil
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.target, nil))
		if w.Code == 200 && got == nil {
			w.Code = 0
		}
		if w.Code != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.target, w.Code, w.Body, c.status)
			continue
		}
		if got != nil && got.URL.RawQuery != c.query {
			t.Errorf("%s %s: query %q passed on, want %q", c.method, c.target, got.URL.RawQuery, c.query)
		}
	}
}
