package app

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/redact"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestInvalidBrokerURLHidesPassword: a password holding an unescaped '/',
// '?' or '#' ends the URL's host early, and url.Parse's reason then quotes
// the password's start as the port; the error must not.
func TestInvalidBrokerURLHidesPassword(t *testing.T) {
	for _, raw := range []string{
		"redis://:s3cret/x@127.0.0.1:1/0",
		"amqp://u:s3cret#x@127.0.0.1:1/",
		"sentinel://:s3cret?x@127.0.0.1:1/0",
	} {
		a, err := New(context.Background(), Config{BrokerURL: raw})
		if err == nil {
			a.Close()
			t.Fatalf("New(%q) succeeded", raw)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q): error reveals the password: %v", raw, err)
		}
	}
}

// TestAuditRecordPathHidesPassword: a record keeps its path as the log line
// shows it, a URL's password masked, as its parameters are.
func TestAuditRecordPathHidesPassword(t *testing.T) {
	r := httptest.NewRequest("POST", "/api/task/async-apply/redis:%2F%2F:s3cret@h", nil)
	if rec := auditRecord(r, "asyncApplyTask", nil, 0, false); strings.Contains(rec.Path, "s3cret") {
		t.Errorf("the record's path shows the password: %s", rec.Path)
	}
}

// TestDBSettingsRefused: --db in PostgreSQL's key=value form is refused
// without being shown (it would otherwise name a store file, logged whole
// with its password), and no file is made.
func TestDBSettingsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	a, err := New(context.Background(), Config{EmbeddedAddr: "127.0.0.1:0", DBPath: "host=127.0.0.1 dbname=x password=s3cret"})
	if err == nil {
		a.Close()
		t.Fatal("New accepted key=value settings as --db")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
	if files, _ := os.ReadDir(dir); len(files) > 0 {
		t.Errorf("a file was made: %s", files[0].Name())
	}
}

// TestServerEchoOfPasswordMasked: a Redis-compatible server that answers
// AUTH by quoting its arguments (as Redis answers a command it does not
// know) puts the broker's password in the error stamen stops with; the
// log line masks it all the same.
func TestServerEchoOfPasswordMasked(t *testing.T) {
	const password = "echoed-Passw0rd"
	addr := testcluster.FakeServer(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			fmt.Fprintf(c, "-ERR unknown command 'auth', with args beginning with: '%s' \r\n", password)
		}
	})
	a, err := New(context.Background(), Config{BrokerURL: "redis://:" + password + "@" + addr + "/0", BrokerTimeout: 2 * time.Second})
	if err == nil {
		a.Close()
		t.Fatal("New succeeded against a server that refuses every command")
	}
	// As stamen's main logs it.
	var logged bytes.Buffer
	slog.New(redact.Handler(slog.NewTextHandler(&logged, nil))).Error("cannot start", slog.Any("err", err))
	if !strings.Contains(logged.String(), "refused the connection") || strings.Contains(logged.String(), password) {
		t.Errorf("want the server's refusal with the password masked: %s", logged.String())
	}
}
