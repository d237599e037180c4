package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-openapi/runtime"
	httptransport "github.com/go-openapi/runtime/client"

	"github.com/stamen-dev/stamen/gen/client/tasks"
	"github.com/stamen-dev/stamen/gen/client/workers"
	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/redact"
)

// urlPassword matches scheme://user:password@ and captures the password.
var urlPassword = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s"]*:([^@/\s"]+)@`)

type authCase struct {
	method, path string
	query        url.Values
	body         string
	// operatorOK is the status an operator gets; 0 means any 2xx.
	operatorOK int
}

// allOperations lists each of Flower's operations once (stamen's own are
// covered by the audit and read-only cases), with parameters an
// operator's call succeeds with on the cluster (shutdown targets an unknown
// worker, so that nobody is shut down: passing the auth check is what counts).
func allOperations(c *cluster, taskID string) []authCase {
	w1 := pathEscape(c.w1.Name)
	return []authCase{
		{"GET", "/api/tasks", nil, "", 0},
		{"GET", "/api/task/types", nil, "", 0},
		{"GET", "/api/queues/length", nil, "", 0},
		{"GET", "/api/task/info/" + taskID, nil, "", 0},
		{"GET", "/api/task/result/" + taskID, nil, "", 0},
		{"GET", "/api/workers", nil, "", 0},
		{"POST", "/api/task/apply/stamen.add", nil, `{"args": [1, 1]}`, 0},
		{"POST", "/api/task/async-apply/stamen.add", nil, `{"args": [1, 1]}`, 0},
		{"POST", "/api/task/send-task/stamen.add", nil, `{"args": [1, 1]}`, 0},
		{"POST", "/api/task/abort/" + taskID, nil, "", map[bool]int{true: 0, false: 503}[c.hasAbort]},
		{"POST", "/api/task/revoke/" + taskID, nil, "", 0},
		{"POST", "/api/task/timeout/stamen.echo", q("workername", c.w1.Name, "soft", "50"), "", 0},
		{"POST", "/api/task/rate-limit/stamen.echo", q("workername", c.w1.Name, "rateLimit", "50/s"), "", 0},
		{"POST", "/api/worker/shutdown/nobody@nowhere", nil, "", 404},
		{"POST", "/api/worker/pool/restart/" + pathEscape(c.w2.Name), nil, "", 0},
		{"POST", "/api/worker/pool/grow/" + w1, nil, "", 0},
		{"POST", "/api/worker/pool/shrink/" + w1, nil, "", 0},
		{"POST", "/api/worker/pool/autoscale/" + pathEscape(c.w2.Name), q("min", "2", "max", "4"), "", 0},
		{"POST", "/api/worker/queue/add-consumer/" + w1, q("queue", "auth-q"), "", 0},
		{"POST", "/api/worker/queue/cancel-consumer/" + w1, q("queue", "auth-q"), "", 0},
	}
}

func securityCases() []suiteCase {
	return []suiteCase{
		{"roles: Flower's operations x 4 callers", func(t *testing.T, c *cluster) {
			var authn auth.Authenticator
			if err := authn.AddBasic("op:op-secret", auth.Operator); err != nil {
				t.Fatal(err)
			}
			if err := authn.AddBasic("viewer:viewer-secret", auth.Viewer); err != nil {
				t.Fatal(err)
			}
			const viewerToken, operatorToken = "viewer-token-0123456789", "operator-token-0123456789"
			if err := authn.AddTokens(viewerToken, auth.Viewer); err != nil {
				t.Fatal(err)
			}
			if err := authn.AddTokens(operatorToken, auth.Operator); err != nil {
				t.Fatal(err)
			}
			// A second stamen with credentials on the same broker.
			cfg := c.cfg
			cfg.Auth = &authn
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a, err := app.New(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(a.Handler)
			defer func() { srv.Close(); a.Close() }()

			// The second stamen subscribes to events in the background: a
			// task whose events went out before that is never seen by it,
			// so run tasks until one reaches its state.
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
				req, _ := http.NewRequest("GET", srv.URL+"/api/workers?refresh=1", nil)
				req.SetBasicAuth("op", "op-secret")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == 200
			})

			callers := []struct {
				name       string
				user, pass string
			}{
				{"no credentials", "", ""},
				{"wrong password", "op", "nope"},
				{"viewer", "viewer", "viewer-secret"},
				{"operator", "op", "op-secret"},
			}
			for _, op := range allOperations(c, id) {
				for _, caller := range callers {
					u := srv.URL + op.path
					if len(op.query) > 0 {
						u += "?" + op.query.Encode()
					}
					req, _ := http.NewRequest(op.method, u, strings.NewReader(op.body))
					if op.body != "" {
						req.Header.Set("Content-Type", "application/json")
					}
					if caller.user != "" {
						req.SetBasicAuth(caller.user, caller.pass)
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatalf("%s %s: %v", op.method, op.path, err)
					}
					resp.Body.Close()
					var want func(int) bool
					switch {
					case caller.name == "no credentials" || caller.name == "wrong password":
						want = func(s int) bool { return s == 401 }
						if resp.Header.Get("WWW-Authenticate") == "" {
							t.Errorf("%s %s as %s: 401 without WWW-Authenticate", op.method, op.path, caller.name)
						}
					case caller.name == "viewer" && op.method == "POST":
						want = func(s int) bool { return s == 403 }
					case op.operatorOK != 0:
						want = func(s int) bool { return s == op.operatorOK }
					default:
						want = func(s int) bool { return s >= 200 && s < 300 }
					}
					if !want(resp.StatusCode) {
						t.Errorf("%s %s as %s: status %d", op.method, op.path, caller.name, resp.StatusCode)
					}
				}
			}
			// The generated client sends the spec's security schemes.
			cl := genClient(t, srv.URL)
			ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = cl.Workers.ListWorkersContext(ctx, workers.NewListWorkersParams(), nil)
			wantError(t, "listWorkers without authInfo", err, 401)
			_, err = cl.Workers.ListWorkersContext(ctx, workers.NewListWorkersParams(), httptransport.BasicAuth("op", "nope"))
			wantError(t, "listWorkers with a wrong password", err, 401)
			for name, authInfo := range map[string]runtime.ClientAuthInfoWriter{
				"basic":        httptransport.BasicAuth("viewer", "viewer-secret"),
				"bearer token": httptransport.BearerToken(viewerToken),
			} {
				ws, err := cl.Workers.ListWorkersContext(ctx, workers.NewListWorkersParams(), authInfo)
				if err != nil {
					t.Errorf("listWorkers as viewer (%s): %v", name, err)
					continue
				}
				if _, ok := ws.Payload[c.w1.Name]; !ok {
					t.Errorf("listWorkers as viewer (%s) lacks %s", name, c.w1.Name)
				}
				_, err = cl.Tasks.RevokeTaskContext(ctx, tasks.NewRevokeTaskParams().WithTaskid(id), authInfo)
				wantError(t, "revokeTask as viewer ("+name+")", err, 403)
			}
			_, err = cl.Tasks.RevokeTaskContext(ctx, tasks.NewRevokeTaskParams().WithTaskid(id), httptransport.BearerToken(operatorToken))
			if err != nil {
				t.Errorf("revokeTask with the operator token: %v", err)
			}

			// Health and metrics stay public.
			for _, p := range []string{"/healthcheck", "/metrics", "/swagger.json"} {
				resp, err := http.Get(srv.URL + p)
				if err != nil || resp.StatusCode != 200 {
					t.Errorf("GET %s without credentials: %v %v", p, resp, err)
				}
				if resp != nil {
					resp.Body.Close()
				}
			}
		}},
		{"healthcheck and metrics reveal no task data", func(t *testing.T, c *cluster) {
			// Values no metric or health answer has reason to hold: were
			// task data exposed, one of them would show.
			marker := "secret-" + c.kind + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			echo := runTask(t, c, "stamen.echo", map[string]any{
				"args": []any{"arg-" + marker}, "kwargs": map[string]any{"kw": "kwarg-" + marker}})
			fail := runTask(t, c, "stamen.fail", map[string]any{"args": []any{"exc-" + marker}})
			if info := taskInfo(t, c, echo, "SUCCESS"); !strings.Contains(fmt.Sprint(info["result"]), "kwarg-"+marker) {
				t.Fatalf("the echo task's result lacks the marker: %v", info["result"])
			}
			taskInfo(t, c, fail, "FAILURE")
			// Every task the state holds, not only these two.
			ids := taskKeys(t, c.api.get("/api/tasks", nil))
			if !slices.Contains(ids, echo) || !slices.Contains(ids, fail) {
				t.Fatalf("/api/tasks lacks %s or %s", echo, fail)
			}
			for _, path := range []string{"/healthcheck", "/metrics"} {
				r := c.api.get(path, nil)
				if r.Status != http.StatusOK {
					t.Fatalf("%s: %d", path, r.Status)
				}
				body := string(r.Body)
				if strings.Contains(body, marker) {
					t.Errorf("%s shows a task's args, kwargs, result or exception (%s)", path, marker)
				}
				for _, id := range ids {
					if strings.Contains(body, id) {
						t.Errorf("%s shows task id %s", path, id)
					}
				}
			}
		}},
		{"workers' broker passwords are masked", func(t *testing.T, c *cluster) {
			onAMQP := strings.HasPrefix(c.kind, "amqp")
			r := c.api.mustOK(c.api.get("/api/workers", q("refresh", "true")))
			raw := string(c.api.get("/api/workers", nil).Body)
			// Any password inside any URL: Celery and stamen mask them with
			// asterisks.
			for _, m := range urlPassword.FindAllStringSubmatch(raw, -1) {
				if strings.Trim(m[1], "*") != "" {
					t.Errorf("unmasked password in %s", m[0])
				}
			}
			for _, w := range []string{c.w1.Name, c.w2.Name} {
				info, _ := r[w].(map[string]any)
				stats, _ := info["stats"].(map[string]any)
				broker, ok := stats["broker"].(map[string]any)
				if !ok {
					t.Fatalf("%s: no stats.broker: %v", w, info["stats"])
				}
				if p, has := broker["password"]; has && p != redact.Mask {
					t.Errorf("%s: stats.broker.password is %v", w, p)
				}
				if _, has := broker["alternates"]; has {
					t.Errorf("%s: stats.broker.alternates (failover URLs) shown", w)
				}
				if !onAMQP {
					continue
				}
				// The AMQP workers log in as guest:guest: the user name
				// shows, the password never.
				if broker["userid"] != "guest" {
					t.Errorf("%s: stats.broker.userid %v, want guest (is the test still about a password?)", w, broker["userid"])
				}
				conf, _ := info["conf"].(map[string]any)
				if u, _ := conf["broker_url"].(string); !strings.Contains(u, "guest:"+redact.Mask+"@") {
					t.Errorf("%s: conf.broker_url %q", w, u)
				}
			}
			if onAMQP {
				for _, leak := range []string{"guest:guest", ":guest@", `"password": "guest"`, `"password":"guest"`} {
					if strings.Contains(raw, leak) {
						t.Errorf("/api/workers shows %q", leak)
					}
				}
			}
		}},
		{"hostile requests: each answered as it means", func(t *testing.T, c *cluster) {
			w1 := pathEscape(c.w1.Name)
			big := strings.Repeat("x", 2<<20)
			const form = "application/x-www-form-urlencoded"
			// want is the exact status; wantErr a fragment of the JSON error
			// (for a 200, wantKey a key of the JSON body).
			for _, tc := range []struct {
				method, path, body, contentType string
				want                            int
				wantErr, wantKey                string
			}{
				{"POST", "/api/task/async-apply/stamen.add", `{"args": ["` + big + `"]}`, "application/json", 413, "request body too large", ""},
				{"POST", "/api/task/async-apply/stamen.add", `{"args": [1, 2`, "application/json", 400, "unexpected EOF", ""},
				{"POST", "/api/task/async-apply/stamen.add", `{"args": 5, "kwargs": "x"}`, "application/json", 400, "invalid body: args must be a list, not number", ""},
				{"POST", "/api/task/async-apply/stamen.add", `[1, 2]`, "application/json", 400, "invalid body: it must be an object, not array", ""},
				{"POST", "/api/task/async-apply/stamen.add", `{"countdown": {"a": 1}}`, "application/json", 400, "invalid countdown", ""},
				{"POST", "/api/task/async-apply/stamen.add", `{"expires": [1]}`, "application/json", 400, "invalid expires", ""},
				{"POST", "/api/task/async-apply/stamen.add", `{"eta": "9999-99-99 99:99:99.999999"}`, "application/json", 400, "invalid eta", ""},
				{"POST", "/api/task/async-apply/stamen.add", `{"countdown": 1e308}`, "application/json", 400, "invalid countdown", ""},
				{"POST", "/api/task/async-apply/stamen.add", `{"args": [1, 2], "link": "x"}`, "application/json", 400, `unknown field "link"`, ""},
				{"POST", "/api/task/async-apply/stamen.add", `{"args": [1, 2], "priority": 256}`, "application/json", 400, "priority", ""},
				{"POST", "/api/task/apply/%2e%2e%2f%2e%2e%2fetc%2fpasswd", `{}`, "application/json", 404, "Unknown task '../../etc/passwd'", ""},
				// send-task checks no registry, as Flower's: any printable name goes.
				{"POST", "/api/task/send-task/stamen%2Fadd", `{}`, "application/json", 200, "", "task-id"},
				{"POST", "/api/task/send-task/" + url.PathEscape("ünïcödé.task"), `{}`, "application/json", 200, "", "task-id"},
				{"POST", "/api/task/send-task/" + url.PathEscape("bad\x00name"), `{}`, "application/json", 400, "invalid task name", ""},
				{"GET", "/api/tasks?limit=99999999999999999999", "", "", 400, "limit in query must be of type int32", ""},
				{"GET", "/api/tasks?limit=2147483647", "", "", 200, "", ""},
				{"GET", "/api/tasks?offset=2147483647", "", "", 200, "", ""},
				{"GET", "/api/tasks?search=" + url.QueryEscape(strings.Repeat("(", 50)), "", "", 400, "Query nesting exceeds", ""},
				{"GET", "/api/tasks?search=" + url.QueryEscape(`"unterminated`), "", "", 400, "Unterminated quoted phrase", ""},
				{"GET", "/api/tasks?state=" + url.QueryEscape("<script>"), "", "", 200, "", ""},
				{"GET", "/api/task/info/" + url.PathEscape("../../etc/passwd"), "", "", 404, "Unknown task '../../etc/passwd'", ""},
				{"GET", "/api/task/result/" + url.PathEscape("x\ny") + "?timeout=-1", "", "", 400, "timeout in query should be greater than or equal to 0", ""},
				{"GET", "/api/task/result/x?timeout=NaN", "", "", 400, "invalid timeout", ""},
				{"POST", "/api/task/apply/stamen.add?timeout=NaN", `{"args": [1, 2]}`, "application/json", 400, "invalid timeout", ""},
				{"GET", "/api/workers?workername=" + url.QueryEscape(strings.Repeat("w", 5000)), "", "", 400, "workername in query should be at most 255 chars long", ""},
				{"POST", "/api/worker/pool/grow/" + w1 + "?n=99999999999", "", "", 400, "n in query must be of type int32", ""},
				{"POST", "/api/worker/queue/add-consumer/" + w1, "queue=%ZZ", form, 400, "invalid form body", ""},
				{"POST", "/api/worker/queue/add-consumer/" + w1, "queue=" + url.QueryEscape("q\x00x"), form, 400, "invalid queue name", ""},
				{"POST", "/api/worker/pool/autoscale/" + w1, `{"min": 1, "max": 2}`, "application/json", 400, "max in query is required", ""},
				{"POST", "/api/task/revoke/" + url.PathEscape("id with spaces"), "", "", 400, "invalid task id", ""},
				// A GET's form is read, as Flower (Tornado) reads it.
				{"GET", "/api/workers", "workername=nobody", form, 404, "Unknown worker 'nobody'", ""},
				{"GET", "/api/task/types", `{"a": 1}`, "application/json", 200, "", "task-types"},
				{"PUT", "/api/tasks", "", "", 405, "method PUT is not allowed", ""},
				{"DELETE", "/api/worker/shutdown/" + w1, "", "", 405, "method DELETE is not allowed", ""},
			} {
				req, err := http.NewRequest(tc.method, c.api.base+tc.path, strings.NewReader(tc.body))
				if err != nil {
					t.Fatalf("%s %.60s: %v", tc.method, tc.path, err)
				}
				if tc.contentType != "" {
					req.Header.Set("Content-Type", tc.contentType)
				}
				resp, err := c.api.hc.Do(req)
				if err != nil {
					t.Errorf("%s %.60s: %v", tc.method, tc.path, err)
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Errorf("%s %.60s: reading the body: %v", tc.method, tc.path, err)
					continue
				}
				var got map[string]any
				if jerr := json.Unmarshal(body, &got); resp.StatusCode != tc.want || jerr != nil {
					t.Errorf("%s %.60s: %d %.200s, want %d with a JSON object", tc.method, tc.path, resp.StatusCode, body, tc.want)
					continue
				}
				msg, _ := got["error"].(string)
				switch {
				case tc.want >= 400 && !strings.Contains(msg, tc.wantErr):
					t.Errorf("%s %.60s: error %q, want it to say %q", tc.method, tc.path, msg, tc.wantErr)
				case tc.want < 400 && got["error"] != nil:
					t.Errorf("%s %.60s: %d with an error: %s", tc.method, tc.path, resp.StatusCode, body)
				case tc.wantKey != "" && got[tc.wantKey] == nil:
					t.Errorf("%s %.60s: no %q in %s", tc.method, tc.path, tc.wantKey, body)
				}
			}
			// The workers survived all of it.
			status := c.api.mustOK(c.api.get("/api/workers", q("status", "true")))
			if status[c.w1.Name] != true {
				t.Errorf("%s went offline: %v", c.w1.Name, status)
			}
		}},
	}
}
