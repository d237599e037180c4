package ui_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestDashboardTabsShareTheStream opens eight tabs of the tasks page in one
// Chromium, over plain HTTP/1.1, where a browser opens at most six
// connections to a host: with a stream per tab the seventh would never
// load. The tabs share one /api/events stream, and a task sent afterwards
// appears live in every one of them.
func TestDashboardTabsShareTheStream(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)
	const db = 13
	testcluster.FlushRedisDB(t, db)
	broker := testcluster.RedisURL(db)
	a, srv := startStamen(t, app.Config{BrokerURL: broker})
	base := srv.URL
	testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "tabs", Broker: broker})
	b := newBrowser(t, 4*time.Minute, base, base)

	const n = 8
	tabs := []*browser{b}
	for range n - 1 {
		ctx, cancel := chromedp.NewContext(b.ctx)
		t.Cleanup(cancel)
		tabs = append(tabs, &browser{t: t, ctx: ctx, base: base, origins: []string{base}})
	}
	for i, tab := range tabs {
		tab.open("/tasks")
		tab.wait(fmt.Sprintf("tab %d live", i+1), `(document.querySelector("span.live") || {}).textContent === "Live" && document.querySelector("table[aria-label=Tasks]")`, 20*time.Second)
	}
	if got := a.Events.Subscribers(); got != 1 {
		t.Errorf("%d tabs hold %d event streams, want 1", n, got)
	}
	start := time.Now()
	id := send(t, base, "stamen.add", map[string]any{"args": []any{20, 22}})
	for i, tab := range tabs {
		tab.wait(fmt.Sprintf("the new task in tab %d", i+1), sel("data-task", id)+` && `+sel("data-task", id)+`.dataset.state === "SUCCESS"`, 15*time.Second)
	}
	t.Logf("task %s shown in all %d tabs %s after it was sent", id, n, time.Since(start))
	// A tab that leaves hands nothing over: the others still follow.
	if _, err := chromedp.Run(tabs[0].ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	id2 := send(t, base, "stamen.add", map[string]any{"args": []any{1, 1}})
	for i, tab := range tabs[1:] {
		tab.wait(fmt.Sprintf("the second task in tab %d", i+2), sel("data-task", id2), 15*time.Second)
	}
}
