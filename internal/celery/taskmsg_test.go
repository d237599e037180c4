package celery

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/stamen-dev/stamen/internal/pyfmt"
)

const wireDir = "../../testdata/celery-wire"

// readWire returns a capture from testdata/celery-wire.
func readWire(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(wireDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// wireFiles lists the captures matching pattern.
func wireFiles(t testing.TB, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(wireDir, pattern))
	if err != nil || len(m) == 0 {
		t.Fatalf("no capture matches %s (%v)", pattern, err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// generic decodes JSON into maps and slices, numbers as json.Number, so that
// two documents compare equal when they mean the same.
func generic(t testing.TB, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %.80s: %v", data, err)
	}
	return v
}

func genericOf(t testing.TB, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return generic(t, data)
}

func parseISO(t *testing.T, v any) *time.Time {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		return nil
	}
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return &tm
}

// TestRedisEnvelopeMatchesCelery rebuilds every captured Celery task message
// from its meaning and checks that stamen's envelope has the same shape and
// values (the delivery tag aside, which must be a fresh UUID).
func TestRedisEnvelopeMatchesCelery(t *testing.T) {
	for _, name := range []string{
		"task-message-redis.json",
		"task-message-eta-expires-redis.json",
		"task-message-priority5-redis.json",
		"task-message-unicode-kwargs-redis.json",
		"task-message-lrange-redis.json",
	} {
		t.Run(name, func(t *testing.T) {
			raw := readWire(t, name)
			want, err := DecodeEnvelope(raw)
			if err != nil {
				t.Fatal(err)
			}
			body, err := want.BodyBytes()
			if err != nil {
				t.Fatal(err)
			}
			var parts []json.RawMessage
			if err := json.Unmarshal(body, &parts); err != nil || len(parts) != 3 {
				t.Fatalf("body %s: %v", body, err)
			}
			var args []any
			var kwargs map[string]any
			dec := json.NewDecoder(bytes.NewReader(parts[0]))
			dec.UseNumber()
			if err := dec.Decode(&args); err != nil {
				t.Fatal(err)
			}
			dec = json.NewDecoder(bytes.NewReader(parts[1]))
			dec.UseNumber()
			if err := dec.Decode(&kwargs); err != nil {
				t.Fatal(err)
			}
			h := want.Headers
			msg := &TaskMessage{
				ID:       h["id"].(string),
				Name:     h["task"].(string),
				Args:     args,
				Kwargs:   kwargs,
				Queue:    want.Properties.DeliveryInfo.RoutingKey,
				Priority: want.Properties.Priority,
				ETA:      parseISO(t, h["eta"]),
				Expires:  parseISO(t, h["expires"]),
				ReplyTo:  want.Properties.ReplyTo,
				Origin:   h["origin"].(string),
			}
			now := time.Now()
			if msg.Expires != nil {
				ms, _ := time.ParseDuration(want.Properties.Expiration + "ms")
				now = msg.Expires.Add(-ms)
			}
			got, err := msg.redisEnvelopeAt(now)
			if err != nil {
				t.Fatal(err)
			}
			gotRaw, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := uuid.Parse(got.Properties.DeliveryTag); err != nil {
				t.Errorf("delivery_tag %q is not a UUID: %v", got.Properties.DeliveryTag, err)
			}

			// Same envelope, compared as generic JSON so that key sets and
			// value types count; the body is compared decoded (Python puts
			// spaces after separators).
			strip := func(v any) any {
				m := v.(map[string]any)
				delete(m["properties"].(map[string]any), "delivery_tag")
				delete(m, "body")
				return m
			}
			if diff := cmp.Diff(strip(generic(t, raw)), strip(generic(t, gotRaw))); diff != "" {
				t.Errorf("envelope (-celery +stamen):\n%s", diff)
			}
			gotBody, err := got.BodyBytes()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(generic(t, body), generic(t, gotBody)); diff != "" {
				t.Errorf("body (-celery +stamen):\n%s", diff)
			}
		})
	}
}

// TestTaskMessageKeys checks that each capture went to the key RedisQueueKey
// computes, as index-redis.json records it.
func TestTaskMessageKeys(t *testing.T) {
	var index map[string]json.RawMessage
	if err := json.Unmarshal(readWire(t, "index-redis.json"), &index); err != nil {
		t.Fatal(err)
	}
	for _, name := range wireFiles(t, "task-message-*-redis.json") {
		var entry struct {
			Command string `json:"command"`
			Key     string `json:"key"`
		}
		if err := json.Unmarshal(index[name], &entry); err != nil {
			t.Fatal(err)
		}
		env, err := DecodeEnvelope(readWire(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if entry.Command != "LPUSH" {
			continue
		}
		got := (RedisKeys{}).Queue(env.Properties.DeliveryInfo.RoutingKey, env.Properties.Priority)
		if got != entry.Key {
			t.Errorf("%s: RedisQueueKey = %q, Celery pushed to %q", name, got, entry.Key)
		}
	}
}

func TestRedisQueueKey(t *testing.T) {
	tests := []struct {
		queue    string
		priority int
		want     string
	}{
		{"celery", -1, "celery"},
		{"celery", 0, "celery"},
		{"celery", 2, "celery"},
		{"celery", 3, "celery\x06\x163"},
		{"celery", 5, "celery\x06\x163"},
		{"celery", 6, "celery\x06\x166"},
		{"celery", 8, "celery\x06\x166"},
		{"celery", 9, "celery\x06\x169"},
		{"celery", 200, "celery\x06\x169"},
		{"q.x", 4, "q.x\x06\x163"},
	}
	for _, tt := range tests {
		if got := (RedisKeys{}).Queue(tt.queue, tt.priority); got != tt.want {
			t.Errorf("RedisKeys{}.Queue(%q, %d) = %q, want %q", tt.queue, tt.priority, got, tt.want)
		}
	}
	want := []string{"q", "q\x06\x163", "q\x06\x166", "q\x06\x169"}
	if diff := cmp.Diff(want, RedisKeys{}.Queues("q")); diff != "" {
		t.Errorf("RedisQueueKeys (-want +got):\n%s", diff)
	}
}

func TestQueueName(t *testing.T) {
	tests := []struct {
		msg  TaskMessage
		want string
	}{
		{TaskMessage{}, "celery"},
		{TaskMessage{Queue: "hipri"}, "hipri"},
		{TaskMessage{RoutingKey: "rk"}, "celery"},
	}
	for _, tt := range tests {
		if got := QueueName(&tt.msg); got != tt.want {
			t.Errorf("QueueName(%+v) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}

func TestBody(t *testing.T) {
	tests := []struct {
		name string
		msg  TaskMessage
		want string
	}{
		{"no arguments", TaskMessage{ID: "i"},
			`[[],{},{"callbacks":null,"chain":null,"chord":null,"errbacks":null}]`},
		{"args and kwargs", TaskMessage{ID: "i", Args: []any{2.0, "a<b"}, Kwargs: map[string]any{"k": []any{true}}},
			`[[2,"a<b"],{"k":[true]},{"callbacks":null,"chain":null,"chord":null,"errbacks":null}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.msg.Body()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Body() = %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := (&TaskMessage{ID: "i", Args: []any{make(chan int)}}).Body(); err == nil {
		t.Error("Body() of an unserializable argument succeeded")
	}
}

func TestHeaders(t *testing.T) {
	hard, soft := 10.0, 5.5
	eta := time.Date(2026, 11, 22, 18, 33, 20, 287239812, time.FixedZone("CET", 3600))
	msg := TaskMessage{
		ID: "id-1", Name: "tasks.add", Args: []any{1.0}, Kwargs: map[string]any{"b": "x", "a": nil},
		Shadow: "alias", ETA: &eta, TimeLimit: &hard, SoftTimeLimit: &soft, IgnoreResult: true,
		Origin:  "stamen@host",
		Headers: map[string]any{"x-trace": "abc", "task": "evil.override", "retries": 7},
	}
	want := map[string]any{
		"lang": "py", "task": "tasks.add", "id": "id-1", "shadow": "alias",
		"eta": "2026-11-22T17:33:20.287239+00:00", "expires": nil,
		"group": nil, "group_index": nil, "retries": 0, "timelimit": []any{10.0, 5.5},
		"root_id": "id-1", "parent_id": nil, "argsrepr": "(1,)", "kwargsrepr": "{'a': None, 'b': 'x'}",
		"origin": "stamen@host", "ignore_result": true, "x-trace": "abc",
	}
	if diff := cmp.Diff(want, msg.ProtocolHeaders()); diff != "" {
		t.Errorf("ProtocolHeaders() (-want +got):\n%s", diff)
	}
}

func TestHeadersCapReprs(t *testing.T) {
	msg := TaskMessage{ID: "i", Name: "t", Args: []any{strings.Repeat("x", 5000)}}
	got := msg.ProtocolHeaders()["argsrepr"].(string)
	if len(got) != pyfmt.ReprMaxLen || !strings.HasSuffix(got, "...") || !strings.HasPrefix(got, "('xxx") {
		t.Errorf("argsrepr of a long argument: %d chars, %.10s...%s", len(got), got, got[len(got)-5:])
	}
}

func TestRedisEnvelope(t *testing.T) {
	exp := time.Now().Add(time.Minute)
	msg := &TaskMessage{ID: "id", Name: "t", Priority: 42, Expires: &exp}
	a, err := msg.RedisEnvelope()
	if err != nil {
		t.Fatal(err)
	}
	b, err := msg.RedisEnvelope()
	if err != nil {
		t.Fatal(err)
	}
	if a.Properties.DeliveryTag == b.Properties.DeliveryTag {
		t.Error("two envelopes share a delivery tag")
	}
	wantProps := Properties{
		CorrelationID: "id", DeliveryMode: 2, DeliveryInfo: DeliveryInfo{RoutingKey: "celery"},
		// As given, as kombu keeps it: only the sub-queue is capped at 9.
		Priority: 42, BodyEncoding: "base64",
	}
	if diff := cmp.Diff(wantProps, a.Properties, cmpopts.IgnoreFields(Properties{}, "DeliveryTag", "Expiration")); diff != "" {
		t.Errorf("properties (-want +got):\n%s", diff)
	}
	if ms, err := time.ParseDuration(a.Properties.Expiration + "ms"); err != nil || ms < 59*time.Second || ms > time.Minute {
		t.Errorf("expiration = %q, want about 60000", a.Properties.Expiration)
	}
	past := time.Now().Add(-time.Hour)
	msg.Expires = &past
	if env, _ := msg.RedisEnvelope(); env.Properties.Expiration != "0" {
		t.Errorf("expiration of an expired message = %q, want 0", env.Properties.Expiration)
	}

	for _, bad := range []TaskMessage{{Name: "t"}, {ID: "i"}} {
		if _, err := bad.RedisEnvelope(); err == nil {
			t.Errorf("RedisEnvelope(%+v) succeeded", bad)
		}
	}
}

// TestEnvelopeKeysStable guards the top-level layout workers index into.
func TestEnvelopeKeysStable(t *testing.T) {
	env, err := (&TaskMessage{ID: "i", Name: "t"}).RedisEnvelope()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	data, _ := json.Marshal(env)
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"body", "content-encoding", "content-type", "headers", "properties"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("envelope keys (-want +got):\n%s", diff)
	}
}

func TestRoute(t *testing.T) {
	tests := []struct {
		queue, exchange, routingKey string
		wantExchange, wantKey       string
	}{
		{"", "", "", "", "celery"},
		{"q", "", "", "", "q"},
		{"", "media", "", "media", "celery"},
		{"q", "media", "", "media", "q"},
		{"", "media", "video", "media", "video"},
		{"", "", "video", "celery", "video"},
		{"q", "", "video", "q", "video"},
	}
	for _, tt := range tests {
		ex, rk := Route(&TaskMessage{Queue: tt.queue, Exchange: tt.exchange, RoutingKey: tt.routingKey})
		if ex != tt.wantExchange || rk != tt.wantKey {
			t.Errorf("Route(queue %q, exchange %q, key %q) = %q, %q; want %q, %q",
				tt.queue, tt.exchange, tt.routingKey, ex, rk, tt.wantExchange, tt.wantKey)
		}
	}
	env, err := (&TaskMessage{ID: "i", Name: "t", Exchange: "media", RoutingKey: "video"}).RedisEnvelope()
	if err != nil {
		t.Fatal(err)
	}
	if want := (DeliveryInfo{Exchange: "media", RoutingKey: "video"}); env.Properties.DeliveryInfo != want {
		t.Errorf("delivery_info %+v, want %+v", env.Properties.DeliveryInfo, want)
	}
}

func TestRedisBoundQueues(t *testing.T) {
	// Members as kombu's Redis transport writes them on queue_bind.
	members := []string{
		"video" + PrioritySep + "" + PrioritySep + "hq",
		"video" + PrioritySep + "" + PrioritySep + "archive",
		"audio" + PrioritySep + "" + PrioritySep + "aq",
		"video" + PrioritySep + "" + PrioritySep + "hq",
		"malformed",
	}
	if got, want := (RedisKeys{}).BoundQueues(members, "video"), []string{"archive", "hq"}; !cmp.Equal(got, want) {
		t.Errorf("video: %v, want %v", got, want)
	}
	if got := (RedisKeys{}).BoundQueues(members, "none"); len(got) != 0 {
		t.Errorf("none: %v, want no queue", got)
	}
}
