package celery

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

const eventWireDir = "../../testdata/celery-wire"

func floatPtr(f float64) *float64 { return &f }

// eventFixture returns the event JSON of a capture and, for Redis, the
// pub/sub payload it came in.
func eventFixture(t testing.TB, file string) (body, payload []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(eventWireDir, file))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Body    json.RawMessage `json:"body"`
		BodyRaw *string         `json:"body_raw"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.BodyRaw != nil { // AMQP firehose record
		return []byte(*rec.BodyRaw), nil
	}
	var b64 string
	if err := json.Unmarshal(rec.Body, &b64); err != nil {
		t.Fatal(err)
	}
	body, err = base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return body, data
}

var ignoreRaw = cmpopts.IgnoreFields(Event{}, "Raw")

func TestDecodeEventFixtures(t *testing.T) {
	tests := []struct {
		file string
		want []Event
	}{
		{file: "event-task-failed-amqp.json", want: []Event{
			{
				Hostname:  "a1@vm",
				UTCOffset: 0,
				PID:       30589,
				Clock:     31,
				UUID:      "fb811c44-4aa0-4b00-84d7-70b020e19518",
				Exception: "ValueError('kaput')",
				Traceback: "Traceback (most recent call last):\n  File \"/usr/lib/python3/dist-packages/celery/app/trace.py\", line 451, in trace_task\n    R = retval = fun(*args, **kwargs)\n                 ^^^^^^^^^^^^^^^^^^^^\n  File \"/usr/lib/python3/dist-packages/celery/app/trace.py\", line 734, in __protected_call__\n    return self.run(*args, **kwargs)\n           ^^^^^^^^^^^^^^^^^^^^^^^^^\n  File \"/srv/harness/celery_app.py\", line 64, in fail\n    raise ValueError(message)\nValueError: kaput\n",
				Timestamp: 1795368812.6589386,
				Type:      "task-failed",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldException | FieldTraceback | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-task-failed-redis.json", want: []Event{
			{
				Hostname:  "w3@vm",
				UTCOffset: 0,
				PID:       30662,
				Clock:     41,
				UUID:      "f9ff778e-d030-41ce-81d7-e070c7e26f69",
				Exception: "ValueError('kaput')",
				Traceback: "Traceback (most recent call last):\n  File \"/usr/lib/python3/dist-packages/celery/app/trace.py\", line 451, in trace_task\n    R = retval = fun(*args, **kwargs)\n                 ^^^^^^^^^^^^^^^^^^^^\n  File \"/usr/lib/python3/dist-packages/celery/app/trace.py\", line 734, in __protected_call__\n    return self.run(*args, **kwargs)\n           ^^^^^^^^^^^^^^^^^^^^^^^^^\n  File \"/work/steering/harness/celery_app.py\", line 64, in fail\n    raise ValueError(message)\nValueError: kaput\n",
				Timestamp: 1795368800.4080856,
				Type:      "task-failed",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldException | FieldTraceback | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-task-multi-batch-redis.json", want: []Event{
			{
				Hostname:  "w3@vm",
				UTCOffset: 0,
				PID:       30662,
				Clock:     58,
				UUID:      "7be09ffb-b78d-40c2-a456-cc23d0a40899",
				Name:      "harness.add",
				Args:      "(13, 13)",
				Kwargs:    "{}",
				RootID:    "7be09ffb-b78d-40c2-a456-cc23d0a40899",
				Retries:   0,
				Timestamp: 1795368802.4176607,
				Type:      "task-received",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldName | FieldArgs | FieldKwargs | FieldRootID | FieldParentID | FieldRetries | FieldETA | FieldExpires | FieldTimestamp | FieldType,
				Null:      FieldParentID | FieldETA | FieldExpires,
			},
			{
				Hostname:  "w3@vm",
				UTCOffset: 0,
				PID:       30662,
				Clock:     59,
				UUID:      "b65d47fc-4853-450c-b905-d4b4e4aa5cc5",
				Result:    "0",
				Runtime:   floatPtr(0.020255244999134447),
				Timestamp: 1795368802.4180167,
				Type:      "task-succeeded",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldResult | FieldRuntime | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-task-received-amqp.json", want: []Event{
			{
				Hostname:  "a1@vm",
				UTCOffset: 0,
				PID:       30589,
				Clock:     26,
				UUID:      "faaa6805-bab5-4e5b-a90a-effd905114fa",
				Name:      "harness.add",
				Args:      "(2, 3)",
				Kwargs:    "{}",
				RootID:    "faaa6805-bab5-4e5b-a90a-effd905114fa",
				Retries:   0,
				Timestamp: 1795368812.6041298,
				Type:      "task-received",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldName | FieldArgs | FieldKwargs | FieldRootID | FieldParentID | FieldRetries | FieldETA | FieldExpires | FieldTimestamp | FieldType,
				Null:      FieldParentID | FieldETA | FieldExpires,
			},
		}},
		{file: "event-task-received-redis.json", want: []Event{
			{
				Hostname:  "w3@vm",
				UTCOffset: 0,
				PID:       30662,
				Clock:     35,
				UUID:      "d7ea2150-f63a-4c62-b5a4-f1fc8d85db5a",
				Name:      "harness.add",
				Args:      "(2, 3)",
				Kwargs:    "{}",
				RootID:    "d7ea2150-f63a-4c62-b5a4-f1fc8d85db5a",
				Retries:   0,
				Timestamp: 1795368799.2726183,
				Type:      "task-received",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldName | FieldArgs | FieldKwargs | FieldRootID | FieldParentID | FieldRetries | FieldETA | FieldExpires | FieldTimestamp | FieldType,
				Null:      FieldParentID | FieldETA | FieldExpires,
			},
		}},
		{file: "event-task-retried-redis.json", want: []Event{
			{
				Hostname:  "w4@vm",
				UTCOffset: 0,
				PID:       30665,
				Clock:     41,
				UUID:      "39b21972-af24-44c5-8e2e-b4b1d4b7fed0",
				Exception: "RuntimeError('attempt 1 failed')",
				Traceback: "Traceback (most recent call last):\n  File \"/usr/lib/python3/dist-packages/celery/app/trace.py\", line 451, in trace_task\n    R = retval = fun(*args, **kwargs)\n                 ^^^^^^^^^^^^^^^^^^^^\n  File \"/usr/lib/python3/dist-packages/celery/app/trace.py\", line 734, in __protected_call__\n    return self.run(*args, **kwargs)\n           ^^^^^^^^^^^^^^^^^^^^^^^^^\n  File \"/work/steering/harness/celery_app.py\", line 98, in retry\n    raise self.retry(exc=RuntimeError(f\"attempt {attempt} failed\"))\n          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File \"/usr/lib/python3/dist-packages/celery/app/task.py\", line 738, in retry\n    raise ret\ncelery.exceptions.Retry: Retry in 0.5s: RuntimeError('attempt 1 failed')\n",
				Timestamp: 1795368800.444148,
				Type:      "task-retried",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldException | FieldTraceback | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-task-revoked-redis.json", want: []Event{
			{
				Hostname:   "w1@vm",
				UTCOffset:  0,
				PID:        30583,
				Clock:      51,
				UUID:       "a6fb0ade-a516-405e-95b6-182d8f484c21",
				Terminated: true,
				Signum:     json.RawMessage("15"),
				Expired:    false,
				Timestamp:  1795368801.088097,
				Type:       "task-revoked",
				Present:    FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldTerminated | FieldSignum | FieldExpired | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-task-sent-amqp.json", want: []Event{
			{
				Hostname:   "gen32136@vm",
				UTCOffset:  0,
				PID:        32136,
				Clock:      1,
				UUID:       "faaa6805-bab5-4e5b-a90a-effd905114fa",
				RootID:     "faaa6805-bab5-4e5b-a90a-effd905114fa",
				Name:       "harness.add",
				Args:       "(2, 3)",
				Kwargs:     "{}",
				Retries:    0,
				Queue:      "celery",
				Exchange:   "",
				RoutingKey: "celery",
				Timestamp:  1795368812.555414,
				Type:       "task-sent",
				Present:    FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldRootID | FieldParentID | FieldName | FieldArgs | FieldKwargs | FieldRetries | FieldETA | FieldExpires | FieldQueue | FieldExchange | FieldRoutingKey | FieldTimestamp | FieldType,
				Null:       FieldParentID | FieldETA | FieldExpires,
			},
		}},
		{file: "event-task-sent-redis.json", want: []Event{
			{
				Hostname:   "gen30734@vm",
				UTCOffset:  0,
				PID:        30734,
				Clock:      1,
				UUID:       "d7ea2150-f63a-4c62-b5a4-f1fc8d85db5a",
				RootID:     "d7ea2150-f63a-4c62-b5a4-f1fc8d85db5a",
				Name:       "harness.add",
				Args:       "(2, 3)",
				Kwargs:     "{}",
				Retries:    0,
				Queue:      "celery",
				Exchange:   "",
				RoutingKey: "celery",
				Timestamp:  1795368799.271146,
				Type:       "task-sent",
				Present:    FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldRootID | FieldParentID | FieldName | FieldArgs | FieldKwargs | FieldRetries | FieldETA | FieldExpires | FieldQueue | FieldExchange | FieldRoutingKey | FieldTimestamp | FieldType,
				Null:       FieldParentID | FieldETA | FieldExpires,
			},
		}},
		{file: "event-task-started-amqp.json", want: []Event{
			{
				Hostname:  "a1@vm",
				UTCOffset: 0,
				PID:       30589,
				Clock:     27,
				UUID:      "faaa6805-bab5-4e5b-a90a-effd905114fa",
				Timestamp: 1795368812.6109781,
				Type:      "task-started",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-task-started-redis.json", want: []Event{
			{
				Hostname:  "w3@vm",
				UTCOffset: 0,
				PID:       30662,
				Clock:     36,
				UUID:      "d7ea2150-f63a-4c62-b5a4-f1fc8d85db5a",
				Timestamp: 1795368799.2743063,
				Type:      "task-started",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-task-succeeded-amqp.json", want: []Event{
			{
				Hostname:  "a1@vm",
				UTCOffset: 0,
				PID:       30589,
				Clock:     28,
				UUID:      "faaa6805-bab5-4e5b-a90a-effd905114fa",
				Result:    "5",
				Runtime:   floatPtr(0.01610636600162252),
				Timestamp: 1795368812.6300852,
				Type:      "task-succeeded",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldResult | FieldRuntime | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-task-succeeded-redis.json", want: []Event{
			{
				Hostname:  "w3@vm",
				UTCOffset: 0,
				PID:       30662,
				Clock:     37,
				UUID:      "d7ea2150-f63a-4c62-b5a4-f1fc8d85db5a",
				Result:    "5",
				Runtime:   floatPtr(0.011460792000434594),
				Timestamp: 1795368799.2873719,
				Type:      "task-succeeded",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldUUID | FieldResult | FieldRuntime | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-worker-heartbeat-amqp.json", want: []Event{
			{
				Hostname:  "a1@vm",
				UTCOffset: 0,
				PID:       30589,
				Clock:     21,
				Freq:      2.0,
				Active:    0,
				Processed: 0,
				Loadavg:   []float64{2.77, 1.6, 0.75},
				SWIdent:   "py-celery",
				SWVer:     "5.2.6",
				SWSys:     "Linux",
				Timestamp: 1795368812.1988056,
				Type:      "worker-heartbeat",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldFreq | FieldActive | FieldProcessed | FieldLoadavg | FieldSWIdent | FieldSWVer | FieldSWSys | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-worker-heartbeat-redis.json", want: []Event{
			{
				Hostname:  "w1@vm",
				UTCOffset: 0,
				PID:       30583,
				Clock:     20,
				Freq:      2.0,
				Active:    0,
				Processed: 0,
				Loadavg:   []float64{2.99, 1.58, 0.73},
				SWIdent:   "py-celery",
				SWVer:     "5.2.6",
				SWSys:     "Linux",
				Timestamp: 1795368798.1449764,
				Type:      "worker-heartbeat",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldFreq | FieldActive | FieldProcessed | FieldLoadavg | FieldSWIdent | FieldSWVer | FieldSWSys | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-worker-offline-redis.json", want: []Event{
			{
				Hostname:  "cap@vm",
				UTCOffset: 0,
				PID:       31354,
				Clock:     158,
				Freq:      2.0,
				Active:    0,
				Processed: 0,
				Loadavg:   []float64{2.84, 1.6, 0.74},
				SWIdent:   "py-celery",
				SWVer:     "5.2.6",
				SWSys:     "Linux",
				Timestamp: 1795368807.704091,
				Type:      "worker-offline",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldFreq | FieldActive | FieldProcessed | FieldLoadavg | FieldSWIdent | FieldSWVer | FieldSWSys | FieldTimestamp | FieldType,
			},
		}},
		{file: "event-worker-online-redis.json", want: []Event{
			{
				Hostname:  "cap@vm",
				UTCOffset: 0,
				PID:       31354,
				Clock:     1,
				Freq:      2.0,
				Active:    0,
				Processed: 0,
				Loadavg:   []float64{2.91, 1.59, 0.74},
				SWIdent:   "py-celery",
				SWVer:     "5.2.6",
				SWSys:     "Linux",
				Timestamp: 1795368803.7709951,
				Type:      "worker-online",
				Present:   FieldHostname | FieldUTCOffset | FieldPID | FieldClock | FieldFreq | FieldActive | FieldProcessed | FieldLoadavg | FieldSWIdent | FieldSWVer | FieldSWSys | FieldTimestamp | FieldType,
			},
		}},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		covered[tc.file] = true
		t.Run(tc.file, func(t *testing.T) {
			body, payload := eventFixture(t, tc.file)
			got, err := DecodeEvents(body)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, ignoreRaw); diff != "" {
				t.Errorf("DecodeEvents (-want +got):\n%s", diff)
			}
			checkRaw(t, body, got)
			if payload == nil {
				return
			}
			fromEnv, err := DecodeEventEnvelope(payload)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, fromEnv); diff != "" {
				t.Errorf("DecodeEventEnvelope differs from DecodeEvents (-body +envelope):\n%s", diff)
			}
		})
	}
	files, err := filepath.Glob(filepath.Join(eventWireDir, "event-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no event fixtures found")
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("fixture %s is not checked", filepath.Base(f))
		}
	}
}

// checkRaw verifies that each event's Raw is its own object of body.
func checkRaw(t *testing.T, body []byte, got []Event) {
	t.Helper()
	var objs []json.RawMessage
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		if err := json.Unmarshal(body, &objs); err != nil {
			t.Fatal(err)
		}
	} else {
		objs = []json.RawMessage{body}
	}
	var want []json.RawMessage
	for _, o := range objs {
		if bytes.HasPrefix(bytes.TrimSpace(o), []byte("{")) {
			want = append(want, bytes.TrimSpace(o))
		}
	}
	if len(want) != len(got) {
		t.Fatalf("%d objects, %d events", len(want), len(got))
	}
	for i := range got {
		if !bytes.Equal(got[i].Raw, want[i]) {
			t.Errorf("event %d Raw = %s, want %s", i, got[i].Raw, want[i])
		}
	}
}

func TestDecodeEvents(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []Event
	}{
		{
			name: "absent, null and set are told apart",
			body: `{"type": "task-received", "uuid": "u1", "eta": null, "name": "t"}`,
			want: []Event{{
				Type: "task-received", UUID: "u1", Name: "t",
				Present: FieldType | FieldUUID | FieldETA | FieldName,
				Null:    FieldETA,
			}},
		},
		{
			name: "a later duplicate key wins",
			body: `{"name": "a", "name": null, "result": null, "result": "5"}`,
			want: []Event{{Result: "5", Present: FieldName | FieldResult, Null: FieldName}},
		},
		{
			name: "escapes, unicode and invalid UTF-8",
			body: "{\"args\": \"('\\u00e9', '\\ud83d\\ude00', '\\n')\", \"kwargs\": \"{'k': '\xff'}\", \"na\\u006de\": \"\xc3\xa9\"}",
			want: []Event{{
				Args: "('é', '😀', '\n')", Kwargs: "{'k': '\ufffd'}", Name: "é",
				Present: FieldArgs | FieldKwargs | FieldName,
			}},
		},
		{
			name: "lenient value types",
			body: `{"args": [1, 2], "kwargs": {"a": 1}, "result": 5, "retries": 2.0, "pid": "12",
				"timestamp": "soon", "eta": {"__type__": "datetime", "__value__": "2026-01-01T00:00:00"},
				"clock": 1e3, "active": 1.5, "freq": 2, "loadavg": [1, "x"], "terminated": 1, "expired": true}`,
			want: []Event{{
				Args: "[1,2]", Kwargs: `{"a":1}`, Result: "5", Retries: 2, ETA: "2026-01-01T00:00:00",
				Clock: 1000, Freq: 2, Expired: true,
				Present: FieldArgs | FieldKwargs | FieldResult | FieldRetries | FieldETA | FieldClock |
					FieldFreq | FieldExpired,
			}},
		},
		{
			name: "revoked and rejected fields",
			body: `[{"type": "task-revoked", "signum": "SIGKILL", "terminated": true, "expired": false, "runtime": 0.5},
				{"type": "task-rejected", "requeue": true, "signum": null, "runtime": null}]`,
			want: []Event{
				{
					Type: "task-revoked", Signum: json.RawMessage(`"SIGKILL"`), Terminated: true, Runtime: floatPtr(0.5),
					Present: FieldType | FieldSignum | FieldTerminated | FieldExpired | FieldRuntime,
				},
				{
					Type: "task-rejected", Requeue: true,
					Present: FieldType | FieldRequeue | FieldSignum | FieldRuntime,
					Null:    FieldSignum | FieldRuntime,
				},
			},
		},
		{
			name: "non-object list elements are skipped",
			body: ` [1, {"type": "a"}, null, [{"type": "nested"}], "x", {"type": "b"}] `,
			want: []Event{{Type: "a", Present: FieldType}, {Type: "b", Present: FieldType}},
		},
		{name: "empty list", body: `[]`, want: []Event{}},
		{name: "empty object", body: `{}`, want: []Event{{}}},
		{
			name: "unknown keys and nested values are skipped",
			body: `{"x": {"type": "no", "y": [1, {"z": null}]}, "type": "yes", "hostname": "h"}`,
			want: []Event{{Type: "yes", Hostname: "h", Present: FieldType | FieldHostname}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeEvents([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, ignoreRaw); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeEventsErrors(t *testing.T) {
	for _, body := range []string{
		``, ` `, `"task-sent"`, `5`, `null`, `{`, `{"type": }`, `{"type": "a",}`, `[{"type": "a"},]`,
		`{"type": "a"} x`, `{"type": "a"}{}`, `[{"type": "a"}`, `{"type": "\x"}`, "{\"type\": \"\x01\"}",
		`{"pid": 01}`, `{"pid": -}`, `{"pid": 1.}`, `{"pid": 1e}`, `{"t": tru}`, `{"t": nul}`,
		`{"type": "a` + "\\u12" + `"}`, `[1 2]`, `{"a" 1}`, `{1: 2}`,
		strings.Repeat("[", maxEventDepth+1) + strings.Repeat("]", maxEventDepth+1),
	} {
		if got, err := DecodeEvents([]byte(body)); err == nil {
			t.Errorf("DecodeEvents(%.40q) = %+v, want an error", body, got)
		}
	}
	// encoding/json's own depth limit is fine.
	deep := `{"x": ` + strings.Repeat("[", maxEventDepth-1) + strings.Repeat("]", maxEventDepth-1) + `}`
	if _, err := DecodeEvents([]byte(deep)); err != nil {
		t.Errorf("depth %d: %v", maxEventDepth, err)
	}
}

func TestDecodeEventEnvelope(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name    string
		payload string
		want    []Event
		wantErr bool
	}{
		{
			name:    "base64 list body",
			payload: `{"body": "` + b64(`[{"type": "task-started", "uuid": "u"}]`) + `", "content-type": "application/json", "headers": {"hostname": "w"}, "properties": {"body_encoding": "base64"}}`,
			want:    []Event{{Type: "task-started", UUID: "u", Present: FieldType | FieldUUID}},
		},
		{
			name:    "plain body",
			payload: `{"body": "{\"type\": \"worker-heartbeat\"}", "properties": {}}`,
			want:    []Event{{Type: "worker-heartbeat", Present: FieldType}},
		},
		{name: "not JSON", payload: `nope`, wantErr: true},
		{name: "no body", payload: `{"properties": {"body_encoding": "base64"}}`, wantErr: true},
		{name: "body not a string", payload: `{"body": [], "properties": {"body_encoding": "base64"}}`, wantErr: true},
		{name: "trailing data", payload: `{"body": "W10=", "properties": {"body_encoding": "base64"}} {}`, wantErr: true},
		{name: "bad base64", payload: `{"body": "!!", "properties": {"body_encoding": "base64"}}`, wantErr: true},
		{name: "pickle", payload: `{"body": "gAN9", "content-type": "application/x-python-serialize", "properties": {"body_encoding": "base64"}}`, wantErr: true},
		{name: "body not JSON", payload: `{"body": "` + b64("{") + `", "properties": {"body_encoding": "base64"}}`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeEventEnvelope([]byte(tc.payload))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, ignoreRaw); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeEventsDoesNotAlias(t *testing.T) {
	body := []byte(`{"type": "task-sent", "uuid": "abc"}`)
	evs, err := DecodeEvents(body)
	if err != nil {
		t.Fatal(err)
	}
	copy(body, bytes.Repeat([]byte("x"), len(body)))
	if evs[0].UUID != "abc" || string(evs[0].Raw) != `{"type": "task-sent", "uuid": "abc"}` {
		t.Errorf("decoded event changed with its input: %+v", evs[0])
	}
}

func FuzzDecodeEvents(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(eventWireDir, "event-*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		body, _ := eventFixture(f, filepath.Base(file))
		f.Add(body)
	}
	for _, s := range []string{
		`[]`, `{}`, `[1, {"a": null}]`, `{"type": "\u00e9\ud800"}`, `{"loadavg": [1, [2]], "clock": 1e400}`,
		`{"eta": {"__type__": "datetime", "__value__": "x"}}`, `{"retries": -0.0, "pid": 9223372036854775808}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		events, err := DecodeEvents(body)
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		container := len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
		if want := json.Valid(body) && container; (err == nil) != want {
			t.Fatalf("DecodeEvents(%q): err = %v, but valid object/list = %v", body, err, want)
		}
		if err != nil {
			return
		}
		var elems []json.RawMessage
		if trimmed[0] == '{' {
			elems = []json.RawMessage{body}
		} else if err := json.Unmarshal(body, &elems); err != nil {
			t.Fatal(err)
		}
		var objs []json.RawMessage
		for _, el := range elems {
			if el = bytes.TrimSpace(el); el[0] == '{' {
				objs = append(objs, el)
			}
		}
		if len(objs) != len(events) {
			t.Fatalf("%d objects, %d events", len(objs), len(events))
		}
		for i, obj := range objs {
			compareWithEncodingJSON(t, obj, &events[i])
		}
	})
}

// compareWithEncodingJSON checks a decoded event against encoding/json's
// reading of the same object.
func compareWithEncodingJSON(t *testing.T, obj []byte, e *Event) {
	t.Helper()
	var ref map[string]json.RawMessage
	if err := json.Unmarshal(obj, &ref); err != nil {
		t.Fatal(err)
	}
	// Raw is the object as sent, or as plainJSON rewrites it when it holds
	// kombu typed values or reprs of them.
	var compact1, compact2, compact3 bytes.Buffer
	_ = json.Compact(&compact1, obj)
	_ = json.Compact(&compact2, e.Raw)
	if plain, err := plainJSON(obj, plainReprField); err == nil {
		_ = json.Compact(&compact3, plain)
	}
	if compact1.String() != compact2.String() && compact3.String() != compact2.String() {
		t.Errorf("Raw = %s, want %s or %s", e.Raw, obj, compact3.String())
	}
	for key, got := range map[string]string{"type": e.Type, "hostname": e.Hostname, "uuid": e.UUID, "name": e.Name, "traceback": e.Traceback} {
		f := eventFieldOf([]byte(key))
		raw, ok := ref[key]
		if !ok {
			if e.Has(f) {
				t.Errorf("%s: present but not in %s", key, obj)
			}
			continue
		}
		if string(raw) == "null" {
			if !e.Has(f) || e.HasValue(f) || got != "" {
				t.Errorf("%s: null in %s, got %q present=%v", key, obj, got, e.Has(f))
			}
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && (!e.HasValue(f) || s != got) {
			t.Errorf("%s = %q, want %q", key, got, s)
		}
	}
	if raw, ok := ref["timestamp"]; ok && string(raw) != "null" {
		var ts float64
		if json.Unmarshal(raw, &ts) == nil && (!e.HasValue(FieldTimestamp) || ts != e.Timestamp) {
			t.Errorf("timestamp = %v, want %v", e.Timestamp, ts)
		}
	}
	if raw, ok := ref["clock"]; ok && string(raw) != "null" {
		var c int64
		if json.Unmarshal(raw, &c) == nil && (!e.HasValue(FieldClock) || c != e.Clock) {
			t.Errorf("clock = %v, want %v", e.Clock, c)
		}
	}
	if raw, ok := ref["loadavg"]; ok {
		var l []float64
		if json.Unmarshal(raw, &l) == nil && string(raw) != "null" && !cmp.Equal(l, e.Loadavg, cmpopts.EquateEmpty()) {
			t.Errorf("loadavg = %v, want %v", e.Loadavg, l)
		}
	}
}

func FuzzDecodeEventEnvelope(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(eventWireDir, "event-*-redis.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		_, payload := eventFixture(f, filepath.Base(file))
		f.Add(payload)
	}
	// One decoder for every input: each starts on memory an earlier one left.
	var dec EventDecoder
	f.Fuzz(func(t *testing.T, payload []byte) {
		events, err := DecodeEventEnvelope(payload)
		reused, derr := dec.Decode(payload)
		if (err == nil) != (derr == nil) {
			t.Fatalf("DecodeEventEnvelope: %v, EventDecoder: %v", err, derr)
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(events, reused, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("(-DecodeEventEnvelope +EventDecoder):\n%s", diff)
		}
		// What was accepted must read the same with encoding/json (maps
		// keep exact keys and the last duplicate, as the eventScanner does).
		var env struct {
			Body       string          `json:"body"`
			Properties json.RawMessage `json:"properties"`
		}
		var top, props map[string]json.RawMessage
		if err := json.Unmarshal(payload, &top); err != nil {
			t.Fatalf("accepted invalid JSON: %v", err)
		}
		if err := json.Unmarshal(top["body"], &env.Body); err != nil {
			t.Fatalf("accepted a body that is not a string: %v", err)
		}
		_ = json.Unmarshal(top["properties"], &props)
		var encoding string
		_ = json.Unmarshal(props["body_encoding"], &encoding)
		body := []byte(env.Body)
		if encoding == "base64" {
			if body, err = base64.StdEncoding.DecodeString(env.Body); err != nil {
				t.Fatalf("accepted bad base64: %v", err)
			}
		}
		want, err := DecodeEvents(body)
		if err != nil {
			t.Fatalf("DecodeEvents rejects the body: %v", err)
		}
		if diff := cmp.Diff(want, events); diff != "" {
			t.Errorf("(-DecodeEvents +DecodeEventEnvelope):\n%s", diff)
		}
	})
}

// TestEventDecoder decodes the captures twice over with one decoder: each
// result is DecodeEventEnvelope's, and what the decoder does not reuse (the
// strings) outlives the calls after it.
func TestEventDecoder(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(eventWireDir, "event-*-redis.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dec EventDecoder
	var want, kept []Event
	for range 2 {
		for _, file := range files {
			_, payload := eventFixture(t, filepath.Base(file))
			fresh, err := DecodeEventEnvelope(payload)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dec.Decode(payload)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if diff := cmp.Diff(fresh, got); diff != "" {
				t.Errorf("%s (-DecodeEventEnvelope +EventDecoder):\n%s", file, diff)
			}
			want = append(want, fresh...)
			kept = append(kept, got...)
		}
	}
	if _, err := dec.Decode([]byte(`{"body": "[1]"}`)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, kept, cmpopts.IgnoreFields(Event{}, "Raw", "Signum")); diff != "" {
		t.Errorf("events changed by later calls (-want +got):\n%s", diff)
	}
}

func BenchmarkDecodeEvents(b *testing.B) {
	body, _ := eventFixture(b, "event-task-received-redis.json")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeEvents(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeEventEnvelope is the Redis hot path: one pub/sub message
// per event, as workers publish them.
func BenchmarkDecodeEventEnvelope(b *testing.B) {
	var payloads [][]byte
	for _, f := range []string{"event-task-received-redis.json", "event-task-started-redis.json",
		"event-task-succeeded-redis.json", "event-worker-heartbeat-redis.json"} {
		_, p := eventFixture(b, f)
		payloads = append(payloads, p)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := DecodeEventEnvelope(payloads[n%len(payloads)]); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDecodeTaskMulti decodes what BenchmarkIngest publishes: one
// task.multi message of a task's received, started and succeeded events.
func BenchmarkDecodeTaskMulti(b *testing.B) {
	payload := testcluster.SucceededTaskEnvelope("00000000-0000-4000-8000-000000000042", "bench.add", "bench@h", 42)
	b.Run("DecodeEventEnvelope", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeEventEnvelope(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EventDecoder", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		var dec EventDecoder
		for b.Loop() {
			if _, err := dec.Decode(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEventDecoderTrim decodes a huge message, then a small one after
// Trim: the decoder no longer holds the huge one's memory, and decodes as
// before.
func TestEventDecoderTrim(t *testing.T) {
	envelope := func(events ...map[string]any) []byte {
		t.Helper()
		body, err := json.Marshal(events)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := json.Marshal(NewEnvelope(body, nil, Properties{}))
		if err != nil {
			t.Fatal(err)
		}
		return payload
	}
	event := func(uuid, kwargs string) map[string]any {
		return map[string]any{"type": "task-received", "uuid": uuid, "hostname": "w@h", "timestamp": 1.5, "kwargs": kwargs}
	}
	var many []map[string]any
	for i := range 2 * decoderKeepsEvents {
		many = append(many, event(fmt.Sprint(i), "{}"))
	}
	var dec EventDecoder
	for _, huge := range [][]byte{envelope(event("a", strings.Repeat("x", 4*decoderKeepsBody))), envelope(many...)} {
		if _, err := dec.Decode(huge); err != nil {
			t.Fatal(err)
		}
		if cap(dec.body) <= decoderKeepsBody && cap(dec.events) <= decoderKeepsEvents {
			t.Fatalf("the huge message grew nothing: body %d, events %d", cap(dec.body), cap(dec.events))
		}
		dec.Trim()
		evs, err := dec.Decode(envelope(event("b", "{'k': 1}")))
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 || evs[0].UUID != "b" || evs[0].Kwargs != "{'k': 1}" {
			t.Errorf("after Trim: %+v", evs)
		}
		if cap(dec.body) > decoderKeepsBody || cap(dec.events) > decoderKeepsEvents {
			t.Errorf("after Trim and a small message the decoder keeps body %d, events %d", cap(dec.body), cap(dec.events))
		}
	}
}
