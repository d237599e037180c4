package ui_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestDashboardRabbitMQ: the pages show a RabbitMQ cluster's worker, tasks
// (live) and queues, and pool grow reaches the worker.
func TestDashboardRabbitMQ(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireRabbitMQ(t)
	testcluster.RequireChromium(t)
	broker := testcluster.AMQPURL(testcluster.Vhost)
	_, srv := startStamen(t, app.Config{BrokerURL: broker})
	base := srv.URL
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "dash-amqp", Broker: broker})
	b := newBrowser(t, 3*time.Minute, base, base)

	b.open("/")
	b.wait("the worker online", textOf(sel("data-worker", w.Name, "[data-status]"))+` === "Online"`, 20*time.Second)

	b.open("/tasks")
	b.wait("the live stream", `(document.querySelector("span.live") || {}).textContent === "Live" && document.querySelector("table[aria-label=Tasks]")`, 15*time.Second)
	id := send(t, base, "stamen.add", map[string]any{"args": []any{2, 3}})
	b.wait("the new task, succeeded, without a reload", sel("data-task", id)+` && `+sel("data-task", id)+`.dataset.state === "SUCCESS"`, 10*time.Second)

	b.open("/task/" + id)
	b.wait("the task's args", textOf(`document.querySelector("pre[data-field=args]")`)+` === "(2, 3)"`, 10*time.Second)
	if got := eval[string](b, textOf(`document.querySelector("pre[data-field=result]")`)); got != "5" {
		t.Errorf("result shown %q, want 5", got)
	}

	b.open("/queues")
	b.wait("the celery queue", sel("data-queue", "celery", "[data-messages]"), 15*time.Second)
	if got := eval[string](b, textOf(sel("data-queue", "celery", "td:nth-child(3)"))); !strings.Contains(got, w.Name) {
		t.Errorf("consumers of celery shown %q, want %s", got, w.Name)
	}

	b.open("/worker/" + w.Name)
	b.wait("the pool size", textOf(`document.querySelector("[data-pool-size]")`)+` === "1"`, 15*time.Second)
	b.click("[data-action=grow]")
	b.answer()
	testcluster.Eventually(t, 15*time.Second, "the worker's pool grows to 2", func() bool { return poolSize(t, base, w.Name) == 2 })
	b.safe("RabbitMQ pages")
	if got := b.foreignRequests(); len(got) > 0 {
		t.Errorf("asked other hosts: %q", got)
	}
}
