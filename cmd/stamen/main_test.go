package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
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

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

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
	if err != nil || o.maxTasks != 77 || o.address != "127.0.0.1" || o.port != 5555 {
		t.Errorf("env fallbacks: %+v %v", o, err)
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// logsDB is the Redis database of TestLogsHoldNoSecrets' working broker.
const logsDB = 6

// secretCase is one broker of TestLogsHoldNoSecrets.
type secretCase struct {
	name string
	// setup returns the broker URL, the strings that must never show (the
	// password, in the forms it could take), and feed, which makes stamen
	// ingest events and waits until it did (nil when the broker fails).
	setup func(t *testing.T) (broker string, secrets []string, feed func(t *testing.T, get getter) string)
}

// getter sends an authenticated GET and returns the status and body.
type getter func(path string) (int, string)

// TestLogsHoldNoSecrets runs the binary with a password in the broker URL
// and HTTP credentials, exercises successful and failing requests, and
// greps everything it logged and every body it answered: brokers that
// refuse the password or do not answer, and brokers that work while stamen
// ingests events and talks to workers.
func TestLogsHoldNoSecrets(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	const brokerSecret, httpSecret = "BrokerPw-s3cret", "HttpPw-s3cret"
	bin := buildBinary(t)
	failing := func(broker string) func(*testing.T) (string, []string, func(*testing.T, getter) string) {
		return func(*testing.T) (string, []string, func(*testing.T, getter) string) {
			return broker, []string{brokerSecret}, nil
		}
	}
	for _, tc := range []secretCase{
		// Redis rejects the password (none is set), and a port where nothing
		// listens: both failures must be reported without the secret.
		{"redis refuses the password", failing("redis://:" + brokerSecret + "@127.0.0.1:6379/9")},
		{"nothing listens", failing("redis://user:" + brokerSecret + "@127.0.0.1:1/0")},
		{"rabbitmq refuses the password", failing("amqp://guest:" + brokerSecret + "@127.0.0.1:5672/")},
		{"redis with an ACL user, events ingested", workingRedis},
		{"rabbitmq as guest:guest, a worker's events ingested", workingAMQP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broker, secrets, feed := tc.setup(t)
			secrets = append(secrets, httpSecret)
			port := freePort(t)
			var logs syncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--broker", broker, "--port", fmt.Sprint(port),
				"--broker_timeout", "1s", "--logging", "debug")
			cmd.Env = append(os.Environ(), "STAMEN_BASIC_AUTH=admin:"+httpSecret)
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}()
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			deadline := time.Now().Add(15 * time.Second)
			for time.Now().Before(deadline) {
				if resp, err := http.Get(base + "/healthcheck"); err == nil {
					resp.Body.Close()
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			var bodies strings.Builder
			do := func(method, path, user, pass string) (int, string) {
				r, _ := http.NewRequest(method, base+path, nil)
				r.SetBasicAuth(user, pass)
				resp, err := http.DefaultClient.Do(r)
				if err != nil {
					return 0, ""
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				fmt.Fprintf(&bodies, "%s %s: %d %s\n", method, path, resp.StatusCode, b)
				return resp.StatusCode, string(b)
			}
			taskID := "no-such-task"
			if feed != nil {
				taskID = feed(t, func(path string) (int, string) { return do("GET", path, "admin", httpSecret) })
			}
			for _, req := range []struct{ method, path, user, pass string }{
				{"GET", "/api/workers", "admin", "wrong-" + httpSecret},
				{"GET", "/api/workers?refresh=1", "admin", httpSecret},
				{"GET", "/api/queues/length", "admin", httpSecret},
				{"GET", "/api/tasks", "admin", httpSecret},
				{"POST", "/api/task/async-apply/x.y", "admin", httpSecret},
				{"POST", "/api/task/send-task/x.y", "admin", httpSecret},
				{"POST", "/api/task/apply/x.y?timeout=0.5", "admin", httpSecret},
				{"GET", "/api/task/result/" + taskID, "admin", httpSecret},
				{"GET", "/api/task/result/some-id?timeout=0.5", "admin", httpSecret},
				{"POST", "/api/task/abort/some-id", "admin", httpSecret},
				{"POST", "/api/task/revoke/some-id", "admin", httpSecret},
				{"POST", "/api/worker/pool/grow/nobody@nowhere", "admin", httpSecret},
			} {
				do(req.method, req.path, req.user, req.pass)
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			if logs.Len() == 0 {
				t.Errorf("nothing logged")
			}
			for _, secret := range secrets {
				if strings.Contains(logs.String(), secret) {
					t.Errorf("the logs contain %q:\n%s", secret, logs.String())
				}
				if strings.Contains(bodies.String(), secret) {
					t.Errorf("a response contains %q:\n%s", secret, bodies.String())
				}
			}
		})
	}
}

// workingRedis creates a Redis ACL user with a random password for the run:
// the test Redis has no password, and a URL that Redis accepts is the one
// stamen logs and uses most.
func workingRedis(t *testing.T) (string, []string, func(*testing.T, getter) string) {
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
	return broker, []string{password}, feed
}

// workingAMQP uses the test RabbitMQ's only user, guest:guest, with a real
// worker. The password is also the user name, which may show: what must
// not is the password where a password goes.
func workingAMQP(t *testing.T) (string, []string, func(*testing.T, getter) string) {
	testcluster.Require(t)
	broker := testcluster.AMQPURL(testcluster.Vhost)
	if !strings.Contains(broker, "guest:guest@") {
		t.Fatalf("the test broker URL changed: %s", broker)
	}
	secrets := []string{"guest:guest", ":guest@", "password=guest", `"password": "guest"`, `"password":"guest"`}
	feed := func(t *testing.T, get getter) string {
		w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "logs", Broker: broker, Backend: "rpc://"})
		deadline := time.Now().Add(30 * time.Second)
		for {
			// Alive in the events state: stamen ingested its heartbeats.
			if _, body := get("/api/workers?status=1"); strings.Contains(body, strconv.Quote(w.Name)+": true") {
				return "no-such-task"
			}
			if time.Now().After(deadline) {
				t.Fatalf("stamen did not ingest %s's events", w.Name)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return broker, secrets, feed
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
