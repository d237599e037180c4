package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/redact"
)

func TestParamsMaskSecrets(t *testing.T) {
	body := []byte(`{"args": ["amqp://u:url-pw@h//", 1], "kwargs": {"api_key": "k-secret", "nested": {"password": "p-secret"}, "x": "plain"}}`)
	// password is a parameter the operation does not declare: masked too.
	p, _ := Params(map[string]string{"taskname": "t.a"}, url.Values{"password": {"q-secret"}, "queue": {"q1"}, "n": {"1", "2"}}, declares("queue", "n"), body)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, secret := range []string{"url-pw", "k-secret", "p-secret", "q-secret"} {
		if strings.Contains(s, secret) {
			t.Errorf("params show %q: %s", secret, s)
		}
	}
	for _, kept := range []string{`"taskname":"t.a"`, `"queue":"q1"`, `"x":"plain"`, `"n":["1","2"]`, "amqp://u:" + redact.Mask + "@h//"} {
		if !strings.Contains(s, kept) {
			t.Errorf("params lack %s: %s", kept, s)
		}
	}
	if p, _ := Params(nil, nil, nil, nil); p != nil {
		t.Error("no parameters should give nil")
	}
	if p, _ := Params(nil, nil, nil, []byte("redis://:pw@h not json")); strings.Contains(fmt.Sprint(p), "pw@") {
		t.Errorf("a non-JSON body keeps its URL password: %v", p)
	}
	// A JSON body cut short or mistyped does not decode: its secrets,
	// found by their keys only once decoded, must not be kept either.
	if p, _ := Params(nil, nil, nil, []byte(`{"kwargs": {"password": "p-secret"}`)); strings.Contains(fmt.Sprint(p), "p-secret") {
		t.Errorf("a body that is not valid JSON keeps its password: %v", p)
	}
}

func TestParamsAreBounded(t *testing.T) {
	big := strings.Repeat("é", 10000)
	// extra, undeclared, is over the bound of those even once cut.
	p, cut := Params(nil, url.Values{"q": {big}, "extra": {big}}, declares("q"), []byte(`{"args": ["`+big+`"], "kwargs": {"password": "`+big+`"}}`))
	if len(p) != 2 || cut != 1 {
		t.Errorf("kept %d parameters and cut %d, want q and body kept, extra cut", len(p), cut)
	}
	for k, v := range p {
		b, _ := json.Marshal(v)
		if len(b) > MaxParamBytes+100 {
			t.Errorf("%s kept %d bytes", k, len(b))
		}
		if s, ok := v.(string); !ok || !strings.HasSuffix(s, "bytes, cut)") {
			t.Errorf("%s not marked as cut: %.80v", k, v)
		}
	}
}

// TestParamsCountIsBounded: a query string may carry thousands of
// parameters within the header limit; a record keeps those the operation
// declares, the path's and the body, and at most MaxExtraParams others
// within MaxExtraParamBytes, in name order, and says how many it left out.
func TestParamsCountIsBounded(t *testing.T) {
	many := func(n int, value string) url.Values {
		q := url.Values{"terminate": {"true"}}
		for i := range n {
			q.Set(fmt.Sprintf("x%05d", i), value)
		}
		return q
	}
	for _, tc := range []struct {
		name      string
		path      map[string]string
		query     url.Values
		wantKeys  []string
		wantCut   int
		maxJSONKB int
	}{
		{"a few undeclared", map[string]string{"taskid": "t-1"}, many(3, "v"),
			[]string{"taskid", "terminate", "x00000", "x00001", "x00002"}, 0, 1},
		{"thousands undeclared", map[string]string{"taskid": "t-1"}, many(10000, "v"),
			append([]string{"taskid", "terminate"}, names("x%05d", MaxExtraParams)...), 10000 - MaxExtraParams, 1},
		{"undeclared over the byte bound", nil, many(5, strings.Repeat("v", 1500)),
			[]string{"terminate", "x00000", "x00001"}, 3, 4},
		{"an undeclared name the path has", map[string]string{"taskid": "t-1"}, url.Values{"taskid": {"other"}},
			[]string{"taskid"}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, cut := Params(tc.path, tc.query, declares("terminate"), nil)
			var keys []string
			for k := range p {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tc.wantKeys) || cut != tc.wantCut {
				t.Errorf("kept %v, cut %d; want %v, cut %d", keys, cut, tc.wantKeys, tc.wantCut)
			}
			if tc.path["taskid"] != "" && p["taskid"] != tc.path["taskid"] {
				t.Errorf("taskid = %v, want the path's %q", p["taskid"], tc.path["taskid"])
			}
			if b, _ := json.Marshal(p); len(b) > tc.maxJSONKB<<10+100 {
				t.Errorf("the parameters take %d bytes of JSON", len(b))
			}
		})
	}
}

func TestPathIsBounded(t *testing.T) {
	long := "/api/task/revoke/" + strings.Repeat("x", 60<<10)
	for _, tc := range []struct{ path, want string }{
		{"/api/task/revoke/t-1", "/api/task/revoke/t-1"},
		{"/api/x/redis://u:pw@h", "/api/x/redis://u:" + redact.Mask + "@h"},
		{long, long[:MaxPathBytes] + fmt.Sprintf("... (%d bytes, cut)", len(long))},
	} {
		if got := Path(tc.path); got != tc.want {
			t.Errorf("Path(%.40q...) = %.80q..., want %.80q...", tc.path, got, tc.want)
		}
	}
}

// declares is an operation declaring the query parameters names.
func declares(names ...string) func(string) bool {
	return func(n string) bool { return slices.Contains(names, n) }
}

// names formats format with 0..n-1.
func names(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

func must(p map[string]any, _ int) map[string]any { return p }

func TestCounter(t *testing.T) {
	SetCount(context.Background(), 3) // no counter: nothing happens
	ctx, count := WithCounter(context.Background())
	if count() != nil {
		t.Fatal("count set before SetCount")
	}
	SetCount(ctx, 42)
	if c := count(); c == nil || *c != 42 {
		t.Fatalf("count = %v, want 42", c)
	}
}

func TestMemoryIsBounded(t *testing.T) {
	m := &Memory{Max: 3}
	for i := range 5 {
		_ = m.Append(context.Background(), Record{Time: time.Unix(int64(i), 0), Status: i})
	}
	recs, _ := m.List(context.Background(), Query{})
	if len(recs) != 3 || recs[0].Status != 4 || recs[2].Status != 2 {
		t.Errorf("records %v, want the newest 3", recs)
	}
}

func TestLogRecordLogsOneLine(t *testing.T) {
	var buf bytes.Buffer
	n := int64(7)
	l := &Log{Store: &Memory{}, Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	l.Record(context.Background(), Record{
		Time: time.Now(), User: "alice", Role: "operator", Remote: "127.0.0.1:1", Operation: "purgeQueue",
		Method: "POST", Path: "/api/queues/purge/q", Status: 200, Count: &n,
		Params: must(Params(nil, url.Values{"force": {"true"}}, declares("force"), nil)),
	})
	out := buf.String()
	if strings.Count(out, "\n") != 1 {
		t.Errorf("want one line, got %q", out)
	}
	for _, want := range []string{"msg=audit", "user=alice", "operation=purgeQueue", "status=200", "count=7", `force`} {
		if !strings.Contains(out, want) {
			t.Errorf("log line lacks %s: %s", want, out)
		}
	}
	if recs, _ := l.List(context.Background(), Query{}); len(recs) != 1 || *recs[0].Count != 7 {
		t.Errorf("stored %v", recs)
	}
}
