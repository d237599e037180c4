package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestLogsHoldNoSecrets runs the binary with a password in the broker URL
// and HTTP credentials, exercises successful and failing requests, and
// greps everything it logged.
func TestLogsHoldNoSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const brokerSecret, httpSecret = "BrokerPw-s3cret", "HttpPw-s3cret"
	bin := buildBinary(t)

	for _, broker := range []string{
		// Redis rejects the password (none is set), and a port where nothing
		// listens: both failures must be reported without the secret.
		"redis://:" + brokerSecret + "@127.0.0.1:6379/9",
		"redis://user:" + brokerSecret + "@127.0.0.1:1/0",
		"amqp://guest:" + brokerSecret + "@127.0.0.1:5672/",
	} {
		port := freePort(t)
		var logs bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, "--broker", broker, "--port", fmt.Sprint(port),
			"--broker_timeout", "1s", "--logging", "debug")
		cmd.Env = append(os.Environ(), "STAMEN_BASIC_AUTH=admin:"+httpSecret)
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			if resp, err := http.Get(base + "/healthcheck"); err == nil {
				resp.Body.Close()
				break
			}
			if cmd.ProcessState != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, req := range []struct{ method, path, user, pass string }{
			{"GET", "/api/workers", "admin", "wrong-" + httpSecret},
			{"GET", "/api/workers?refresh=1", "admin", httpSecret},
			{"GET", "/api/queues/length", "admin", httpSecret},
			{"POST", "/api/task/async-apply/x.y", "admin", httpSecret},
			{"POST", "/api/task/send-task/x.y", "admin", httpSecret},
			{"GET", "/api/task/result/some-id", "admin", httpSecret},
		} {
			r, _ := http.NewRequest(req.method, base+req.path, nil)
			r.SetBasicAuth(req.user, req.pass)
			if resp, err := http.DefaultClient.Do(r); err == nil {
				var body bytes.Buffer
				_, _ = body.ReadFrom(resp.Body)
				resp.Body.Close()
				if strings.Contains(body.String(), brokerSecret) || strings.Contains(body.String(), httpSecret) {
					t.Errorf("%s %s: secret in the response: %s", req.method, req.path, body.String())
				}
			}
		}
		if cmd.Process != nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		_ = cmd.Wait()
		cancel()
		if logs.Len() == 0 {
			t.Errorf("%s: nothing logged", broker)
		}
		for _, secret := range []string{brokerSecret, httpSecret} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("broker %s: the logs contain %q:\n%s", strings.ReplaceAll(broker, brokerSecret, "***"), secret, logs.String())
			}
		}
	}
}
