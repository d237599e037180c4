package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/redact"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

func TestRefusesNonLoopbackWithoutCredentials(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantMsg string
	}{
		{[]string{"--address", "0.0.0.0", "--port", "0"}, "refusing to serve the API without authentication"},
		{[]string{"--address=::", "--port=0"}, "refusing to serve the API without authentication"},
		{[]string{"--address=0.0.0.0", "--port=0", "--basic_auth", "admin"}, "user:password pairs"},
	} {
		var stderr bytes.Buffer
		if got := run(tc.args, &stderr); got != 2 {
			t.Errorf("run(%v) = %d, want 2; stderr: %s", tc.args, got, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.wantMsg) {
			t.Errorf("run(%v): want %q in %s", tc.args, tc.wantMsg, stderr.String())
		}
	}
}

// TestRefusesOpenEmbeddedBrokerWithoutPassword: the embedded broker is
// not offered beyond loopback with a password only the log knows; given
// one (flag or environment), the address is the operator's choice.
func TestRefusesOpenEmbeddedBrokerWithoutPassword(t *testing.T) {
	t.Setenv("STAMEN_EMBEDDED_BROKER_PASSWORD", "")
	for _, addr := range []string{"0.0.0.0", "", "[::]", "192.0.2.1"} {
		addr := fmt.Sprintf("%s:%d", addr, freePort(t))
		args := []string{"--port", "0", "--embedded_broker_address", addr, "--db", filepath.Join(t.TempDir(), "stamen.db")}
		var stderr bytes.Buffer
		if got := run(args, &stderr); got == 0 {
			t.Errorf("run(%v) = 0, want a refusal; stderr: %s", args, stderr.String())
		}
		if !strings.Contains(stderr.String(), "refusing to start the embedded broker") ||
			!strings.Contains(stderr.String(), "--embedded_broker_password") {
			t.Errorf("run(%v): stderr does not say why and what to do: %s", args, stderr.String())
		}
	}
	for _, tc := range []struct {
		env  string
		args []string
	}{
		{"from-env", nil},
		{"", []string{"--embedded-broker-password", "from-flag"}},
	} {
		t.Setenv("STAMEN_EMBEDDED_BROKER_PASSWORD", tc.env)
		o, err := parseFlags(tc.args, &bytes.Buffer{})
		if want := tc.env + strings.Join(tc.args[min(1, len(tc.args)):], ""); err != nil || o.embeddedPassword != want {
			t.Errorf("env %q, args %v: password %q (%v), want %q", tc.env, tc.args, o.embeddedPassword, err, want)
		}
	}
}

func TestFlagsAcceptFlowerSpellingsAndEnv(t *testing.T) {
	t.Setenv("CELERY_BROKER_URL", "redis://127.0.0.1:6379/3")
	t.Setenv("FLOWER_MAX_TASKS", "77")
	o, err := parseFlags([]string{"--max-tasks=5", "--url_prefix", "flower", "--inspect_timeout=2500"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.broker != "redis://127.0.0.1:6379/3" || o.maxTasks != 5 || o.urlPrefix != "flower" || o.inspectTimeoutMS != 2500 {
		t.Errorf("options: %+v", o)
	}
	o, err = parseFlags(nil, &bytes.Buffer{})
	if err != nil || o.maxTasks != 77 || o.address != "127.0.0.1" || o.port != 5555 || o.purgeOfflineWorkers != 86400 {
		t.Errorf("env fallbacks: %+v %v", o, err)
	}
	t.Setenv("FLOWER_PURGE_OFFLINE_WORKERS", "600")
	if o, err := parseFlags(nil, &bytes.Buffer{}); err != nil || o.purgeOfflineWorkers != 600 {
		t.Errorf("FLOWER_PURGE_OFFLINE_WORKERS: %d, %v", o.purgeOfflineWorkers, err)
	}
	if o, err := parseFlags([]string{"--purge-offline-workers=0"}, &bytes.Buffer{}); err != nil || o.purgeOfflineWorkers != 0 {
		t.Errorf("--purge-offline-workers=0: %d, %v", o.purgeOfflineWorkers, err)
	}
	if _, err := parseFlags([]string{"--no-such-flag"}, &bytes.Buffer{}); err == nil {
		t.Error("unknown flag accepted")
	}
}

func TestEnvironmentIsReadOrRefused(t *testing.T) {
	for _, tc := range []struct {
		env     [2]string
		args    []string
		wantErr string
		check   func(options) bool
	}{
		{[2]string{"FLOWER_PERSISTENT", "On"}, nil, "", func(o options) bool { return o.persistent }},
		{[2]string{"STAMEN_PERSISTENT", "no"}, nil, "", func(o options) bool { return !o.persistent }},
		{[2]string{"STAMEN_PORT", "http"}, nil, `invalid STAMEN_PORT="http"`, nil},
		{[2]string{"FLOWER_MAX_TASK_AGE", "3 days"}, nil, `invalid FLOWER_MAX_TASK_AGE="3 days"`, nil},
		// The flag given, its variable does not matter.
		{[2]string{"STAMEN_PORT", "http"}, []string{"--port", "1234"}, "", func(o options) bool { return o.port == 1234 }},
		{[2]string{"STAMEN_MAX_TASK_AGE", "3 days"}, []string{"--max-task-age=72h"}, "", func(o options) bool { return o.maxTaskAge == 72*time.Hour }},
	} {
		t.Run(tc.env[0]+"="+tc.env[1], func(t *testing.T) {
			t.Setenv(tc.env[0], tc.env[1])
			o, err := parseFlags(tc.args, &bytes.Buffer{})
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("error: %v", err)
			case !tc.check(o):
				t.Errorf("options: %+v", o)
			}
		})
	}
}

// buildBinary builds stamen once for the tests that run it as a process.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stamen")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	return testcluster.FreePort(t)
}

// logsDB is the Redis database of TestLogsHoldNoSecrets' working broker.
const logsDB = 6

// secretCase is one broker of TestLogsHoldNoSecrets.
type secretCase struct {
	name  string
	setup func(t *testing.T) secretSetup
}

// secretSetup is what a case runs stamen against.
type secretSetup struct {
	broker string
	// secrets must never show in a log line or a body (the passwords, in
	// every form and fragment they could take).
	secrets []string
	// refused: the broker answers and refuses the credentials, so stamen
	// must refuse to start (exit status 1) and say why. stamen then gets
	// 10 s, not 1, for the broker's answer: RabbitMQ sometimes takes more
	// than a second to refuse, and a broker that does not answer in time
	// is one that cannot be reached yet, which stamen rides out.
	refused bool
	// up: the broker works, and the requests get their up statuses; else
	// it cannot be reached, stamen serves anyway and the requests that
	// need the broker get their down statuses.
	up bool
	// rpc: the result backend is rpc://, which cannot abort a task.
	rpc bool
	// feed makes stamen ingest something through the broker and waits
	// until it did; it returns a task id stamen knows, or "". Nil when
	// the broker is down.
	feed func(t *testing.T, get getter) string
	// check looks at the answers of the authenticated requests, by path,
	// for what the case is about (the secrets were there to leak).
	check func(t *testing.T, bodies map[string]string)
	// args and env are given to stamen besides the broker and credentials.
	args, env []string
}

// getter sends an authenticated GET and returns the status and body.
type getter func(path string) (int, string)

// secretRequest is one request TestLogsHoldNoSecrets makes, with the
// status it must answer when the broker works (up; upRPC instead when the
// result backend is rpc:// and it is not 0) and when it cannot be reached
// (down).
type secretRequest struct {
	method, path    string
	wrongPass       bool
	up, upRPC, down int
}

// TestLogsHoldNoSecrets runs the binary with passwords in the broker URL
// and HTTP credentials, makes successful and failing requests, checks
// each status, and greps everything it logged and every body it answered:
// brokers that refuse the password (stamen must not start), a broker that
// cannot be reached (stamen serves, and answers 503), and brokers that work
// while stamen ingests events and talks to workers, one of them a worker
// whose configuration holds secrets that /api/workers shows.
func TestLogsHoldNoSecrets(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	const brokerSecret, httpSecret = "BrokerPw-s3cret", "HttpPw-s3cret"
	bin := buildBinary(t)
	for _, tc := range []secretCase{
		{"redis refuses the password", refusingRedis(brokerSecret)},
		{"nothing listens", func(t *testing.T) secretSetup {
			// A port where a real Redis ran and no longer does.
			r := testcluster.StartRedis(t)
			r.Stop()
			return secretSetup{broker: fmt.Sprintf("redis://user:%s@127.0.0.1:%d/0", brokerSecret, r.Port), secrets: []string{brokerSecret}}
		}},
		{"rabbitmq refuses the password", func(t *testing.T) secretSetup {
			testcluster.Require(t)
			return secretSetup{broker: "amqp://guest:" + brokerSecret + "@127.0.0.1:5672/", secrets: []string{brokerSecret}, refused: true}
		}},
		{"redis with an ACL user, events ingested", workingRedis},
		{"rabbitmq as guest:guest, a worker's events ingested", workingAMQP},
		{"redis with @ : / in the password, a worker with secrets in its config", secretWorker},
		{"the embedded broker with a password given through the environment, a worker on it", embeddedGiven},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.setup(t)
			secrets := append(s.secrets, httpSecret)
			port := freePort(t)
			var logs syncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			timeout := "1s"
			if s.refused {
				timeout = "10s"
			}
			cmd := exec.CommandContext(ctx, bin, "--broker", s.broker, "--port", fmt.Sprint(port),
				"--broker_timeout", timeout, "--logging", "debug")
			cmd.Args = append(cmd.Args, s.args...)
			cmd.Env = append(os.Environ(), "STAMEN_BASIC_AUTH=admin:"+httpSecret)
			cmd.Env = append(cmd.Env, s.env...)
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				<-exited
			}()
			checkLogs := func() {
				t.Helper()
				if logs.Len() == 0 {
					t.Errorf("nothing logged")
				}
				for _, secret := range secrets {
					if strings.Contains(logs.String(), secret) {
						t.Errorf("the logs contain %q:\n%s", secret, logs.String())
					}
				}
			}

			if s.refused {
				select {
				case err := <-exited:
					exited <- err // for the deferred wait
					var exit *exec.ExitError
					if !errors.As(err, &exit) || exit.ExitCode() != 1 {
						t.Errorf("stamen ended with %v, want exit status 1", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("stamen still runs against a broker that refuses its password:\n%s", logs.String())
				}
				if !strings.Contains(logs.String(), "refused") {
					t.Errorf("the logs do not say the broker refused stamen:\n%s", logs.String())
				}
				checkLogs()
				return
			}

			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			for deadline := time.Now().Add(15 * time.Second); ; {
				resp, err := http.Get(base + "/healthcheck")
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("stamen does not answer /healthcheck: %v\n%s", err, logs.String())
				}
				time.Sleep(100 * time.Millisecond)
			}
			var bodies strings.Builder
			do := func(method, path, pass string) (int, string) {
				t.Helper()
				r, _ := http.NewRequest(method, base+path, nil)
				r.SetBasicAuth("admin", pass)
				resp, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatalf("%s %s: %v", method, path, err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatalf("%s %s: %v", method, path, err)
				}
				fmt.Fprintf(&bodies, "%s %s: %d %s\n", method, path, resp.StatusCode, b)
				return resp.StatusCode, string(b)
			}
			taskID := "no-such-task"
			if s.feed != nil {
				if id := s.feed(t, func(path string) (int, string) { return do("GET", path, httpSecret) }); id != "" {
					taskID = id
				}
			}
			answers := map[string]string{}
			for _, req := range []secretRequest{
				{method: "GET", path: "/api/workers", wrongPass: true, up: 401, down: 401},
				{method: "GET", path: "/api/workers?refresh=1", up: 200, down: 503},
				{method: "GET", path: "/api/workers", up: 200, down: 200},
				{method: "GET", path: "/api/queues/length", up: 200, down: 503},
				{method: "GET", path: "/api/tasks", up: 200, down: 200},
				{method: "POST", path: "/api/task/async-apply/x.y", up: 404, down: 404},
				{method: "POST", path: "/api/task/send-task/x.y", up: 200, down: 503},
				{method: "POST", path: "/api/task/apply/x.y?timeout=0.5", up: 404, down: 404},
				{method: "GET", path: "/api/task/result/" + taskID, up: 200, down: 503},
				{method: "GET", path: "/api/task/result/some-id?timeout=0.5", up: 504, down: 503},
				{method: "POST", path: "/api/task/abort/some-id", up: 200, upRPC: 503, down: 503},
				{method: "POST", path: "/api/task/revoke/some-id", up: 200, down: 503},
				{method: "POST", path: "/api/worker/pool/grow/nobody@nowhere", up: 404, down: 404},
			} {
				pass, want := httpSecret, req.down
				if req.wrongPass {
					pass = "wrong-" + httpSecret
				}
				switch {
				case s.up && s.rpc && req.upRPC != 0:
					want = req.upRPC
				case s.up:
					want = req.up
				}
				status, body := do(req.method, req.path, pass)
				if status != want {
					t.Errorf("%s %s: %d, want %d: %s", req.method, req.path, status, want, body)
				}
				if !req.wrongPass {
					answers[req.path] = body
				}
			}
			if s.check != nil {
				s.check(t, answers)
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			exited <- <-exited
			checkLogs()
			for _, secret := range secrets {
				if strings.Contains(bodies.String(), secret) {
					t.Errorf("a response contains %q:\n%s", secret, bodies.String())
				}
			}
		})
	}
}

// refusingRedis is a private Redis with a password that is not the one
// stamen is given.
func refusingRedis(secret string) func(t *testing.T) secretSetup {
	return func(t *testing.T) secretSetup {
		r := testcluster.StartRedis(t)
		requirePass(t, r, "the-right-one-"+secret[:3])
		return secretSetup{broker: fmt.Sprintf("redis://:%s@127.0.0.1:%d/0", secret, r.Port), secrets: []string{secret}, refused: true}
	}
}

// requirePass gives a private Redis a password.
func requirePass(t *testing.T, r *testcluster.Redis, password string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.Port)})
	defer c.Close()
	if err := c.ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
		t.Fatalf("set the password: %v", err)
	}
}

// workingRedis creates a Redis ACL user with a random password for the run:
// the test Redis has no password, and a URL that Redis accepts is the one
// stamen logs and uses most.
func workingRedis(t *testing.T) secretSetup {
	testcluster.Require(t)
	testcluster.FlushRedisDB(t, logsDB)
	suffix := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	user, password := "stamen-logs-"+suffix, "RedisPw-"+suffix
	admin := goredis.NewClient(&goredis.Options{Addr: testcluster.RedisAddr(), DB: logsDB})
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", user, "on", ">"+password, "~*", "&*", "+@all").Err(); err != nil {
		t.Fatalf("create the ACL user: %v", err)
	}
	t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", user).Err() })
	broker := fmt.Sprintf("redis://%s:%s@%s/%d", user, password, testcluster.RedisAddr(), logsDB)
	feed := func(t *testing.T, get getter) string {
		id := "00000000-0000-4000-9000-" + suffix
		channel := fmt.Sprintf("/%d.celeryev/task.multi", logsDB)
		envelope := testcluster.SucceededTaskEnvelope(id, "logs.add", "logs@h", 1)
		// Publish until stamen, subscribed some time after its start, has it.
		deadline := time.Now().Add(15 * time.Second)
		for {
			if err := admin.Publish(ctx, channel, envelope).Err(); err != nil {
				t.Fatal(err)
			}
			if status, _ := get("/api/task/info/" + id); status == http.StatusOK {
				return id
			}
			if time.Now().After(deadline) {
				t.Fatalf("stamen did not ingest task %s", id)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return secretSetup{broker: broker, secrets: []string{password}, up: true, feed: feed}
}

// workingAMQP uses the test RabbitMQ's only user, guest:guest, with a real
// worker. The password is also the user name, which may show: what must
// not is the password where a password goes.
func workingAMQP(t *testing.T) secretSetup {
	testcluster.Require(t)
	broker := testcluster.AMQPURL(testcluster.Vhost)
	if !strings.Contains(broker, "guest:guest@") {
		t.Fatalf("the test broker URL changed: %s", broker)
	}
	secrets := []string{"guest:guest", ":guest@", "password=guest", `"password": "guest"`, `"password":"guest"`}
	feed := func(t *testing.T, get getter) string {
		awaitWorker(t, get, testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "logs", Broker: broker, Backend: "rpc://"}))
		return ""
	}
	return secretSetup{broker: broker, secrets: secrets, up: true, rpc: true, feed: feed}
}

// embeddedGiven is stamen's embedded broker (no --broker) with a password
// the operator chose and gave through the environment, to keep it out of
// ps: unlike a generated one, which the start line shows as the only way
// to learn it, the operator knows it, and it shows nowhere. A real worker
// given that password connects.
func embeddedGiven(t *testing.T) secretSetup {
	testcluster.Require(t)
	const password = "EmbeddedPw-s3cret"
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	feed := func(t *testing.T, get getter) string {
		w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "embedded",
			Broker: "redis://:" + password + "@" + addr + "/0", Backend: "redis://:" + password + "@" + addr + "/1"})
		awaitWorker(t, get, w)
		return ""
	}
	return secretSetup{
		args:    []string{"--embedded_broker_address", addr, "--db", filepath.Join(t.TempDir(), "stamen.db")},
		env:     []string{"STAMEN_EMBEDDED_BROKER_PASSWORD=" + password},
		secrets: []string{password}, up: true, feed: feed,
	}
}

// awaitWorker waits until stamen ingested the worker's heartbeats.
func awaitWorker(t *testing.T, get getter, w *testcluster.Worker) {
	t.Helper()
	if w == nil {
		t.FailNow()
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, body := get("/api/workers?status=1"); strings.Contains(body, strconv.Quote(w.Name)+": true") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stamen did not ingest %s's events", w.Name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// secretWorker is a private Redis whose password holds '@', ':' and '/'
// (in the URL: '@' and ':' as they are, '/' escaped, as kombu and Go both
// read it), with a real worker whose configuration holds the secrets
// Celery's censoring knows of (broker_password, Sentinel's password in
// broker_transport_options, an API key) and one it skips (a failover URL
// list inside a list). Celery 5.2 masks the first three in conf itself,
// but stats.broker.transport_options carries Sentinel's password in clear.
func secretWorker(t *testing.T) secretSetup {
	testcluster.Require(t)
	const (
		password   = "SecA1@SecB2:SecC3/SecD4"
		inURL      = "SecA1@SecB2:SecC3%2FSecD4"
		brokerPass = "ConfBrokerPw-5e1"
		sentinel   = "SentinelPw-5e2"
		apiKey     = "ApiKey-5e3"
		listPass   = "ListPw@5e4"
	)
	r := testcluster.StartRedis(t)
	requirePass(t, r, password)
	broker := fmt.Sprintf("redis://:%s@127.0.0.1:%d/0", inURL, r.Port)
	conf, err := json.Marshal(map[string]any{
		"broker_password":          brokerPass,
		"broker_transport_options": map[string]any{"sentinel_kwargs": map[string]any{"password": sentinel}},
		"my_api_key":               apiKey,
		"my_failover":              []string{"redis://:" + listPass + "@10.0.0.1/0;redis://:" + listPass + "@10.0.0.2/0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{password, inURL, brokerPass, sentinel, apiKey, listPass,
		// What a mask that stops at the first '@' or at a '/' leaves.
		"SecB2", "SecC3", "SecD4", "5e4@"}
	var worker string
	feed := func(t *testing.T, get getter) string {
		w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "secrets", Broker: broker,
			Env: []string{"STAMEN_TEST_CONF=" + string(conf)}})
		awaitWorker(t, get, w)
		worker = w.Name
		return ""
	}
	check := func(t *testing.T, bodies map[string]string) {
		// The secrets were there to leak: the worker's conf and stats are
		// served, with the settings masked, not dropped.
		var workers map[string]struct {
			Conf  map[string]any `json:"conf"`
			Stats struct {
				Broker map[string]any `json:"broker"`
			} `json:"stats"`
		}
		if err := json.Unmarshal([]byte(bodies["/api/workers?refresh=1"]), &workers); err != nil {
			t.Fatalf("/api/workers?refresh=1: %v", err)
		}
		info, ok := workers[worker]
		if !ok {
			t.Fatalf("/api/workers?refresh=1 lacks %s: %s", worker, bodies["/api/workers?refresh=1"])
		}
		want := map[string]any{
			"broker_password":          redact.Mask,
			"broker_transport_options": map[string]any{"sentinel_kwargs": map[string]any{"password": redact.Mask}},
			"my_api_key":               redact.Mask,
			"my_failover":              []any{"redis://:" + redact.Mask + "@10.0.0.1/0;redis://:" + redact.Mask + "@10.0.0.2/0"},
		}
		for k, v := range want {
			if diff := cmp.Diff(v, info.Conf[k]); diff != "" {
				t.Errorf("conf.%s (-want +got):\n%s", k, diff)
			}
		}
		if u, _ := info.Conf["broker_url"].(string); u != fmt.Sprintf("redis://:%s@127.0.0.1:%d/0", redact.Mask, r.Port) {
			t.Errorf("conf.broker_url = %q", u)
		}
		if diff := cmp.Diff(want["broker_transport_options"], info.Stats.Broker["transport_options"]); diff != "" {
			t.Errorf("stats.broker.transport_options (-want +got):\n%s", diff)
		}
	}
	return secretSetup{broker: broker, secrets: secrets, up: true, feed: feed, check: check}
}

// syncBuffer is a bytes.Buffer the process's output goroutines and the
// test can share.
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

func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// TestRefusesBadTransportOptions: an unknown or ill-typed transport option,
// or a sentinel:// broker without master_name, stops stamen at start with
// an error that names the option and shows no secret.
func TestRefusesBadTransportOptions(t *testing.T) {
	broker := fmt.Sprintf("redis://127.0.0.1:%d/0", freePort(t))
	for _, tc := range []struct {
		name, broker, env string
		args              []string
		want              string
	}{
		{"unknown", broker, `{"visibilty_timeout": 3600, "sentinel_kwargs": {"password": "s3cret-pw"}}`, nil, "visibilty_timeout"},
		{"fanout off", broker, `{"fanout_patterns": false, "sentinel_kwargs": {"password": "s3cret-pw"}}`, nil, "fanout_patterns: only true"},
		{"ill-typed", broker, `{"sentinel_kwargs": {"password": 12}}`, nil, "sentinel_kwargs.password: want a string"},
		{"flag wins", broker, `{"global_keyprefix": "ok"}`, []string{"--broker_transport_options", `{"sep": ["s3cret-pw"]}`}, "sep: want a string"},
		{"result backend", broker, "", []string{"--result_backend_transport_options", `{"master_name": 1}`}, "result_backend_transport_options: master_name"},
		{"no master_name", "sentinel://:s3cret-pw@127.0.0.1:1/0", `{"sentinel_kwargs": {"password": "s3cret-pw"}}`, nil, "master_name missing"},
		{"amqp", "amqp://guest:s3cret-pw@127.0.0.1:1/", `{"global_keyprefix": "x"}`, nil, "only Redis brokers take transport options"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("STAMEN_BROKER_TRANSPORT_OPTIONS", tc.env)
			var stderr bytes.Buffer
			args := append([]string{"--port", "0", "--broker", tc.broker}, tc.args...)
			if got := run(args, &stderr); got == 0 {
				t.Fatalf("run(%v) = 0, want a refusal", args)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr does not say %q: %s", tc.want, stderr.String())
			}
			if strings.Contains(stderr.String(), "s3cret") {
				t.Errorf("stderr shows a secret: %s", stderr.String())
			}
		})
	}
}

// TestHelpHidesSecrets: --help (printed on any flag error too) shows each
// flag's default, read from the environment, where STAMEN_BASIC_AUTH and
// the rest are given precisely to keep them out of sight; and a stray
// argument, often a flag's value cut off from it, is not echoed.
func TestHelpHidesSecrets(t *testing.T) {
	const secret = "Env-s3cret-0123456789"
	for _, k := range []string{"STAMEN_BASIC_AUTH", "STAMEN_VIEWER_BASIC_AUTH"} {
		t.Setenv(k, "admin:"+secret)
	}
	for _, k := range []string{"STAMEN_AUTH_TOKEN", "STAMEN_VIEWER_AUTH_TOKEN", "STAMEN_EMBEDDED_BROKER_PASSWORD"} {
		t.Setenv(k, secret)
	}
	for _, k := range []string{"STAMEN_BROKER_TRANSPORT_OPTIONS", "STAMEN_RESULT_BACKEND_TRANSPORT_OPTIONS"} {
		t.Setenv(k, `{"master_name": "m", "sentinel_kwargs": {"password": "`+secret+`"}}`)
	}
	t.Setenv("STAMEN_BROKER", "redis://:"+secret+"@h/0")
	t.Setenv("STAMEN_DB", "postgres://u:"+secret+"@h/db")
	for _, args := range [][]string{{"--help"}, {"--no-such-flag"}, {"--broker=", "redis://:" + secret + "@h/0"}} {
		var out bytes.Buffer
		_, err := parseFlags(args, &out)
		if err == nil {
			t.Errorf("parseFlags(%q) succeeded", args)
			continue
		}
		if strings.Contains(out.String(), secret) || strings.Contains(err.Error(), secret) {
			t.Errorf("parseFlags(%q) shows the secret: %v\n%s", args, err, out.String())
		}
	}
}

// TestSwitchesTakeFlowerValues: every switch takes on the command line the
// values its variable takes (Flower's yes, on, 1...), given alone it is on,
// and a value that is neither true nor false stops stamen rather than
// turning the switch on or off by a typo.
func TestSwitchesTakeFlowerValues(t *testing.T) {
	for _, k := range []string{"UNAUTHENTICATED_API", "PERSISTENT", "READ_ONLY", "XHEADERS", "ENABLE_EVENTS"} {
		for _, p := range []string{"STAMEN_", "FLOWER_"} {
			t.Setenv(p+k, "")
			os.Unsetenv(p + k)
		}
	}
	switches := []struct {
		flag string
		get  func(options) bool
	}{
		{"unauthenticated_api", func(o options) bool { return o.unauthenticated }},
		{"persistent", func(o options) bool { return o.persistent }},
		{"read-only", func(o options) bool { return o.readOnly }},
		{"xheaders", func(o options) bool { return o.xheaders }},
		{"enable_events", func(o options) bool { return o.enableEvents }},
	}
	for _, sw := range switches {
		for _, tc := range []struct {
			arg  string
			want bool
			err  bool
		}{
			{"--" + sw.flag, true, false},
			{"--" + sw.flag + "=yes", true, false},
			{"--" + sw.flag + "=ON", true, false},
			{"--" + sw.flag + "=1", true, false},
			{"--" + sw.flag + "=true", true, false},
			{"--" + sw.flag + "=no", false, false},
			{"--" + sw.flag + "=off", false, false},
			{"--" + sw.flag + "=0", false, false},
			{"--" + sw.flag + "=nope", false, true},
			{"--" + sw.flag + "=", false, true},
		} {
			t.Run(tc.arg, func(t *testing.T) {
				o, err := parseFlags([]string{tc.arg}, io.Discard)
				if tc.err {
					if err == nil || !strings.Contains(err.Error(), "want true or false") {
						t.Fatalf("err = %v, want a refusal", err)
					}
					return
				}
				if err != nil || sw.get(o) != tc.want {
					t.Fatalf("%s: %v (err %v), want %v", sw.flag, sw.get(o), err, tc.want)
				}
			})
		}
	}
}

// parseCase parses args with env set, as a case of a flag table does. With
// wantErr it checks that parsing fails saying so and returns false; else
// it fails the test on any error and returns the options and true.
func parseCase(t *testing.T, env map[string]string, args []string, wantErr string) (options, bool) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	o, err := parseFlags(args, io.Discard)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want one saying %q", err, wantErr)
		}
		return o, false
	}
	if err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return o, true
}
