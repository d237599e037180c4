package embedded

import (
	"bytes"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

func TestStartRefusesWithoutPasswordOffLoopback(t *testing.T) {
	_, err := Start(Config{Addr: "0.0.0.0:0"})
	if err == nil || !strings.HasPrefix(err.Error(), "refusing to start the embedded broker on the non-loopback address 0.0.0.0:0 without a password") {
		t.Fatalf("error %v, want the refusal", err)
	}
	if _, err := Start(Config{Addr: "no-port"}); err == nil || !strings.HasPrefix(err.Error(), `invalid embedded broker address "no-port"`) {
		t.Fatalf("error %v, want the invalid address", err)
	}
}

// A generated password is in the URLs Start returns and in its log line,
// which is how the operator learns them; the results go to database 1
// unless a result backend is given.
func TestStartURLs(t *testing.T) {
	var logs bytes.Buffer
	b, err := Start(Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	u, err := url.Parse(b.BrokerURL)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	if password == "" || u.Path != "/0" {
		t.Errorf("broker URL %s: want a password and database 0", b.BrokerURL)
	}
	if want := strings.TrimSuffix(b.BrokerURL, "/0") + "/1"; b.ResultBackendURL != want {
		t.Errorf("result backend %s, want %s", b.ResultBackendURL, want)
	}
	if !strings.Contains(logs.String(), password) {
		t.Errorf("the log line does not give the generated password: %s", logs.String())
	}

	given, err := Start(Config{Addr: "127.0.0.1:0", Password: "operator-chosen", ResultBackend: "redis://elsewhere:6379/2"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = given.Close() })
	if given.ResultBackendURL != "redis://elsewhere:6379/2" {
		t.Errorf("result backend %s, want the one given", given.ResultBackendURL)
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "127.0.0.1": true, "::1": true, "127.1.2.3": true,
		"": false, "0.0.0.0": false, "10.0.0.1": false, "example.com": false,
	} {
		if got := IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}
