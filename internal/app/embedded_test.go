package app

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/redact"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// startEmbeddedApp starts an App on its embedded broker at a free loopback
// port, logging into logs.
func startEmbeddedApp(t *testing.T, cfg Config, logs *lockedBuffer) *App {
	t.Helper()
	if cfg.EmbeddedAddr == "" {
		cfg.EmbeddedAddr = fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))
	}
	cfg.DBPath = filepath.Join(t.TempDir(), "stamen.db")
	cfg.Logger = slog.New(redact.Handler(slog.NewTextHandler(logs, nil))) // as cmd/stamen logs
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start stamen on the embedded broker: %v", err)
	}
	t.Cleanup(a.Close)
	return a
}

// ping connects to the Redis at rawURL with a real client and PINGs.
func ping(t *testing.T, rawURL string) error {
	t.Helper()
	opts, err := goredis.ParseURL(rawURL)
	if err != nil {
		t.Fatalf("parse %s: %v", rawURL, err)
	}
	opts.MaxRetries = -1
	c := goredis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// TestEmbeddedBrokerRequiresItsPassword: a client without the password is
// refused (NOAUTH), one with the password the log line shows is served,
// whether stamen generated the password or was given it.
func TestEmbeddedBrokerRequiresItsPassword(t *testing.T) {
	for _, tc := range []struct {
		name, given string
	}{
		{"generated", ""},
		{"given", "given pw/with:odd@chars"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			a := startEmbeddedApp(t, Config{EmbeddedPassword: tc.given}, &logs)
			u, err := url.Parse(a.BrokerURL)
			if err != nil {
				t.Fatal(err)
			}
			pw, ok := u.User.Password()
			switch {
			case !ok || pw == "":
				t.Fatalf("worker URL %s has no password", a.BrokerURL)
			case tc.given != "" && pw != tc.given:
				t.Fatalf("worker URL %s: password %q, want the given %q", a.BrokerURL, pw, tc.given)
			case tc.given == "" && len(pw) < 20:
				t.Fatalf("generated password %q is too short to be unguessable", pw)
			}

			// The log line is how an operator learns the URL: it must show
			// a generated password, in both URLs. A given one the
			// operator knows, and it is masked there as everywhere.
			line := ""
			for l := range strings.Lines(logs.String()) {
				if strings.Contains(l, "embedded broker started") {
					line = l
				}
			}
			for _, want := range []string{a.BrokerURL, a.ResultBackendURL} {
				if tc.given != "" {
					want = redact.URL(want)
				}
				if !strings.Contains(line, want) {
					t.Errorf("the start line does not show %s:\n%s", want, logs.String())
				}
			}
			if tc.given != "" && strings.Contains(logs.String(), "odd") {
				t.Errorf("the logs show the given password:\n%s", logs.String())
			}
			if !strings.Contains(a.ResultBackendURL, u.User.String()+"@") {
				t.Errorf("result backend URL %s lacks the password", a.ResultBackendURL)
			}

			noPassword := "redis://" + u.Host + "/0"
			err = ping(t, noPassword)
			if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
				t.Errorf("PING without the password: %v, want NOAUTH", err)
			}
			wrong := *u
			wrong.User = url.UserPassword("", pw+"x")
			if err := ping(t, wrong.String()); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
				t.Errorf("PING with a wrong password: %v, want WRONGPASS", err)
			}
			for _, ok := range []string{a.BrokerURL, a.ResultBackendURL} {
				if err := ping(t, ok); err != nil {
					t.Errorf("PING with %s: %v", ok, err)
				}
			}
		})
	}
}

// TestEmbeddedBrokerRefusesOpenAddressWithoutPassword: listening beyond
// loopback needs a password given by the operator, whom the generated one
// would reach only through the log.
func TestEmbeddedBrokerRefusesOpenAddressWithoutPassword(t *testing.T) {
	port := testcluster.FreePort(t)
	for _, addr := range []string{fmt.Sprintf("0.0.0.0:%d", port), fmt.Sprintf(":%d", port), fmt.Sprintf("[::]:%d", port)} {
		a, err := New(context.Background(), Config{EmbeddedAddr: addr, DBPath: filepath.Join(t.TempDir(), "stamen.db")})
		if err == nil {
			a.Close()
			t.Errorf("started the embedded broker on %s without a given password", addr)
			continue
		}
		if !strings.Contains(err.Error(), "embedded_broker_password") {
			t.Errorf("%s: error %q does not say what to do", addr, err)
		}
	}
	// With a password given it starts there.
	var logs lockedBuffer
	a := startEmbeddedApp(t, Config{EmbeddedAddr: fmt.Sprintf("0.0.0.0:%d", port), EmbeddedPassword: "operator-chosen"}, &logs)
	if err := ping(t, a.BrokerURL); err != nil {
		t.Errorf("PING %s: %v", a.BrokerURL, err)
	}
}

// TestCeleryNeedsTheEmbeddedPassword: Celery's own client without the
// password is refused, and a real worker given the logged URLs works.
func TestCeleryNeedsTheEmbeddedPassword(t *testing.T) {
	testcluster.Require(t)
	var logs lockedBuffer
	a := startEmbeddedApp(t, Config{}, &logs)
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "embpw", Broker: a.BrokerURL, Backend: a.ResultBackendURL})

	// StartWorker saw it answer a ping through the password URL; stamen
	// ingests its events through the same broker.
	deadline := time.Now().Add(15 * time.Second)
	for !slices.Contains(a.State.WorkerNames(), w.Name) {
		if time.Now().After(deadline) {
			t.Fatalf("stamen did not ingest events of %s", w.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}

	u, _ := url.Parse(a.BrokerURL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testcluster.Python, "ping.py", "--broker", "redis://"+u.Host+"/0", "--timeout", "3", w.Name)
	cmd.Dir = filepath.Join("..", "..", "testdata", "celeryapp")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("Celery's client pinged %s without the password: %s", w.Name, out)
	}
	if !strings.Contains(string(out), "Authentication required") {
		t.Errorf("Celery's client failed otherwise than by NOAUTH: %v: %s", err, out)
	}
}

// lockedBuffer is a log destination the test reads while stamen writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// brokerClient is a client of a's embedded broker, with its password.
func brokerClient(t testing.TB, a *App) *goredis.Client {
	t.Helper()
	opts, err := goredis.ParseURL(a.BrokerURL)
	if err != nil {
		t.Fatal(err)
	}
	return goredis.NewClient(opts)
}
