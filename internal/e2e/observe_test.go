package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

var eventLine = regexp.MustCompile(`^event: (.+)$`)

func observeCases() []suiteCase {
	return []suiteCase{
		{"an SSE client receives task-succeeded for its task", func(t *testing.T, c *cluster) {
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", c.api.base+"/api/events?type=task-*&taskname=stamen.echo", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			id := runTask(t, c, "stamen.echo", map[string]any{"args": []any{"sse"}})
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			var typ string
			var seen []string
			for sc.Scan() {
				line := sc.Text()
				if m := eventLine.FindStringSubmatch(line); m != nil {
					typ = m[1]
					continue
				}
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok {
					continue
				}
				var ev map[string]any
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Fatalf("data is not JSON: %s", data)
				}
				if !strings.HasPrefix(typ, "task-") || ev["type"] != typ {
					t.Errorf("event %q with data type %v passed the filter", typ, ev["type"])
				}
				if ev["uuid"] == id {
					seen = append(seen, typ)
					if typ == "task-succeeded" {
						return
					}
				}
			}
			t.Fatalf("stream ended (%v) before task-succeeded of %s; saw %v", sc.Err(), id, seen)
		}},
		{"metrics count the events sent", func(t *testing.T, c *cluster) {
			before := scrape(t, c)
			const n = 3
			var ids []string
			for i := range n {
				ids = append(ids, runTask(t, c, "stamen.add", map[string]any{"args": []any{i, 100}}))
			}
			for _, id := range ids {
				taskInfo(t, c, id, "SUCCESS")
			}
			for _, typ := range []string{"task-received", "task-started", "task-succeeded"} {
				labels := map[string]string{"task": "stamen.add", "type": typ}
				want := before.Sum("flower_events_total", labels) + n
				eventually(t, 10*time.Second, "flower_events_total for "+typ, func() bool {
					return scrape(t, c).Sum("flower_events_total", labels) == want
				})
			}
			after := scrape(t, c)
			for _, name := range []string{"flower_worker_online", "flower_task_runtime_seconds", "stamen_events_ingested_total", "stamen_http_request_duration_seconds"} {
				if after[name] == nil {
					t.Errorf("metrics lack %s", name)
				}
			}
			if after.Sum("flower_worker_online", map[string]string{"worker": c.w1.Name}) != 1 {
				t.Errorf("%s not online in metrics", c.w1.Name)
			}
		}},
	}
}
