package celery

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stamen-dev/stamen/internal/pyfmt"
)

func ptr[T any](v T) *T { return &v }

// TestDecodeResultCaptures decodes every result document the lab captured,
// from the Redis backend and from rpc:// replies.
func TestDecodeResultCaptures(t *testing.T) {
	tests := []struct {
		file      string
		status    string
		ready     bool
		result    string
		dateDone  *string
		traceback bool
	}{
		{"result-meta-started-redis.json", "STARTED", false, `{"pid": 30677, "hostname": "w3@vm"}`, nil, false},
		{"result-meta-success-redis.json", "SUCCESS", true, `5`, ptr("2026-11-22T17:33:19.285275"), false},
		{"result-publish-success-redis.json", "SUCCESS", true, `5`, ptr("2026-11-22T17:33:19.285275"), false},
		{"result-meta-success-unicode-redis.json", "SUCCESS", true,
			`{"args": ["h\u00e9llo \u2603"], "kwargs": {"k": [1, 2.5, null, true]}}`, ptr("2026-11-22T17:33:20.387870"), false},
		{"result-meta-failure-redis.json", "FAILURE", true,
			`{"exc_type": "ValueError", "exc_message": ["kaput"], "exc_module": "builtins"}`, ptr("2026-11-22T17:33:20.403738"), true},
		{"result-meta-retry-redis.json", "RETRY", false,
			`{"exc_type": "RuntimeError", "exc_message": ["attempt 1 failed"], "exc_module": "builtins"}`, nil, true},
		{"result-meta-revoked-redis.json", "REVOKED", true,
			`{"exc_type": "TaskRevokedError", "exc_message": ["terminated"], "exc_module": "celery.exceptions"}`, ptr("2026-11-22T17:33:21.088351"), false},
		{"result-meta-aborted-redis.json", "ABORTED", false, `null`, nil, false},
	}
	var index map[string]json.RawMessage
	if err := json.Unmarshal(readWire(t, "index-redis.json"), &index); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r, err := DecodeResult(readWire(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tt.status || r.Ready() != tt.ready {
				t.Errorf("status %s ready %v, want %s %v", r.Status, r.Ready(), tt.status, tt.ready)
			}
			var entry struct {
				Key     string `json:"key"`
				Channel string `json:"channel"`
			}
			if err := json.Unmarshal(index[tt.file], &entry); err != nil {
				t.Fatal(err)
			}
			if key := entry.Key + entry.Channel; ResultKey(r.TaskID) != key {
				t.Errorf("ResultKey(%s) = %s, captured under %s", r.TaskID, ResultKey(r.TaskID), key)
			}
			if diff := cmp.Diff(generic(t, []byte(tt.result)), generic(t, r.Result)); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.dateDone, r.DateDone); diff != "" {
				t.Errorf("date_done (-want +got):\n%s", diff)
			}
			if (r.Traceback != nil) != tt.traceback {
				t.Errorf("traceback = %v, want one: %v", r.Traceback, tt.traceback)
			}
			if tt.traceback && !strings.HasPrefix(*r.Traceback, "Traceback (most recent call last):") {
				t.Errorf("traceback = %.40q", *r.Traceback)
			}
		})
	}

	for _, file := range wireFiles(t, "result-rpc-*-amqp.json") {
		var rec struct {
			BodyRaw string `json:"body_raw"`
		}
		if err := json.Unmarshal(readWire(t, file), &rec); err != nil {
			t.Fatal(err)
		}
		r, err := DecodeResult([]byte(rec.BodyRaw))
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if r.TaskID == "" || r.DateDone != nil {
			t.Errorf("%s: decoded %+v", file, r)
		}
	}
}

func TestDecodeResult(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *Result
		wantErr bool
	}{
		{"kombu typed date", `{"status": "SUCCESS", "result": 1, "date_done": {"__type__": "datetime", "__value__": "2026-11-22T17:33:19.285275+00:00"}, "task_id": "t"}`,
			&Result{TaskID: "t", Status: "SUCCESS", Result: json.RawMessage(`1`), DateDone: ptr("2026-11-22T17:33:19.285275+00:00")}, false},
		{"no result key", `{"status": "PROGRESS", "task_id": "t"}`,
			&Result{TaskID: "t", Status: "PROGRESS", Result: json.RawMessage(`null`)}, false},
		{"children kept", `{"status": "SUCCESS", "result": null, "children": [], "task_id": "t"}`,
			&Result{TaskID: "t", Status: "SUCCESS", Result: json.RawMessage(`null`), Children: json.RawMessage(`[]`)}, false},
		{"no status", `{"result": 1}`, nil, true},
		{"empty status", `{"status": ""}`, nil, true},
		{"status not a string", `{"status": 1}`, nil, true},
		{"date_done a number", `{"status": "SUCCESS", "date_done": 5}`, nil, true},
		{"traceback an object", `{"status": "FAILURE", "traceback": {"a": 1}}`, nil, true},
		{"not an object", `[1]`, nil, true},
		{"not JSON", `SUCCESS`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeResult([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReady(t *testing.T) {
	for status, want := range map[string]bool{
		"PENDING": false, "STARTED": false, "RETRY": false, "ABORTED": false, "PROGRESS": false,
		"SUCCESS": true, "FAILURE": true, "REVOKED": true,
	} {
		if got := (&Result{Status: status}).Ready(); got != want {
			t.Errorf("Ready() of %s = %v, want %v", status, got, want)
		}
	}
	if (*Result)(nil).Ready() {
		t.Error("a nil result is ready")
	}
}

// TestAbortedDocument checks the document byte for byte against the one
// AbortableAsyncResult.abort() wrote in the lab.
func TestAbortedDocument(t *testing.T) {
	want := readWire(t, "result-meta-aborted-redis.json")
	const id = "00fbfe37-ee09-4f46-8412-997327249d50"
	if got := AbortedDocument(id); string(got) != string(want) {
		t.Errorf("AbortedDocument:\n got %s\nwant %s", got, want)
	}
	r, err := DecodeResult(AbortedDocument(`odd"id`))
	if err != nil || r.TaskID != `odd"id` || r.Status != StateAborted {
		t.Errorf("AbortedDocument with a quote decodes to %+v, %v", r, err)
	}
}

func TestPendingResult(t *testing.T) {
	want := &Result{TaskID: "x", Status: "PENDING", Result: json.RawMessage("null")}
	if diff := cmp.Diff(want, PendingResult("x")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzDecodeResult(f *testing.F) {
	for _, name := range wireFiles(f, "result-*-redis.json") {
		f.Add(readWire(f, name))
	}
	f.Add([]byte(`{"status": "SUCCESS", "date_done": {"__type__": "datetime", "__value__": "x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeResult(data)
		if err != nil {
			return
		}
		if r.Status == "" || len(r.Result) == 0 {
			t.Fatalf("decoded %+v without an error", r)
		}
		_ = r.Ready()
		_ = pyfmt.ExceptionRepr(r.Result)
		if !json.Valid(r.Result) {
			t.Fatalf("result %q is not JSON", r.Result)
		}
	})
}

// TestDecodeResultUnreadable: results stored by workers with another
// result_serializer, or compressed, are named, not taken for an outage.
func TestDecodeResultUnreadable(t *testing.T) {
	tests := []struct {
		name, contentType string
		data              []byte
		want              string
	}{
		// pickle.dumps({"status": "SUCCESS", ...}, protocol=4) begins so.
		{"pickle 4", "", []byte("\x80\x04\x95\x8f\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x06status\x94"), "pickle"},
		{"pickle 2", "", []byte("\x80\x02}q\x00(X\x06\x00\x00\x00statusq\x01"), "pickle"},
		// msgpack.packb of a 6-key dict: fixmap 0x86.
		{"msgpack", "", []byte("\x86\xa6status\xa7SUCCESS"), "msgpack"},
		{"zlib", "", []byte{0x78, 0x9c, 0xab, 0x56}, "zlib"},
		{"gzip", "", []byte{0x1f, 0x8b, 0x08, 0x00}, "gzip"},
		{"bzip2", "", []byte("BZh91AY&SY"), "bzip2"},
		{"xz", "", []byte{0xfd, '7', 'z', 'X', 'Z', 0, 0}, "xz"},
		{"zstd", "", []byte{0x28, 0xb5, 0x2f, 0xfd, 0}, "zstd"},
		{"yaml", "", []byte("children: []\ndate_done: '2026-11-23T20:00:00'\nstatus: SUCCESS\n"), "yaml"},
		{"rpc content type", "application/x-python-serialize", []byte("anything"), "pickle"},
		{"rpc msgpack", "application/x-msgpack", []byte{0x86}, "msgpack"},
		{"garbage", "", []byte{0x00, 0x01, 0x02}, "unknown"},
	}
	for _, tt := range tests {
		_, err := DecodeResultContent(tt.data, tt.contentType)
		var u *UnreadableResultError
		if !errors.As(err, &u) || u.Serializer != tt.want {
			t.Errorf("%s: err %v, want an UnreadableResultError for %q", tt.name, err, tt.want)
		}
	}
	// JSON, even broken JSON, is not "another serializer".
	for _, data := range []string{`{"status": `, `[1, 2]`, `"x"`} {
		_, err := DecodeResult([]byte(data))
		var u *UnreadableResultError
		if err == nil || errors.As(err, &u) {
			t.Errorf("%s: err %v, want a plain decode error", data, err)
		}
	}
	if r, err := DecodeResultContent([]byte(`{"status": "SUCCESS", "result": 4}`), "application/json"); err != nil || r.Status != StateSuccess {
		t.Errorf("JSON document: %v, %v", r, err)
	}
}

// TestDecodeResultExtended reads the request fields a worker stores with
// result_extended=True, and none without them.
func TestDecodeResultExtended(t *testing.T) {
	tests := []struct {
		doc  string
		want *ResultRequest
	}{
		{`{"status": "FAILURE", "result": null, "task_id": "a", "name": "stamen.echo", "args": [1, "x"], "kwargs": {"k": 2}, "worker": "w1@h", "retries": 0, "queue": "q1"}`,
			&ResultRequest{Name: "stamen.echo", Args: []any{json.Number("1"), "x"}, Kwargs: map[string]any{"k": json.Number("2")}, Queue: "q1"}},
		{`{"status": "SUCCESS", "result": 5, "task_id": "a", "name": "stamen.add", "args": null, "kwargs": null, "queue": null}`,
			&ResultRequest{Name: "stamen.add"}},
		{`{"status": "SUCCESS", "result": 5, "task_id": "a"}`, nil},
		{`{"status": "SUCCESS", "result": 5, "task_id": "a", "name": "n", "args": "oops"}`, nil},
	}
	for _, tt := range tests {
		r, err := DecodeResult([]byte(tt.doc))
		if err != nil {
			t.Fatalf("%s: %v", tt.doc, err)
		}
		if diff := cmp.Diff(tt.want, r.Request); diff != "" {
			t.Errorf("%s: request (-want +got):\n%s", tt.doc, diff)
		}
	}
}
