package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestBrokerACLRefusal: stamen logs in to Redis as an ACL user that may
// not run a command an operation needs. The operation answers 502 JSON
// naming the refused command (Redis' NOPERM reply), not the 503 "Broker or
// result backend unavailable" a load balancer would retry on another
// replica, with no password in the body; the refusal is logged once, not
// at every request.
func TestBrokerACLRefusal(t *testing.T) {
	testcluster.RequireRedis(t)
	r := testcluster.StartRedis(t)
	const password = "acl-pw-9f3c"
	admin := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.Port)})
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Everything but LLEN (the queues' lengths) and GET (a task's result).
	if err := admin.Do(ctx, "ACL", "SETUSER", "limited", "on", ">"+password, "~*", "&*", "+@all", "-llen", "-get").Err(); err != nil {
		t.Fatal(err)
	}
	url := func(db int) string { return fmt.Sprintf("redis://limited:%s@127.0.0.1:%d/%d", password, r.Port, db) }
	var logs lockedBuffer
	a, err := New(ctx, Config{BrokerURL: url(0), ResultBackend: url(1), InspectTimeout: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close() })
	for _, tc := range []struct {
		path, command string
	}{
		{"/api/queues/length", "llen"},
		{"/api/task/result/2f6c1a52-0000-4000-8000-000000000001", "get"},
	} {
		t.Run(tc.command, func(t *testing.T) {
			// Redis 7.0 says "this user has", 7.2 "User limited has".
			refusal := regexp.MustCompile(`: the broker refused: NOPERM .* has no permissions to run the '` + tc.command + `' command$`)
			for range 3 {
				code, body, _ := get(t, srv.URL+tc.path)
				var e struct {
					Error string `json:"error"`
				}
				if code != 502 || json.Unmarshal([]byte(body), &e) != nil || !refusal.MatchString(e.Error) {
					t.Fatalf("GET %s: %d %s; want 502 {\"error\": %q}", tc.path, code, body, refusal)
				}
				if strings.Contains(body, password) {
					t.Errorf("the body shows the password: %s", body)
				}
			}
			if n := strings.Count(logs.String(), "the '"+tc.command+"' command"); n != 1 {
				t.Errorf("the refusal of %s logged %d times in 3 requests, want once:\n%s", tc.command, n, logs.String())
			}
		})
	}
	if strings.Contains(logs.String(), password) {
		t.Errorf("the log shows the password")
	}
}
