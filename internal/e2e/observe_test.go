package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricValue sums the samples of a metric whose labels contain all of
// the given label pairs.
func metricValue(body, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

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
			scrape := func() string {
				r := c.api.get("/metrics", nil)
				if r.Status != 200 {
					t.Fatalf("metrics: %d", r.Status)
				}
				return string(r.Body)
			}
			label := `task="stamen.add"`
			before := scrape()
			const n = 3
			var ids []string
			for i := range n {
				ids = append(ids, runTask(t, c, "stamen.add", map[string]any{"args": []any{i, 100}}))
			}
			for _, id := range ids {
				taskInfo(t, c, id, "SUCCESS")
			}
			for _, typ := range []string{"task-received", "task-started", "task-succeeded"} {
				want := metricValue(before, "flower_events_total", label, fmt.Sprintf("type=%q", typ)) + n
				eventually(t, 10*time.Second, "flower_events_total for "+typ, func() bool {
					return metricValue(scrape(), "flower_events_total", label, fmt.Sprintf("type=%q", typ)) == want
				})
			}
			after := scrape()
			for _, name := range []string{"flower_worker_online", "flower_task_runtime_seconds_count", "stamen_events_ingested_total", "stamen_http_request_duration_seconds_count"} {
				if !strings.Contains(after, name) {
					t.Errorf("metrics lack %s", name)
				}
			}
			if metricValue(after, "flower_worker_online", fmt.Sprintf("worker=%q", c.w1.Name)) != 1 {
				t.Errorf("%s not online in metrics", c.w1.Name)
			}
		}},
	}
}
