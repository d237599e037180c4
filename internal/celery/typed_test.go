package celery

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stamen-dev/stamen/internal/pyfmt"
)

// typedWireDir holds what Celery 5.2.6, 5.5.2 and 5.6.3 workers and clients
// wrote for the same tasks (testdata/celery-wire/typed/capture.py): echo of
// a datetime, date, time, UUID and Decimal (and bytes from 5.5 on), and a
// ValueError raised with a datetime.
const typedWireDir = "../../testdata/celery-wire/typed"

func typedFixture(t *testing.T, pattern string) []byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(typedWireDir, pattern))
	if err != nil || len(files) != 1 {
		t.Fatalf("fixture %s: %v %v", pattern, files, err)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The echo task's result as a 5.2 worker stores it, and the bytes 5.5+
// clients can also send.
var (
	echo52 = map[string]any{
		"args": []any{"2024-01-02T00:00:00"},
		"kwargs": map[string]any{
			"dt": "2024-01-02T03:04:05.678901Z", "naive": "2024-01-02T03:04:05",
			"offset": "2024-01-02T03:04:05+02:00", "d": "2024-01-02T00:00:00", "t": "03:04:05.123000",
			"u": "12345678-1234-5678-1234-567812345678", "dec": "1.10",
		},
	}
	bytesKwargs = map[string]any{"b": "text bytes", "raw": "/wAB"}
	fail52      = "ValueError('2024-01-02T03:04:05.678901Z')"
)

func TestTypedResultsReadAsCelery52(t *testing.T) {
	for _, v := range []string{"5.2", "5.5", "5.6"} {
		t.Run(v, func(t *testing.T) {
			echo := typedFixture(t, "result-echo-celery"+v+"-redis.json")
			if v != "5.2" && !strings.Contains(string(echo), `"__type__"`) {
				t.Fatalf("the %s capture holds no typed values: not a test", v)
			}
			r, err := DecodeResult(echo)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(r.Result), "__type__") {
				t.Errorf("typed values left: %s", r.Result)
			}
			var got map[string]any
			if err := json.Unmarshal(r.Result, &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"args": echo52["args"], "kwargs": map[string]any{}}
			for k, x := range echo52["kwargs"].(map[string]any) {
				want["kwargs"].(map[string]any)[k] = x
			}
			if v != "5.2" {
				for k, x := range bytesKwargs {
					want["kwargs"].(map[string]any)[k] = x
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("echo result (-want +got):\n%s", diff)
			}

			r, err = DecodeResult(typedFixture(t, "result-fail-celery"+v+"-redis.json"))
			if err != nil {
				t.Fatal(err)
			}
			if got := pyfmt.ExceptionRepr(r.Result); got != fail52 {
				t.Errorf("exception %s, want %s", got, fail52)
			}
		})
	}
}

func TestTypedEventsReadAsCelery52(t *testing.T) {
	// The echo result repr of a 5.2 worker, and what 5.5+ add for bytes.
	succeeded52 := "{'args': ['2024-01-02T00:00:00'], 'kwargs': {'dt': '2024-01-02T03:04:05.678901Z', 'naive': '2024-01-02T03:04:05', 'offset': '2024-01-02T03:04:05+02:00', 'd': '2024-01-02T00:00:00', 't': '03:04:05.123000', 'u': '12345678-1234-5678-1234-567812345678', 'dec': '1.10'}}"
	kwargs52 := strings.TrimPrefix(strings.TrimSuffix(succeeded52, "}"), "{'args': ['2024-01-02T00:00:00'], 'kwargs': ")
	for _, v := range []string{"5.2", "5.5", "5.6"} {
		t.Run(v, func(t *testing.T) {
			files, _ := filepath.Glob(filepath.Join(typedWireDir, "event-*-celery"+v+"-redis.json"))
			if len(files) < 7 {
				t.Fatalf("%d event captures for %s", len(files), v)
			}
			seen := map[string]bool{}
			for _, f := range files {
				payload, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				events, err := DecodeEventEnvelope(payload)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				for _, e := range events {
					raw := string(e.Raw)
					for _, bad := range []string{"__type__", "datetime.", "UUID(", "Decimal("} {
						if strings.Contains(raw, bad) {
							t.Errorf("%s %s: Raw still holds %q: %s", filepath.Base(f), e.Type, bad, raw)
						}
					}
					var fields map[string]any
					if err := json.Unmarshal(e.Raw, &fields); err != nil {
						t.Fatalf("Raw is not JSON: %v", err)
					}
					wantKwargs, wantResult := kwargs52, succeeded52
					if v != "5.2" {
						wantKwargs = strings.TrimSuffix(kwargs52, "}") + ", 'b': 'text bytes', 'raw': 'ff0001'}"
						wantResult = strings.TrimSuffix(succeeded52, "}}") + ", 'b': 'text bytes', 'raw': 'ff0001'}}"
					}
					switch {
					case e.Type == "task-sent" && e.Name == "stamen.echo", e.Type == "task-received" && e.Name == "stamen.echo":
						seen[e.Type+" echo"] = true
						if e.Args != "('2024-01-02T00:00:00',)" || e.Kwargs != wantKwargs {
							t.Errorf("%s: args %s kwargs %s, want ('2024-01-02T00:00:00',) %s", e.Type, e.Args, e.Kwargs, wantKwargs)
						}
						if fields["kwargs"] != e.Kwargs || fields["args"] != e.Args {
							t.Errorf("%s: Raw args/kwargs %v %v differ from the fields", e.Type, fields["args"], fields["kwargs"])
						}
					case e.Type == "task-succeeded":
						seen[e.Type] = true
						if e.Result != wantResult || fields["result"] != e.Result {
							t.Errorf("result %s (Raw %v), want %s", e.Result, fields["result"], wantResult)
						}
					case e.Type == "task-failed":
						seen[e.Type] = true
						if e.Exception != fail52 || fields["exception"] != e.Exception {
							t.Errorf("exception %s (Raw %v), want %s", e.Exception, fields["exception"], fail52)
						}
					case e.Type == "task-sent" && e.Name == "stamen.fail":
						seen[e.Type+" fail"] = true
						if want := "{'message': '2024-01-02T03:04:05.678901Z'}"; e.Kwargs != want {
							t.Errorf("fail kwargs %s, want %s", e.Kwargs, want)
						}
					}
				}
			}
			if len(seen) != 5 {
				t.Errorf("events checked: %v", seen)
			}
		})
	}
}

func TestPlainJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"b": 1, "a": [1.50, "x"]}`, `{"b":1,"a":[1.50,"x"]}`},
		{`[{"__type__": "datetime", "__value__": "2024-01-02T03:04:05+00:00"}, {"__value__": "2024-01-02", "__type__": "date"}]`, `["2024-01-02T03:04:05Z","2024-01-02T00:00:00"]`},
		{`{"u": {"__type__": "uuid", "__value__": {"hex": "12345678123456781234567812345678"}}}`, `{"u":"12345678-1234-5678-1234-567812345678"}`},
		{`{"t": {"__type__": "time", "__value__": "03:04:05+00:00"}, "d": {"__type__": "decimal", "__value__": "1E+2"}}`, `{"t":"03:04:05+00:00","d":"1E+2"}`},
		{`{"x": {"__type__": "bytes", "__value__": "<é>"}, "y": {"__type__": "base64", "__value__": "/wAB"}}`, `{"x":"<é>","y":"/wAB"}`},
		// Markers of unknown types, and objects with more keys, stay.
		{`{"__type__": "myapp.Money", "__value__": "1 EUR"}`, `{"__type__":"myapp.Money","__value__":"1 EUR"}`},
		{`{"__type__": "date", "__value__": "2024-01-02", "x": 1}`, `{"__type__":"date","__value__":"2024-01-02","x":1}`},
	} {
		got, err := PlainJSON([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("PlainJSON(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := PlainJSON([]byte(`{"a": `)); err == nil {
		t.Error("PlainJSON of broken JSON: no error")
	}
}

func FuzzPlainJSON(f *testing.F) {
	f.Add([]byte(`{"a": {"__type__": "uuid", "__value__": {"hex": "12345678123456781234567812345678"}}}`))
	f.Add([]byte(`[{"__type__": "datetime", "__value__": "x+00:00"}, 1.5e3, null]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := PlainJSON(data)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Errorf("PlainJSON(%q) = %q: not JSON", data, out)
		}
	})
}
