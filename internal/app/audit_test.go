package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/redact"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

const auditDB = 9

// TestAuditSurvivesRestart: with --persistent the audit log is kept in the
// store, so a purge recorded before a restart is read back after it, and
// --audit_max_records bounds it.
func TestAuditSurvivesRestart(t *testing.T) {
	testcluster.RequireRedis(t)
	testcluster.FlushRedisDB(t, auditDB)
	cfg := Config{
		BrokerURL: testcluster.RedisURL(auditDB), DBPath: filepath.Join(t.TempDir(), "stamen.db"),
		AuditMaxRecords: 3,
	}
	post := func(srv *httptest.Server, path string) int {
		resp, err := http.Post(srv.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	for _, q := range []string{"q1", "q2", "q3", "q4"} {
		if s := post(srv, "/api/queues/purge/"+q+"?force=true"); s != 200 {
			t.Fatalf("purge %s: %d", q, s)
		}
	}
	srv.Close()
	a.Close()

	b, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer b.Close()
	srv = httptest.NewServer(b.Handler)
	defer srv.Close()
	// The bounds are applied at start.
	resp, err := http.Get(srv.URL + "/api/audit")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var log struct{ Records []struct{ Path string } }
	if err := json.Unmarshal(body, &log); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var paths []string
	for _, r := range log.Records {
		paths = append(paths, r.Path)
	}
	if got := strings.Join(paths, ","); got != "/api/queues/purge/q4,/api/queues/purge/q3,/api/queues/purge/q2" {
		t.Errorf("audit after restart: %s, want the 3 newest purges", got)
	}
}

// TestAuditRecordsRefusedWrites: a write call refused before it is routed
// (a viewer's, or one whose body is over the body limit) is in the audit
// log with its caller, operation and status, and without its body; a call
// without valid credentials is not, so that nobody without them can push
// real records out of the bounded log. A record is bounded whatever the
// caller sends: thousands of query parameters the operation ignores, or a
// path of 50 KiB. Every refusal, 401s included, is counted in
// stamen_http_request_duration_seconds by operation and status.
func TestAuditRecordsRefusedWrites(t *testing.T) {
	testcluster.RequireRedis(t)
	testcluster.FlushRedisDB(t, auditDB)
	var authn auth.Authenticator
	for _, err := range []error{
		authn.AddBasic("alice:alice-secret-pw", auth.Operator),
		authn.AddBasic("vera:vera-secret-pw", auth.Viewer),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	const maxBody = 4 << 10
	a, err := New(context.Background(), Config{BrokerURL: testcluster.RedisURL(auditDB), Auth: &authn, MaxBodyBytes: maxBody})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()

	const secret = "kw-sekr1t-value"
	secretBody := `{"kwargs": {"api_token": "` + secret + `"}}`
	type record struct {
		User, Role, Operation, Path string
		Status                      int
		Params                      map[string]any
		ParamsCut                   int `json:"params_cut"`
	}
	// A query string of thousands of parameters the operation ignores,
	// within the header limit.
	flood := "/api/task/revoke/t-9?terminate=true"
	floodParams := map[string]any{"taskid": "t-9", "terminate": "true"}
	longID := strings.Repeat("y", 50<<10)
	longPath := "/api/task/revoke/" + longID
	const floodN = 6000
	for i := range floodN {
		name := fmt.Sprintf("x%05d", i)
		flood += "&" + name + "=v"
		if i < audit.MaxExtraParams {
			floodParams[name] = "v"
		}
	}
	tests := []struct {
		name, user, pass, path, body string
		status                       int
		want                         *record // nil: not recorded
		op                           string  // the metric's operation label
	}{
		{"viewer revokes", "vera", "vera-secret-pw", "/api/task/revoke/t-1?terminate=true", "", 403,
			&record{User: "vera", Role: "viewer", Operation: "revokeTask", Path: "/api/task/revoke/t-1", Status: 403,
				Params: map[string]any{"taskid": "t-1", "terminate": "true"}}, "revokeTask"},
		{"viewer applies with a secret", "vera", "vera-secret-pw", "/api/task/async-apply/refused.echo", secretBody, 403,
			&record{User: "vera", Role: "viewer", Operation: "asyncApplyTask", Path: "/api/task/async-apply/refused.echo", Status: 403,
				Params: map[string]any{"taskname": "refused.echo"}}, "asyncApplyTask"},
		{"operator's body too large", "alice", "alice-secret-pw", "/api/task/async-apply/big.echo", `{"args": ["` + strings.Repeat("x", maxBody) + `"]}`, 413,
			&record{User: "alice", Role: "operator", Operation: "asyncApplyTask", Path: "/api/task/async-apply/big.echo", Status: 413,
				Params: map[string]any{"taskname": "big.echo"}}, "asyncApplyTask"},
		// The control: a write call that runs is recorded and measured alike.
		{"operator purges", "alice", "alice-secret-pw", "/api/queues/purge/refusals-q?force=true", "", 200,
			&record{User: "alice", Role: "operator", Operation: "purgeQueue", Path: "/api/queues/purge/refusals-q", Status: 200,
				Params: map[string]any{"queue": "refusals-q", "force": "true"}}, "purgeQueue"},
		{"viewer floods the query", "vera", "vera-secret-pw", flood, "", 403,
			&record{User: "vera", Role: "viewer", Operation: "revokeTask", Path: "/api/task/revoke/t-9", Status: 403,
				Params: floodParams, ParamsCut: floodN - audit.MaxExtraParams}, "revokeTask"},
		{"viewer's path of 50 KiB", "vera", "vera-secret-pw", longPath, "", 403,
			&record{User: "vera", Role: "viewer", Operation: "revokeTask", Status: 403,
				Path:   longPath[:audit.MaxPathBytes] + fmt.Sprintf("... (%d bytes, cut)", len(longPath)),
				Params: map[string]any{"taskid": `"` + strings.Repeat("y", audit.MaxParamBytes-1) + fmt.Sprintf("... (%d bytes, cut)", len(longID)+2)}}, "revokeTask"},
		{"wrong password", "alice", "wrong-pw", "/api/task/revoke/t-2", "", 401, nil, "revokeTask"},
		{"no credentials", "", "", "/api/task/revoke/t-3", "", 401, nil, "revokeTask"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			labels := map[string]string{"operation": tc.op, "code": strconv.Itoa(tc.status)}
			before := requestCount(t, srv.URL, labels)
			req, err := http.NewRequest("POST", srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.user != "" {
				req.SetBasicAuth(tc.user, tc.pass)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if after := requestCount(t, srv.URL, labels); after != before+1 {
				t.Errorf("stamen_http_request_duration_seconds count of %v went from %d to %d, want one more", labels, before, after)
			}
			req, _ = http.NewRequest("GET", srv.URL+"/api/audit?limit=1000", nil)
			req.SetBasicAuth("alice", "alice-secret-pw")
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), secret) {
				t.Errorf("the audit log shows the refused call's secret: %s", body)
			}
			var log struct{ Records []record }
			if err := json.Unmarshal(body, &log); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			var got []record
			for _, r := range log.Records {
				if strings.HasPrefix(tc.path, r.Path) || (tc.want != nil && r.Path == tc.want.Path) {
					got = append(got, r)
				}
			}
			var want []record
			if tc.want != nil {
				want = []record{*tc.want}
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("audit records of %.100s (-want +got):\n%.4000s", tc.path, diff)
			}
		})
	}
}

// TestAuditRecordMasksCredentialKwargs: a task sent with an Authorization
// header, a cookie or credentials among its kwargs is recorded with those
// values masked, by stamen's additions to Celery's rule, and its other
// kwargs kept.
func TestAuditRecordMasksCredentialKwargs(t *testing.T) {
	testcluster.RequireRedis(t)
	testcluster.FlushRedisDB(t, auditDB)
	a, err := New(context.Background(), Config{BrokerURL: testcluster.RedisURL(auditDB)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()

	secrets := map[string]string{
		"authorization": "Bearer s3cret-value",
		"Cookie":        "session=s3cret-cookie",
		"credentials":   "user:s3cret-credential",
	}
	kwargs := map[string]any{"n": "plain-value"}
	for k, v := range secrets {
		kwargs[k] = v
	}
	body, err := json.Marshal(map[string]any{"kwargs": kwargs})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(srv.URL+"/api/task/send-task/audit.creds", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("send-task: %d", resp.StatusCode)
	}
	resp, err = http.Get(srv.URL + "/api/audit")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/audit: %d %v", resp.StatusCode, err)
	}
	for k, v := range secrets {
		if strings.Contains(string(raw), v) {
			t.Errorf("the audit log keeps kwarg %s's value: %s", k, raw)
		}
	}
	var log struct {
		Records []struct {
			Operation string
			Params    struct {
				Body struct{ Kwargs map[string]any }
			}
		}
	}
	if err := json.Unmarshal(raw, &log); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if len(log.Records) != 1 || log.Records[0].Operation != "sendTask" {
		t.Fatalf("audit records: %s, want the one send-task", raw)
	}
	want := map[string]any{"n": "plain-value"}
	for k := range secrets {
		want[k] = redact.Mask
	}
	if diff := cmp.Diff(want, log.Records[0].Params.Body.Kwargs); diff != "" {
		t.Errorf("recorded kwargs (-want +got):\n%s", diff)
	}
}

// requestCount is how many requests with labels base's /metrics counts in
// stamen_http_request_duration_seconds; 0 when it has no such series.
func requestCount(t *testing.T, base string, labels map[string]string) uint64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return uint64(testcluster.ParseMetrics(t, resp.Body).Sum("stamen_http_request_duration_seconds", labels))
}
