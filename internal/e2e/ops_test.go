package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// syncBuffer is a log destination tests read while stamen writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// caller is a credential for authedDo: basic user and password, or a token.
type caller struct {
	user, pass, token string
}

func (cl caller) name() string {
	if cl.token != "" {
		return auth.TokenName(cl.token)
	}
	if cl.user == "" {
		return auth.Anonymous
	}
	return cl.user
}

// authedDo sends one request as cl and returns its status and body.
func authedDo(t *testing.T, base string, cl caller, method, path string, query url.Values, body string) (int, []byte) {
	t.Helper()
	u := base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case cl.token != "":
		req.Header.Set("Authorization", "Bearer "+cl.token)
	case cl.user != "":
		req.SetBasicAuth(cl.user, cl.pass)
	}
	hc := &http.Client{Timeout: 60 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// secondStamen starts another stamen on the cluster's broker with cfg and
// returns its base URL and the id of a task it has ingested (the control
// operations on a task need one it knows).
func secondStamen(t *testing.T, c *cluster, cfg app.Config, as caller) (*app.App, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close() })
	// It subscribes to events in the background: run tasks until one
	// reaches its state.
	var id string
	var sent time.Time
	eventually(t, 30*time.Second, "the second stamen to ingest a task", func() bool {
		if id != "" {
			if _, ok := a.State.Task(id); ok {
				return true
			}
		}
		if id == "" || time.Since(sent) > 3*time.Second {
			id = runTask(t, c, "stamen.add", map[string]any{"args": []any{3, 3}})
			taskInfo(t, c, id, "SUCCESS")
			sent = time.Now()
		}
		return false
	})
	eventually(t, 10*time.Second, "second stamen inspected the workers", func() bool {
		status, _ := authedDo(t, srv.URL, as, "GET", "/api/workers", q("refresh", "1"), "")
		return status == 200
	})
	return a, srv.URL, id
}

// queueLength is the queue's length as /api/queues/length has it.
func queueLength(t *testing.T, c *cluster, queue string) float64 {
	t.Helper()
	lengths := c.api.mustOK(c.api.get("/api/queues/length", nil))
	for _, e := range lengths["active_queues"].([]any) {
		if m := e.(map[string]any); m["name"] == queue {
			n, _ := m["messages"].(float64)
			return n
		}
	}
	return -1
}

// tasksRun is how many tasks of name the worker ran, from its own stats.
func tasksRun(t *testing.T, c *cluster, worker, name string) float64 {
	t.Helper()
	stats, _ := workerInfo(t, c, worker)["stats"].(map[string]any)
	total, _ := stats["total"].(map[string]any)
	n, _ := total[name].(float64)
	return n
}

func scrape(t *testing.T, c *cluster) testcluster.Metrics {
	t.Helper()
	r := c.api.get("/metrics", nil)
	if r.Status != 200 {
		t.Fatalf("/metrics: %d", r.Status)
	}
	return testcluster.ParseMetrics(t, bytes.NewReader(r.Body))
}

// writeOperations are the write operations the audit and read-only cases
// call: allOperations' POSTs and purge.
func writeOperations(c *cluster, taskID, queue string) []authCase {
	var out []authCase
	for _, op := range allOperations(c, taskID) {
		if op.method == "POST" {
			out = append(out, op)
		}
	}
	// The operations beyond Flower's, on nothing: a filter no task matches
	// (dry runs), and a task id nothing knows (404).
	nobody := q("taskname", "no.such.task", "max", "10", "dry_run", "true")
	return append(out,
		authCase{"POST", "/api/queues/purge/" + queue, q("force", "true"), "", 0},
		authCase{"POST", "/api/task/retry/00000000-0000-4000-8000-00000000a0d1", nil, "", 404},
		authCase{"POST", "/api/tasks/revoke", nobody, "", 0},
		authCase{"POST", "/api/tasks/retry", nobody, "", 0},
	)
}

func opsCases() []suiteCase {
	return []suiteCase{
		{"purge empties a parked queue, priority lists included, and the gauge follows", func(t *testing.T, c *cluster) {
			queue := fmt.Sprintf("purge-%s-%d", c.kind, time.Now().UnixNano())
			if c.amqp {
				// stamen sends only to a queue a worker declared; the
				// worker stops consuming so the backlog parks. (On Redis
				// the list is made by the first message.)
				t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, amqpVhost, queue) })
				declaredByWorker(t, c, c.w1.Name, queue)
			}
			const parked = 50
			ids := make([]string, 0, parked)
			for i := range parked {
				body := map[string]any{"args": []any{"parked", i}, "queue": queue}
				if i%3 == 0 {
					// Redis: kombu's priority lists (queue\x06\x16<step>).
					body["priority"] = 9
				}
				ids = append(ids, runTask(t, c, "stamen.echo", body))
			}
			if n := queueLength(t, c, queue); n != parked {
				t.Fatalf("queue %s: %v messages, want %d", queue, n, parked)
			}
			eventually(t, 10*time.Second, "stamen_queue_length to show the backlog", func() bool {
				return scrape(t, c).Sum("stamen_queue_length", map[string]string{"queue": queue}) == parked
			})

			// A queue nobody consumes and stamen never sent to: refused.
			unknown := "no-such-queue-" + c.kind
			r := c.api.post("/api/queues/purge/"+unknown, nil, nil)
			if r.Status != http.StatusNotFound || !strings.Contains(fmt.Sprint(r.JSON(t)["error"]), "force=true") {
				t.Errorf("purge of an unknown queue: %d %s, want 404 mentioning force=true", r.Status, r.Body)
			}
			if f := c.api.mustOK(c.api.post("/api/queues/purge/"+unknown, q("force", "true"), nil)); f["purged"] != float64(0) || f["queue"] != unknown {
				t.Errorf("forced purge of an empty queue: %v", f)
			}

			p := c.api.mustOK(c.api.post("/api/queues/purge/"+queue, nil, nil))
			if p["queue"] != queue || p["purged"] != float64(parked) {
				t.Errorf("purge: %v, want %d purged", p, parked)
			}
			if n := queueLength(t, c, queue); n != 0 {
				t.Errorf("queue %s after purge: %v messages", queue, n)
			}
			eventually(t, 10*time.Second, "stamen_queue_length to drop to 0", func() bool {
				return scrape(t, c).Sum("stamen_queue_length", map[string]string{"queue": queue}) == 0
			})

			// A worker that starts consuming now runs only the task sent
			// after the purge: its own count of stamen.echo grows by one.
			before := tasksRun(t, c, c.w1.Name, "stamen.echo")
			consumeOn(t, c, c.w1.Name, queue)
			marker := runTask(t, c, "stamen.echo", map[string]any{"args": []any{"after purge"}, "queue": queue})
			if info := taskInfo(t, c, marker, "SUCCESS"); info["worker"] != c.w1.Name {
				t.Errorf("marker ran on %v", info["worker"])
			}
			if after := tasksRun(t, c, c.w1.Name, "stamen.echo"); after != before+1 {
				t.Errorf("%s ran %v stamen.echo tasks after consuming the purged queue, want 1", c.w1.Name, after-before)
			}
			for _, id := range ids {
				if s := c.api.taskState(id); s == "RECEIVED" || s == "STARTED" || s == "SUCCESS" {
					t.Errorf("purged task %s reached %s", id, s)
				}
			}
			c.api.mustOK(c.api.post("/api/worker/queue/cancel-consumer/"+pathEscape(c.w1.Name), q("queue", queue), nil))
		}},
		{"failed tasks count by exception type", func(t *testing.T, c *cluster) {
			before := scrape(t, c).Sum("stamen_task_failures_total", map[string]string{"exception": "ValueError"})
			id := runTask(t, c, "stamen.fail", map[string]any{"args": []any{"metered"}})
			taskInfo(t, c, id, "FAILURE")
			eventually(t, 10*time.Second, "stamen_task_failures_total{exception=ValueError} to grow", func() bool {
				return scrape(t, c).Sum("stamen_task_failures_total", map[string]string{"exception": "ValueError"}) >= before+1
			})
		}},
		{"audit: every write operation by two operators, secrets masked, viewers refused", func(t *testing.T, c *cluster) {
			var authn auth.Authenticator
			const opToken = "operator-two-token-0123456789"
			for _, err := range []error{
				authn.AddBasic("alice:alice-secret-pw", auth.Operator),
				authn.AddTokens(opToken, auth.Operator),
				authn.AddBasic("vera:vera-secret-pw", auth.Viewer),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
			logs := &syncBuffer{}
			cfg := c.cfg
			cfg.Auth = &authn
			cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			alice, bob := caller{user: "alice", pass: "alice-secret-pw"}, caller{token: opToken}
			_, base, id := secondStamen(t, c, cfg, alice)

			purgeQ := "audit-purge-" + c.kind
			ops := writeOperations(c, id, purgeQ)
			type call struct {
				user, op string
				status   int
			}
			var calls []call
			for _, op := range ops {
				for _, who := range []caller{alice, bob} {
					status, body := authedDo(t, base, who, op.method, op.path, op.query, op.body)
					if (op.operatorOK == 0 && (status < 200 || status > 299)) || (op.operatorOK != 0 && status != op.operatorOK) {
						t.Errorf("%s %s as %s: %d %s", op.method, op.path, who.name(), status, body)
					}
					calls = append(calls, call{user: who.name(), op: op.path, status: status})
				}
			}
			// A parameter holding secrets: a kwargs key by Celery's rule,
			// and a URL's password.
			const kwSecret, urlSecret = "kw-sekr1t-value", "url-sekr1t-pw"
			secretBody := fmt.Sprintf(`{"args": ["redis://u:%s@example:6379/0"], "kwargs": {"api_token": %q, "plain": "visible"}}`, urlSecret, kwSecret)
			if status, body := authedDo(t, base, alice, "POST", "/api/task/async-apply/stamen.echo", nil, secretBody); status != 200 {
				t.Fatalf("async-apply with secrets: %d %s", status, body)
			}

			status, body := authedDo(t, base, caller{user: "vera", pass: "vera-secret-pw"}, "GET", "/api/audit", nil, "")
			if status != http.StatusForbidden {
				t.Errorf("viewer on /api/audit: %d %s, want 403", status, body)
			}
			status, body = authedDo(t, base, alice, "GET", "/api/audit", q("limit", "1000"), "")
			if status != 200 {
				t.Fatalf("/api/audit: %d %s", status, body)
			}
			var log struct {
				Records []struct {
					User, Role, Operation, Path, Remote string
					Status                              int
					Count                               *int64
					Params                              map[string]any
				}
			}
			if err := json.Unmarshal(body, &log); err != nil {
				t.Fatal(err)
			}
			for _, cl := range calls {
				found := 0
				for _, r := range log.Records {
					p, _ := url.PathUnescape(cl.op)
					if r.User == cl.user && r.Path == p && r.Status == cl.status && r.Role == "operator" && r.Operation != "" && r.Remote != "" {
						found++
					}
				}
				if found != 1 {
					t.Errorf("%s by %s (status %d): %d audit records, want 1", cl.op, cl.user, cl.status, found)
				}
			}
			seenOps := map[string]bool{}
			for _, r := range log.Records {
				seenOps[r.Operation] = true
				if r.Operation == "purgeQueue" && (r.Count == nil || *r.Count != 0) {
					t.Errorf("purge record without its count: %+v", r)
				}
			}
			for _, want := range []string{"applyTask", "asyncApplyTask", "sendTask", "abortTask", "revokeTask", "setTaskTimeout",
				"setTaskRateLimit", "shutdownWorker", "restartWorkerPool", "growWorkerPool", "shrinkWorkerPool",
				"autoscaleWorkerPool", "addConsumer", "cancelConsumer", "purgeQueue", "retryTask", "revokeTasks", "retryTasks"} {
				if !seenOps[want] {
					t.Errorf("no audit record of %s", want)
				}
			}
			// The filters.
			status, body = authedDo(t, base, alice, "GET", "/api/audit", q("user", bob.name(), "operation", "revokeTask"), "")
			if err := json.Unmarshal(body, &log); status != 200 || err != nil || len(log.Records) != 1 || log.Records[0].User != bob.name() {
				t.Errorf("audit filtered by user and operation: %d %s", status, body)
			}
			status, body = authedDo(t, base, alice, "GET", "/api/audit",
				q("since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), "")
			if err := json.Unmarshal(body, &log); status != 200 || err != nil || len(log.Records) != 0 {
				t.Errorf("audit since an hour from now: %d %s", status, body)
			}
			// The record of the call with secrets keeps what is not secret.
			status, body = authedDo(t, base, alice, "GET", "/api/audit", q("limit", "1000"), "")
			if status != 200 || !strings.Contains(string(body), "visible") {
				t.Errorf("the audit log lacks the call with secrets: %s", body)
			}
			for _, secret := range []string{kwSecret, urlSecret, "alice-secret-pw", opToken} {
				if strings.Contains(string(body), secret) {
					t.Errorf("/api/audit shows the secret %q", secret)
				}
				if strings.Contains(logs.String(), secret) {
					t.Errorf("the log shows the secret %q", secret)
				}
			}
			if n := strings.Count(logs.String(), "msg=audit "); n < len(calls)+1 {
				t.Errorf("%d audit log lines, want at least %d", n, len(calls)+1)
			}
		}},
		{"read_only refuses every write operation and changes nothing", func(t *testing.T, c *cluster) {
			cfg := c.cfg
			cfg.ReadOnly = true
			_, base, id := secondStamen(t, c, cfg, caller{})
			procs := poolProcesses(workerInfo(t, c, c.w1.Name))
			const marker = "read-only-refused"
			for _, op := range writeOperations(c, id, "ro-"+c.kind) {
				if strings.HasPrefix(op.path, "/api/task/") && op.body != "" {
					op.body = `{"args": ["` + marker + `"]}`
					op.path = op.path[:strings.LastIndexByte(op.path, '/')] + "/stamen.echo"
				}
				status, body := authedDo(t, base, caller{}, op.method, op.path, op.query, op.body)
				var e map[string]any
				if status != http.StatusForbidden || json.Unmarshal(body, &e) != nil || !strings.Contains(fmt.Sprint(e["error"]), "read_only") {
					t.Errorf("%s %s under --read_only: %d %s, want 403 JSON", op.method, op.path, status, body)
				}
			}
			// Reads still work.
			if status, body := authedDo(t, base, caller{}, "GET", "/api/workers", nil, ""); status != 200 {
				t.Errorf("GET /api/workers under --read_only: %d %s", status, body)
			}
			// The workers saw nothing: the pool did not grow (the worker
			// handles control commands in order, so the stats asked for
			// now come after a grow that had been sent), and a task sent
			// through the cluster's own stamen after the refused ones runs
			// while none of the refused ones did.
			// A shrink sent by an earlier case may still land now (a prefork
			// pool shrinks once a process is idle): only growth counts.
			if now := poolProcesses(workerInfo(t, c, c.w1.Name)); now > procs {
				t.Errorf("%s pool: %d processes, was %d", c.w1.Name, now, procs)
			}
			after := runTask(t, c, "stamen.echo", map[string]any{"args": []any{"after read-only"}})
			taskInfo(t, c, after, "SUCCESS")
			r := c.api.mustOK(c.api.get("/api/tasks", q("search", marker)))
			if len(r) != 0 {
				t.Errorf("tasks refused under --read_only ran: %v", r)
			}
		}},
	}
}
