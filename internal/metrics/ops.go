package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxQueues bounds the queues stamen_queue_length labels: queue names are
// whatever workers consume and clients publish to.
const MaxQueues = 200

// MaxExceptions bounds the exception types stamen_task_failures_total
// labels; further types count under OtherException.
const MaxExceptions = 50

// OtherException is the exception label of the types beyond MaxExceptions,
// and of an exception whose type cannot be read.
const OtherException = "other"

type opsMetrics struct {
	queueLength *prometheus.GaugeVec
	failures    *prometheus.CounterVec
	// queues and exceptions are the labels that have series; m.mu guards
	// them.
	queues     map[string]struct{}
	exceptions map[string]prometheus.Counter
}

func newOpsMetrics() opsMetrics {
	return opsMetrics{
		queueLength: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stamen_queue_length",
			Help: "Messages waiting in a queue (the queues workers consume and stamen published to), refreshed periodically.",
		}, []string{"queue"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stamen_task_failures_total",
			Help: "Failed tasks (task-failed events) by exception type; types beyond the first " +
				"50 count as \"other\".",
		}, []string{"exception"}),
		queues:     map[string]struct{}{},
		exceptions: map[string]prometheus.Counter{},
	}
}

// SetQueueLengths replaces the queue-length gauge's series with lengths:
// queues no longer listed leave the scrape, and at most MaxQueues (the
// first in name order) are kept.
func (m *Metrics) SetQueueLengths(lengths map[string]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for q := range m.ops.queues {
		if _, ok := lengths[q]; !ok {
			m.ops.queueLength.DeleteLabelValues(q)
			delete(m.ops.queues, q)
		}
	}
	for q, n := range lengths {
		if _, ok := m.ops.queues[q]; !ok {
			if len(m.ops.queues) >= MaxQueues {
				continue
			}
			m.ops.queues[q] = struct{}{}
		}
		m.ops.queueLength.WithLabelValues(q).Set(float64(n))
	}
}

// ExceptionType is the class name in an exception's repr as Celery sends
// it: "ValueError('x')" is ValueError, "mymod.Boom()" is mymod.Boom. A repr
// that does not start with a Python dotted name gives OtherException.
func ExceptionType(repr string) string {
	repr = strings.TrimSpace(repr)
	end := strings.IndexFunc(repr, func(r rune) bool {
		return !(r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	if end < 0 {
		end = len(repr)
	}
	name := repr[:end]
	if name == "" || name[0] >= '0' && name[0] <= '9' || name[0] == '.' || len(name) > 200 {
		return OtherException
	}
	return name
}

// failed counts one task-failed event; m.mu is held.
func (m *Metrics) failed(exception string) {
	t := ExceptionType(exception)
	c, ok := m.ops.exceptions[t]
	if !ok {
		if len(m.ops.exceptions) >= MaxExceptions {
			t = OtherException
			c, ok = m.ops.exceptions[t]
		}
		if !ok {
			c = m.ops.failures.WithLabelValues(t)
			m.ops.exceptions[t] = c
		}
	}
	c.Inc()
}
