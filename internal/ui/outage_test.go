package ui_test

import (
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestDashboardBrokerDown: with the broker unreachable, a page that needs
// it says so in place (the API's 503, readable), and the pages stamen
// serves from memory go on working.
func TestDashboardBrokerDown(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)
	const db = 12
	testcluster.FlushRedisDB(t, db)
	proxy := testcluster.StartProxy(t, testcluster.RedisAddr())
	_, srv := startStamen(t, app.Config{BrokerURL: "redis://" + proxy.Addr() + "/12", BrokerTimeout: 2 * time.Second})
	b := newBrowser(t, 2*time.Minute, srv.URL, srv.URL)
	b.open("/queues")
	b.wait("the queue", sel("data-queue", "celery", "[data-messages]"), 15*time.Second)
	proxy.Cut()
	b.click("main .toolbar button")
	b.wait("the broker's outage, in place", textOf(`document.querySelector("main .error")`)+`.includes("503")`, 20*time.Second)
	t.Logf("shown: %s", eval[string](b, textOf(`document.querySelector("main .error")`)))
	if !eval[bool](b, `!!document.querySelector("header nav") && !!document.querySelector("h1")`) {
		t.Error("the outage broke the page")
	}
	b.open("/tasks")
	b.wait("the tasks page", `document.querySelector("table[aria-label=Tasks]")`, 10*time.Second)
	if eval[bool](b, `!!document.querySelector("main .error")`) {
		t.Errorf("the tasks page, served from memory, shows an error: %s", eval[string](b, textOf(`document.querySelector("main .error")`)))
	}
	b.safe("outage")
}
