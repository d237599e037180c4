package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

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
