package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// grafanaDB is the Redis database of TestGrafanaDashboardQueries.
const grafanaDB = 2

// dashboardQueries are the PromQL expressions of the dashboard's panels
// and template variables.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("grafana/stamen.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if q, ok := v.Query.(map[string]any); ok && v.Type == "query" {
			exprs = append(exprs, q["query"].(string))
		}
	}
	for _, want := range []string{"worker", "task", "queue"} {
		if !vars[want] {
			t.Errorf("the dashboard has no %q variable", want)
		}
	}
	return exprs
}

var (
	// metricRef is a metric name of stamen's or Flower's in an expression.
	metricRef = regexp.MustCompile(`\b((?:flower|stamen)_[a-z_]+)\b`)
	// selector is a metric with its label matchers.
	selector = regexp.MustCompile(`\b((?:flower|stamen)_[a-z_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-z_]+)\s*(?:=~|!~|!=|=)`)
	// grouping is "by (a, b)" after an aggregation over a metric, and
	// label_values(metric, label).
	grouping    = regexp.MustCompile(`by \(([a-z_, ]+)\)\s*\((?:rate|increase)?\(?((?:flower|stamen)_[a-z_]+)`)
	labelValues = regexp.MustCompile(`label_values\(((?:flower|stamen)_[a-z_]+),\s*([a-z_]+)\)`)
)

// TestGrafanaDashboardQueries: every metric the dashboard's queries name
// is on /metrics of a stamen that watched a real worker run tasks (one
// succeeded, one failed), with every label the queries filter or group
// on.
func TestGrafanaDashboardQueries(t *testing.T) {
	exprs := dashboardQueries(t)
	testcluster.RequireRedis(t)
	testcluster.FlushRedisDB(t, grafanaDB)
	broker := testcluster.RedisURL(grafanaDB)
	a, err := app.New(context.Background(), app.Config{BrokerURL: broker, ResultBackend: broker,
		DBPath: filepath.Join(t.TempDir(), "stamen.db"), QueueLengthInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close() })
	testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "grafana", Broker: broker})
	for _, task := range []string{"stamen.add", "stamen.fail"} {
		body := `{"args": [1, 2]}`
		if task == "stamen.fail" {
			body = `{"args": ["boom"]}`
		}
		resp, err := http.Post(srv.URL+"/api/task/async-apply/"+task, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("async-apply %s: %d", task, resp.StatusCode)
		}
	}

	// metric -> the label names its series carry.
	var have map[string]map[string]bool
	scrape := func() bool {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		have = map[string]map[string]bool{}
		for line := range strings.SplitSeq(string(b), "\n") {
			if line == "" || line[0] == '#' {
				continue
			}
			name, rest, _ := strings.Cut(line, "{")
			name, _, _ = strings.Cut(name, " ")
			if have[name] == nil {
				have[name] = map[string]bool{}
			}
			for _, m := range regexp.MustCompile(`([a-z_]+)="`).FindAllStringSubmatch(rest, -1) {
				have[name][m[1]] = true
			}
		}
		return missing(exprs, have) == ""
	}
	testcluster.Eventually(t, 30*time.Second, "every metric and label of the dashboard's queries on /metrics", scrape)
	if m := missing(exprs, have); m != "" {
		t.Fatal(m)
	}
}

// missing says what the expressions need that have lacks, or "".
func missing(exprs []string, have map[string]map[string]bool) string {
	var out []string
	need := func(metric, label string) {
		labels, ok := have[metric]
		if !ok {
			out = append(out, "metric "+metric)
		} else if label != "" && !labels[label] {
			out = append(out, fmt.Sprintf("label %s of %s", label, metric))
		}
	}
	for _, e := range exprs {
		for _, m := range metricRef.FindAllStringSubmatch(e, -1) {
			need(m[1], "")
		}
		for _, m := range selector.FindAllStringSubmatch(e, -1) {
			for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
				need(m[1], l[1])
			}
		}
		for _, m := range grouping.FindAllStringSubmatch(e, -1) {
			for l := range strings.SplitSeq(m[1], ",") {
				if l = strings.TrimSpace(l); l != "le" || strings.HasSuffix(m[2], "_bucket") {
					need(m[2], l)
				}
			}
		}
		for _, m := range labelValues.FindAllStringSubmatch(e, -1) {
			need(m[1], m[2])
		}
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), "; ")
}

// TestDashboardCheckerFindsGaps: the check above names a metric that is
// not scraped, and a label a query filters or groups on that its series
// lack.
func TestDashboardCheckerFindsGaps(t *testing.T) {
	have := map[string]map[string]bool{
		"flower_events_total":                {"worker": true, "type": true, "task": true},
		"flower_task_runtime_seconds_bucket": {"worker": true, "task": true, "le": true},
	}
	for expr, want := range map[string]string{
		`sum(flower_events_total{type="task-failed",worker=~"$worker"})`:                      "",
		`sum by (le, task) (rate(flower_task_runtime_seconds_bucket{worker=~"$worker"}[5m]))`: "",
		`sum(flower_events_total{queue=~"$queue"})`:                                           "label queue of flower_events_total",
		`sum by (exception) (rate(stamen_task_failures_total[5m]))`:                           "metric stamen_task_failures_total",
		`sum by (host) (rate(flower_events_total[5m]))`:                                       "label host of flower_events_total",
		`label_values(flower_events_total, queue)`:                                            "label queue of flower_events_total",
	} {
		if got := missing([]string{expr}, have); got != want && !strings.HasPrefix(got, want+";") && !(want != "" && strings.Contains(got, want)) {
			t.Errorf("missing(%s) = %q, want %q", expr, got, want)
		}
		if want == "" && missing([]string{expr}, have) != "" {
			t.Errorf("missing(%s) = %q, want nothing", expr, missing([]string{expr}, have))
		}
	}
}
