package celery

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stamen-dev/stamen/internal/pyfmt"
)

// TestReprsMatchCelery recomputes argsrepr and kwargsrepr of every captured
// task message from its body.
func TestReprsMatchCelery(t *testing.T) {
	for _, name := range wireFiles(t, "task-message-*-redis.json") {
		env, err := DecodeEnvelope(readWire(t, name))
		if err != nil {
			t.Fatal(err)
		}
		body, err := env.BodyBytes()
		if err != nil {
			t.Fatal(err)
		}
		var parts []json.RawMessage
		if err := json.Unmarshal(body, &parts); err != nil {
			t.Fatal(err)
		}
		var args []any
		dec := json.NewDecoder(bytes.NewReader(parts[0]))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			t.Fatal(err)
		}
		if got, want := pyfmt.ArgsRepr(args), env.Headers["argsrepr"]; got != want {
			t.Errorf("%s: ArgsRepr = %s, Celery sent %s", name, got, want)
		}
		kw, err := pyfmt.ReprJSON(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		if want := env.Headers["kwargsrepr"]; kw != want {
			t.Errorf("%s: kwargs repr = %s, Celery sent %s", name, kw, want)
		}
	}
}

// TestExceptionReprMatchesFlower checks the repr of captured exception
// results against what Flower and the workers' events show for them.
func TestExceptionReprMatchesFlower(t *testing.T) {
	var flower struct {
		Response struct {
			Body struct {
				Result string `json:"result"`
			} `json:"body"`
		} `json:"response"`
	}
	if err := json.Unmarshal(readFile(t, "../../testdata/flower-responses/task-result-failure.json"), &flower); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file string
		want string
	}{
		{"result-meta-failure-redis.json", flower.Response.Body.Result},
		// task-retried events carry the same repr.
		{"result-meta-retry-redis.json", "RuntimeError('attempt 1 failed')"},
		{"result-meta-revoked-redis.json", "TaskRevokedError('terminated')"},
	}
	for _, tt := range tests {
		r, err := DecodeResult(readWire(t, tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := pyfmt.ExceptionRepr(r.Result); got != tt.want {
			t.Errorf("%s: ExceptionRepr = %s, want %s", tt.file, got, tt.want)
		}
	}
}
