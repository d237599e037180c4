package ui_test

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// benchHook records, in every document, when the tasks table shows its
// first row (ms since navigation began) and every long main-thread task.
const benchHook = `window.__firstRow = 0;
new MutationObserver((_, o) => { if (document.querySelector("tr[data-task]")) { window.__firstRow = performance.now(); o.disconnect(); } })
	.observe(document, {subtree: true, childList: true});
window.__long = [];
try { new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push(e.duration); }).observe({type: "longtask", buffered: true}); } catch (e) {}`

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkDashboard measures the dashboard in Chromium against a stamen
// holding STAMEN_BENCH_UI_TASKS tasks (default 1,000,000) in memory: the
// time from navigation to the tasks table's first rows, over 20 loads; then,
// with 1,000 events a second arriving for STAMEN_BENCH_UI_SECONDS (default
// 600), the longest main-thread task and the JavaScript heap. It prints
// the figures as "ui_<name> <value>" lines for scripts/bench-ui.sh.
func BenchmarkDashboard(b *testing.B) {
	testcluster.Require(b)
	testcluster.RequireChromium(b)
	tasks := envInt("STAMEN_BENCH_UI_TASKS", 1000000)
	seconds := envInt("STAMEN_BENCH_UI_SECONDS", 600)
	const db = 11
	testcluster.FlushRedisDB(b, db)
	a, err := app.New(context.Background(), app.Config{BrokerURL: testcluster.RedisURL(db), MaxTasks: tasks + seconds*400 + 1000})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Close)
	hs := httptest.NewServer(a.Handler)
	b.Cleanup(hs.Close) // after the browser's cleanup, which closes its streams
	srv := hs.URL
	rdb := redis.NewClient(&redis.Options{Addr: testcluster.RedisAddr(), DB: db})
	defer rdb.Close()
	channel := fmt.Sprintf("/%d.celeryev/task.multi", db)
	start := float64(time.Now().Add(-time.Hour).UnixMicro()) / 1e6
	env := func(i int) []byte {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		return testcluster.TaskEnvelope(id, "bench.add", "bench@h", i, start+float64(i)*0.001, i%50 == 0)
	}
	testcluster.PublishUntil(b, rdb, channel, env(0), func() bool { return a.State.Len() > 0 })
	t0 := time.Now()
	ctx := context.Background()
	for i := 1; i < tasks; {
		pipe := rdb.Pipeline()
		for j := 0; j < 1000 && i < tasks; j, i = j+1, i+1 {
			pipe.Publish(ctx, channel, env(i))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		// Stay near what stamen has ingested: Redis drops a subscriber
		// that falls too far behind.
		for deadline := time.Now().Add(60 * time.Second); i-a.State.Len() > 20000; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("stamen holds %d of %d tasks", a.State.Len(), i)
			}
		}
	}
	for deadline := time.Now().Add(60 * time.Second); a.State.Len() < tasks; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("stamen holds %d of %d tasks", a.State.Len(), tasks)
		}
	}
	fmt.Printf("ui_tasks %d\nui_ingest_s %.1f\n", a.State.Len(), time.Since(t0).Seconds())

	br := newBrowser(b, time.Duration(seconds)*time.Second+10*time.Minute, srv, srv)
	bctx := br.ctx
	if _, err := chromedp.Call(bctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: benchHook}); err != nil {
		b.Fatal(err)
	}
	evalB := func(expr string) float64 {
		v, err := chromedp.Run(bctx, chromedp.Evaluate[float64](expr))
		if err != nil {
			b.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	waitB := func(expr string, within time.Duration) {
		c, cancel := context.WithTimeout(bctx, within)
		defer cancel()
		if _, err := chromedp.Run(c, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
			b.Fatalf("waiting for %s: %v", expr, err)
		}
	}
	// The first load warms the browser's cache of the assets, as a
	// returning user's is.
	var loads []float64
	for i := 0; i < 21; i++ {
		if err := chromedp.Do(bctx, chromedp.Navigate(srv+"/tasks")); err != nil {
			b.Fatal(err)
		}
		waitB("window.__firstRow > 0", 30*time.Second)
		if i > 0 {
			loads = append(loads, evalB("window.__firstRow"))
		}
	}
	slices.Sort(loads)
	p95 := loads[int(math.Ceil(0.95*float64(len(loads))))-1]
	fmt.Printf("ui_first_rows_p50_ms %.0f\nui_first_rows_p95_ms %.0f\nui_first_rows_max_ms %.0f\n", loads[len(loads)/2], p95, loads[len(loads)-1])
	b.ReportMetric(p95, "first-rows-p95-ms")

	// 1,000 events a second: 333 tasks of 3 events, sent every 100 ms.
	evalB("(window.__long = [], 0)")
	if evalB(`PerformanceObserver.supportedEntryTypes.includes("longtask") ? 1 : 0`) != 1 {
		b.Fatal("this Chromium does not report long tasks")
	}
	heap := func() float64 {
		_, _ = chromedp.Call(bctx, heapprofiler.CollectGarbage, cdp.Empty{})
		r, err := chromedp.Call(bctx, runtime.GetHeapUsage, cdp.Empty{})
		if err != nil {
			b.Fatal(err)
		}
		return r.UsedSize / (1 << 20)
	}
	heap0 := heap()
	next := tasks
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(time.Duration(seconds) * time.Second)
	maxHeap := heap0
	lastSample := time.Now()
	for now := range tick.C {
		if now.After(end) {
			break
		}
		pipe := rdb.Pipeline()
		for j := 0; j < 33; j++ {
			pipe.Publish(ctx, channel, testcluster.TaskEnvelope(fmt.Sprintf("%08x-0000-4000-8000-%012x", next, next), "bench.add", "bench@h", next,
				float64(time.Now().UnixMicro())/1e6, next%50 == 0))
			next++
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		if time.Since(lastSample) > 30*time.Second {
			maxHeap = max(maxHeap, heap())
			lastSample = time.Now()
		}
	}
	// Still live: the newest task shows.
	last := fmt.Sprintf("%08x-0000-4000-8000-%012x", next-1, next-1)
	waitB(`document.querySelector('[data-task="`+last+`"]')`, 5*time.Second)
	long := evalB("Math.max(0, ...window.__long)")
	count := evalB("window.__long.filter(d => d > 50).length")
	heapEnd := heap()
	fmt.Printf("ui_events_s %d\nui_event_rate %d\nui_long_task_max_ms %.0f\nui_long_tasks_over_50ms %.0f\nui_heap_start_mb %.1f\nui_heap_end_mb %.1f\nui_heap_max_mb %.1f\n",
		seconds, 1000, long, count, heap0, heapEnd, max(maxHeap, heapEnd))
	b.ReportMetric(long, "longest-task-ms")
	b.ReportMetric(heapEnd, "heap-MB")
}
