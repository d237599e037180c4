package celery

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestEncodeControlRequestMatchesCelery rebuilds every captured pidbox
// request from its meaning and compares envelopes and bodies.
func TestEncodeControlRequestMatchesCelery(t *testing.T) {
	for _, name := range wireFiles(t, "pidbox-request-*-redis.json") {
		t.Run(name, func(t *testing.T) {
			raw := readWire(t, name)
			want, err := DecodeEnvelope(raw)
			if err != nil {
				t.Fatal(err)
			}
			wantBody, err := want.BodyBytes()
			if err != nil {
				t.Fatal(err)
			}
			var req struct {
				Method      string         `json:"method"`
				Arguments   map[string]any `json:"arguments"`
				Destination []string       `json:"destination"`
				Ticket      string         `json:"ticket"`
				ReplyTo     struct {
					RoutingKey string `json:"routing_key"`
				} `json:"reply_to"`
			}
			if err := json.Unmarshal(wantBody, &req); err != nil {
				t.Fatal(err)
			}
			cmd := ControlCommand{Method: req.Method, Arguments: req.Arguments, Destination: req.Destination, Reply: true}
			clock := int64(want.Headers["clock"].(float64))
			data, err := EncodeControlRequest(cmd, req.Ticket, req.ReplyTo.RoutingKey, clock)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeEnvelope(data)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := uuid.Parse(got.Properties.DeliveryTag); err != nil {
				t.Errorf("delivery_tag %q: %v", got.Properties.DeliveryTag, err)
			}
			strip := func(v any) any {
				m := v.(map[string]any)
				delete(m["properties"].(map[string]any), "delivery_tag")
				// expires is informational (now + timeout, or 0).
				delete(m["headers"].(map[string]any), "expires")
				delete(m, "body")
				return m
			}
			if diff := cmp.Diff(strip(generic(t, raw)), strip(generic(t, data))); diff != "" {
				t.Errorf("envelope (-celery +stamen):\n%s", diff)
			}
			if _, ok := got.Headers["expires"]; !ok {
				t.Error("no expires header")
			}
			gotBody, err := got.BodyBytes()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(generic(t, wantBody), generic(t, gotBody)); diff != "" {
				t.Errorf("body (-celery +stamen):\n%s", diff)
			}
		})
	}
}

func TestControlRequestBody(t *testing.T) {
	tests := []struct {
		name   string
		cmd    ControlCommand
		ticket string
		oid    string
		want   string
	}{
		{"cast to all", ControlCommand{Method: "enable_events"}, "", "",
			`{"method":"enable_events","arguments":{},"destination":null,"pattern":null,"matcher":null}`},
		{"cast ignores ticket", ControlCommand{Method: "shutdown", Destination: []string{"w1@h"}}, "t", "o",
			`{"method":"shutdown","arguments":{},"destination":["w1@h"],"pattern":null,"matcher":null}`},
		{"empty destination means all", ControlCommand{Method: "ping", Destination: []string{}, Reply: true}, "t", "o",
			`{"method":"ping","arguments":{},"destination":null,"pattern":null,"matcher":null,"ticket":"t","reply_to":{"exchange":"reply.celery.pidbox","routing_key":"o"}}`},
		{"arguments", ControlCommand{Method: "rate_limit", Arguments: map[string]any{"task_name": "a<b", "rate_limit": "1/s"}, Reply: true}, "t", "o",
			`{"method":"rate_limit","arguments":{"rate_limit":"1/s","task_name":"a<b"},"destination":null,"pattern":null,"matcher":null,"ticket":"t","reply_to":{"exchange":"reply.celery.pidbox","routing_key":"o"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ControlRequestBody(tt.cmd, tt.ticket, tt.oid)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	for _, bad := range []ControlCommand{{}, {Method: "ping", Reply: true}} {
		if _, err := EncodeControlRequest(bad, "", "", 1); err == nil {
			t.Errorf("EncodeControlRequest(%+v) succeeded", bad)
		}
	}
}

// TestDecodeControlReplyCaptures decodes every captured reply and checks it
// against the decoded body index-redis.json records.
func TestDecodeControlReplyCaptures(t *testing.T) {
	var index map[string]json.RawMessage
	if err := json.Unmarshal(readWire(t, "index-redis.json"), &index); err != nil {
		t.Fatal(err)
	}
	for _, name := range wireFiles(t, "pidbox-reply-*-redis.json") {
		env, err := DecodeEnvelope(readWire(t, name))
		if err != nil {
			t.Fatal(err)
		}
		body, err := env.BodyBytes()
		if err != nil {
			t.Fatal(err)
		}
		replies, err := DecodeControlReply(body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var entry struct {
			BodyDecoded map[string]json.RawMessage `json:"body_decoded"`
			ReplyKind   string                     `json:"reply_kind"`
		}
		if err := json.Unmarshal(index[name], &entry); err != nil {
			t.Fatal(err)
		}
		if len(replies) != 1 || len(entry.BodyDecoded) != 1 {
			t.Fatalf("%s: %d replies, index has %d", name, len(replies), len(entry.BodyDecoded))
		}
		want, ok := entry.BodyDecoded[replies[0].Hostname]
		if !ok {
			t.Fatalf("%s: hostname %q not in the index", name, replies[0].Hostname)
		}
		if diff := cmp.Diff(generic(t, want), generic(t, replies[0].Value)); diff != "" {
			t.Errorf("%s (-index +decoded):\n%s", name, diff)
		}
		ok2, isOK := replies[0].OK()
		if isOK != (entry.ReplyKind == "ok") {
			t.Errorf("%s: OK() = %q, %v; reply kind %s", name, ok2, isOK, entry.ReplyKind)
		}
		if _, isTicket := env.Headers["ticket"].(string); !isTicket {
			t.Errorf("%s: no ticket header", name)
		}
	}
}

func TestDecodeControlReply(t *testing.T) {
	tests := []struct {
		in      string
		want    []ControlReply
		wantErr bool
	}{
		{`{"w1@h": {"ok": "pong"}}`, []ControlReply{{"w1@h", json.RawMessage(`{"ok": "pong"}`)}}, false},
		{`{"w2@h": null, "w1@h": [1]}`, []ControlReply{{"w2@h", json.RawMessage(`null`)}, {"w1@h", json.RawMessage(`[1]`)}}, false},
		{`{}`, nil, false},
		{`[]`, nil, true},
		{`null`, nil, true},
		{`"x"`, nil, true},
		{`{"a": `, nil, true},
		{`{"a": 1} {}`, nil, true},
		{``, nil, true},
	}
	for _, tt := range tests {
		got, err := DecodeControlReply([]byte(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("DecodeControlReply(%s) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("DecodeControlReply(%s) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestControlReplyText(t *testing.T) {
	tests := []struct {
		value   string
		ok      string
		isOK    bool
		errText string
	}{
		{`{"ok": "pong"}`, "pong", true, "Unknown reason"},
		{`{"ok": {"n": 1}}`, `{"n": 1}`, true, "Unknown reason"},
		{`{"error": "KeyError('no_such_cmd')"}`, "", false, "KeyError('no_such_cmd')"},
		{`{"error": ""}`, "", false, "Unknown reason"},
		{`{"error": 3}`, "", false, "3"},
		{`null`, "", false, "Unknown reason"},
		{`["tasks.add"]`, "", false, "Unknown reason"},
		{``, "", false, "Unknown reason"},
	}
	for _, tt := range tests {
		r := ControlReply{Hostname: "w", Value: json.RawMessage(tt.value)}
		ok, isOK := r.OK()
		if ok != tt.ok || isOK != tt.isOK {
			t.Errorf("OK() of %s = %q, %v; want %q, %v", tt.value, ok, isOK, tt.ok, tt.isOK)
		}
		if got := r.ErrorText(); got != tt.errText {
			t.Errorf("ErrorText() of %s = %q, want %q", tt.value, got, tt.errText)
		}
	}
}

func FuzzDecodeControlReply(f *testing.F) {
	for _, name := range wireFiles(f, "pidbox-reply-*-redis.json") {
		env, err := DecodeEnvelope(readWire(f, name))
		if err != nil {
			f.Fatal(err)
		}
		body, err := env.BodyBytes()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	f.Add([]byte(`{"a": null, "b": {"error": "x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		replies, err := DecodeControlReply(data)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a document that decodes the same.
		var b strings.Builder
		b.WriteByte('{')
		for i, r := range replies {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(r.Hostname)
			b.Write(k)
			b.WriteByte(':')
			b.Write(r.Value)
			_, _ = r.OK()
			_ = r.ErrorText()
		}
		b.WriteByte('}')
		again, err := DecodeControlReply([]byte(b.String()))
		if err != nil {
			t.Fatalf("re-encoded %s: %v", b.String(), err)
		}
		if len(again) != len(replies) {
			t.Fatalf("re-decoded %d replies, want %d", len(again), len(replies))
		}
	})
}
