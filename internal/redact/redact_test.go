package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKeyIsCeleryRule(t *testing.T) {
	for _, k := range []string{"broker_password", "password", "my_api_key", "API", "aws_secret_access_key",
		"auth_token", "SIGNATURE_X", "database_url", "Profanities_List", "ssl_keyfile", "task_default_routing_key",
		"beat_dburi", // Celery 5.6's
		// stamen's additions to Celery's rule.
		"authorization", "Authorization", "proxy_authorization", "http_auth", "OAUTH_CLIENT",
		"cookie", "Set-Cookie", "session_cookie", "credentials", "aws_credential", "GOOGLE_APPLICATION_CREDENTIALS",
		"private_key"} {
		if !Key(k) {
			t.Errorf("Key(%q) = false, want true", k)
		}
	}
	// Settings Celery's workers report that stay readable.
	for _, k := range []string{"broker_url", "result_backend", "visibility_timeout", "hostname", "userid", "sentinel_kwargs",
		"broker_login_method", "result_backend_transport_options", "result_backend_always_retry", "login_method", "task_routes"} {
		if Key(k) {
			t.Errorf("Key(%q) = true, want false", k)
		}
	}
}

func TestStringMasksURLPasswords(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://:s3cret@h:6379/0", "redis://:********@h:6379/0"},
		{"amqp://user:s3cret@rabbit:5672/vh", "amqp://user:********@rabbit:5672/vh"},
		// '@', ':' and '/' in the password, literal or escaped.
		{"redis://:p@ss:w/rd@h/0", "redis://:********@h/0"},
		{"redis://u:a@b@c%2Fd@h/0", "redis://u:********@h/0"},
		// Celery's failover lists.
		{"redis://:a@1@h1/0;redis://:b@2@h2/0", "redis://:********@h1/0;redis://:********@h2/0"},
		{"amqp://u:x@h1//;amqp://u:y@h2//", "amqp://u:********@h1//;amqp://u:********@h2//"},
		// In free text, twice, with a user but no password.
		{`dial redis://:pw@h:1 failed, then amqp://guest@h//: refused`, `dial redis://:********@h:1 failed, then amqp://guest@h//: refused`},
		{"connect redis://u:pw@h/0?password=q1&db=2&ssl_keyfile=/k#f", "connect redis://u:********@h/0?password=********&db=2&ssl_keyfile=********#f"},
		{"redis://h/0?x=1", "redis://h/0?x=1"},
		{"no url at all: user:pw@host", "no url at all: user:pw@host"},
		{"", ""},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if got := String(String(tc.in)); got != tc.want {
			t.Errorf("String is not idempotent on %q: %q", tc.in, got)
		}
	}
}

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://:p@ss word@h/0", "redis://:********@h/0"},
		{"redis://h/0", "redis://h/0"},
		{"amqp://u:x@h1//;amqp://u:y@h2//", "amqp://u:********@h1//;amqp://u:********@h2//"},
		{"redis//:s3cret@h", "<unparsable URL>"},
		{"amqp://u:x@h1//;h2:s3cret@x", "<unparsable URL>"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSettingsMasksAtAnyDepth is the configuration a worker reports with
// conf, uncensored (Celery's censoring skips lists; another version, or a
// patched worker, may censor nothing): every secret masked wherever it is.
func TestSettingsMasksAtAnyDepth(t *testing.T) {
	in := `{
		"broker_url": "redis://:a@b:c/d@h:6379/0",
		"broker_password": "S1",
		"broker_transport_options": {"visibility_timeout": 3600,
			"sentinel_kwargs": {"password": "S2", "socket_timeout": 1}},
		"my_api_key": "S3",
		"my_tokens": ["S4", "S5"],
		"beat_schedule": [{"task": "t", "kwargs": {"secret": "S6", "n": 1, "authorization": "S10", "cookie": "S11"}}],
		"failover": "redis://:S7@h1/0;redis://:S8@h2/0",
		"redis://:S9@host": 1,
		"database_engine_options": {"echo": true},
		"result_expires": 3600,
		"task_default_queue": "celery"
	}`
	d := json.NewDecoder(strings.NewReader(in))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(Settings(v))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 11; i++ {
		if s := fmt.Sprintf("S%d", i); bytes.Contains(out, []byte(s)) {
			t.Errorf("%s is still there: %s", s, out)
		}
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"broker_url":      "redis://:********@h:6379/0",
		"broker_password": Mask,
		"broker_transport_options": map[string]any{"visibility_timeout": float64(3600),
			"sentinel_kwargs": map[string]any{"password": Mask, "socket_timeout": float64(1)}},
		"my_api_key":              Mask,
		"my_tokens":               Mask,
		"beat_schedule":           []any{map[string]any{"task": "t", "kwargs": map[string]any{"secret": Mask, "n": float64(1), "authorization": Mask, "cookie": Mask}}},
		"failover":                "redis://:********@h1/0;redis://:********@h2/0",
		"redis://:********@host":  float64(1),
		"database_engine_options": map[string]any{"echo": true},
		"result_expires":          float64(3600),
		"task_default_queue":      "celery",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestStringsKeepsKeys(t *testing.T) {
	v := map[string]any{"routing_key": "celery", "args": []any{"redis://:pw@h/0"}}
	got := Strings(v)
	want := map[string]any{"routing_key": "celery", "args": []any{"redis://:********@h/0"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

type stringer struct{}

func (stringer) String() string { return "amqp://u:Sstr@h//" }

func TestHandlerMasksEveryLogLine(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log = log.With(slog.String("broker", "redis://:Swith@h/0"))
	log.Info("dial redis://:Smsg@h:1 failed",
		slog.Any("err", fmt.Errorf("wrapped: %w", errors.New("redis://u:Serr@h/0 refused"))),
		slog.Group("g", slog.String("url", "amqp://u:Sgroup@h//")),
		slog.Any("s", stringer{}),
		slog.Any("list", []string{"redis://:Slist@h"}),
		slog.Int("n", 3))
	out := buf.String()
	for _, s := range []string{"Swith", "Smsg", "Serr", "Sgroup", "Sstr", "Slist"} {
		if strings.Contains(out, s) {
			t.Errorf("%s logged: %s", s, out)
		}
	}
	if !strings.Contains(out, "n=3") || !strings.Contains(out, "g.url=amqp://u:********@h//") {
		t.Errorf("lost the rest: %s", out)
	}
}

func TestHandlerShowsDisclosedValues(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewTextHandler(&buf, nil)))
	log.Info("embedded", slog.Any("broker_url", Disclosed("redis://:Sshown@h/0")), slog.String("other", "redis://:Shidden@h/0"))
	out := buf.String()
	if !strings.Contains(out, "broker_url=redis://:Sshown@h/0") || strings.Contains(out, "Shidden") {
		t.Errorf("want the disclosed URL in clear and the other masked: %s", out)
	}
}

func TestParseErrorQuotesNoPieceOfTheURL(t *testing.T) {
	for _, raw := range []string{
		"redis://:s3cret/x@h:6379/0", // invalid port ":s3cret" after host
		"amqp://u:s3cret#x@h/",
		"redis://:s3%cret@h/0", // invalid URL escape "%cr"
		"redis://:s3cret@h:port/0",
	} {
		_, err := url.Parse(raw)
		if err == nil {
			t.Fatalf("url.Parse(%q) succeeded", raw)
		}
		if got := ParseError(err).Error(); strings.Contains(got, "s3") || strings.Contains(got, "cr") {
			t.Errorf("ParseError(url.Parse(%q)) = %q: quotes the password", raw, got)
		}
	}
	// A reason that quotes nothing is kept.
	_, err := url.Parse("redis://:s3cret@h/0\x7f")
	if err == nil {
		t.Fatal("url.Parse succeeded")
	}
	if got, want := ParseError(err).Error(), "net/url: invalid control character in URL"; got != want {
		t.Errorf("ParseError = %q, want %q", got, want)
	}
}

// TestRegisteredSecretsMasked: a secret stamen was given is masked wherever
// it appears, not only where the URL and key rules look; a short one is
// left to those rules.
func TestRegisteredSecretsMasked(t *testing.T) {
	Register("reg-secret-value-1", "short")
	RegisterURLs("redis://:p%40ss-reg-secret@h:6379/0;redis://u:other-reg-secret@h2/0?password=query-reg-secret")
	RegisterURLs("postgres://stamen_user:stamen_user@h/db", "postgres://admin:postgres@h/db")
	RegisterSettings(`{"master_name": "m", "sentinel_kwargs": {"password": "sentinel-reg-secret"}, "x": ["amqp://u:list-reg-secret@h/"]}`)
	for _, c := range []struct{ in, want string }{
		{"ERR unknown command 'auth', with args beginning with: 'reg-secret-value-1'", "ERR unknown command 'auth', with args beginning with: '" + Mask + "'"},
		{"refused p@ss-reg-secret", "refused " + Mask},
		{"refused p%40ss-reg-secret", "refused " + Mask},
		{"other-reg-secret and query-reg-secret", Mask + " and " + Mask},
		{"sentinel said sentinel-reg-secret", "sentinel said " + Mask},
		{"list-reg-secret", Mask},
		{"a short word stays", "a short word stays"},
		// A password the URL shows anyway (its user, its scheme) is not
		// masked outside it.
		{"role stamen_user", "role stamen_user"},
		{"postgres://admin:x@h/db", "postgres://admin:" + Mask + "@h/db"},
	} {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
