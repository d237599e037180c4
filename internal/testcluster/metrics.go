package testcluster

import (
	"io"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is a parsed /metrics body (Prometheus's text exposition), by
// metric family name.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics parses a /metrics body with Prometheus's own parser,
// failing t when it is not a valid exposition: the tests read metrics
// the way a scraper does, not by matching lines.
func ParseMetrics(t testing.TB, body io.Reader) Metrics {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// Sum adds up the series of family name whose labels include every pair
// in labels: a counter's or a gauge's value, a histogram's or a summary's
// sample count. It is 0 when no series matches.
func (m Metrics) Sum(name string, labels map[string]string) float64 {
	var sum float64
	for _, s := range m[name].GetMetric() {
		if !hasLabels(s, labels) {
			continue
		}
		switch {
		case s.Counter != nil:
			sum += s.GetCounter().GetValue()
		case s.Gauge != nil:
			sum += s.GetGauge().GetValue()
		case s.Histogram != nil:
			sum += float64(s.GetHistogram().GetSampleCount())
		case s.Summary != nil:
			sum += float64(s.GetSummary().GetSampleCount())
		case s.Untyped != nil:
			sum += s.GetUntyped().GetValue()
		}
	}
	return sum
}

func hasLabels(s *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range s.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(want)
}
