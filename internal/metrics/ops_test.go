package metrics

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestExceptionType(t *testing.T) {
	for _, tc := range []struct{ repr, want string }{
		{"ValueError('x')", "ValueError"},
		{"ValueError()", "ValueError"},
		{"mymod.errors.Boom(1, 2)", "mymod.errors.Boom"},
		{"  KeyError('k')", "KeyError"},
		{"SoftTimeLimitExceeded", "SoftTimeLimitExceeded"},
		{"", OtherException},
		{"('tuple',)", OtherException},
		{"9Lives()", OtherException},
		{"<unprintable>", OtherException},
	} {
		if got := ExceptionType(tc.repr); got != tc.want {
			t.Errorf("ExceptionType(%q) = %q, want %q", tc.repr, got, tc.want)
		}
	}
}

func TestFailuresCapExceptionTypes(t *testing.T) {
	m := New(nil)
	for i := range MaxExceptions + 20 {
		for range 2 {
			m.Observe(Event{Type: "task-failed", UUID: fmt.Sprint(i), Worker: "w", Exception: fmt.Sprintf("Error%d('x')", i)})
		}
	}
	body := scrape(t, m)
	series := strings.Count(body, "stamen_task_failures_total{")
	if series != MaxExceptions+1 {
		t.Errorf("%d failure series, want %d types plus other", series, MaxExceptions)
	}
	if !strings.Contains(body, `stamen_task_failures_total{exception="other"} 40`) {
		t.Errorf("the 20 extra types (2 failures each) are not counted as other:\n%s", body)
	}
	if !strings.Contains(body, `stamen_task_failures_total{exception="Error0"} 2`) {
		t.Errorf("Error0 not counted")
	}
}

func TestQueueLengthsReplaceAndBound(t *testing.T) {
	m := New(nil)
	lengths := map[string]int64{}
	for i := range MaxQueues + 10 {
		lengths[fmt.Sprintf("q%03d", i)] = int64(i)
	}
	m.SetQueueLengths(lengths)
	if n := strings.Count(scrape(t, m), "stamen_queue_length{"); n != MaxQueues {
		t.Errorf("%d queue series, want at most %d", n, MaxQueues)
	}
	m.SetQueueLengths(map[string]int64{"celery": 7})
	body := scrape(t, m)
	if n := strings.Count(body, "stamen_queue_length{"); n != 1 || !strings.Contains(body, `stamen_queue_length{queue="celery"} 7`) {
		t.Errorf("after a refresh with one queue:\n%s", body)
	}
}

// metricName finds stamen's and Flower's metric names in a PromQL
// expression.
var metricName = regexp.MustCompile(`\b(?:flower|stamen)_[a-z_]+\b`)

// TestExampleAlertsUseExportedMetrics parses examples/prometheus/alerts.yml
// (promtool is not part of the test tools) and checks that every metric it
// names is one stamen exports, as a scrape shows it once each kind of
// series exists.
func TestExampleAlertsUseExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../../examples/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
				For   string `yaml:"for"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	m := New(nil)
	m.Observe(Event{Type: "worker-online", Worker: "w"})
	m.Observe(Event{Type: "task-received", UUID: "1", Task: "t", Worker: "w"})
	m.Observe(Event{Type: "task-failed", UUID: "1", Task: "t", Worker: "w", Exception: "ValueError('x')"})
	m.SetQueueLengths(map[string]int64{"celery": 1})
	exported := map[string]bool{}
	for _, line := range strings.Split(scrape(t, m), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			exported[f[2]] = true
		}
	}
	alerts := 0
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			alerts++
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
				t.Errorf("group %s: a rule without alert or expr: %+v", g.Name, r)
			}
			names := metricName.FindAllString(r.Expr, -1)
			if len(names) == 0 {
				t.Errorf("%s: names no stamen metric: %s", r.Alert, r.Expr)
			}
			for _, n := range names {
				if !exported[n] {
					t.Errorf("%s: %s is not a metric stamen exports", r.Alert, n)
				}
			}
		}
	}
	if alerts < 3 {
		t.Errorf("%d alerts, want worker down, failure ratio and queue backlog", alerts)
	}
}
