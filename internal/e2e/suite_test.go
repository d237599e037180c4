// Package e2e runs stamen against real Celery workers on real brokers: one
// table-driven suite, run once per broker (Redis, the embedded broker,
// RabbitMQ with rpc:// and RabbitMQ with a Redis result backend) and Celery
// release (suiteReleases).
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// cluster is one stamen and its workers on one broker.
type cluster struct {
	kind string
	app  *app.App
	api  *api
	// w1: prefork -c 2, no autoscaler, no pool restarts.
	// w2: --autoscale=4,2 with pool restarts.
	// w3: -c 1, killed by a test. w4: -c 1, shut down by a test.
	w1, w2, w3, w4 *testcluster.Worker
	// hasAbort is false on rpc://, which keeps no state a worker can read.
	hasAbort bool
	// amqp is set on RabbitMQ, whose queues outlive the suite and where a
	// higher priority number goes first.
	amqp bool
	// cfg starts another stamen on the same broker.
	cfg app.Config
	// celery is the workers' (and Python clients') Celery release.
	celery string
}

type brokerSetup struct {
	kind string
	// start returns stamen's config and the URLs the workers use.
	start    func(t *testing.T) (cfg app.Config, workerBroker, workerBackend string)
	hasAbort bool
	amqp     bool
}

// amqpVhost is where the RabbitMQ setups run: this test process's own
// (testcluster.Require creates it), so that two runs of the suite do not
// share queues, and the fixed queue names below cannot collide.
var amqpVhost = testcluster.Vhost

// suiteQueues are the durable queues a suite's workers declare on
// RabbitMQ: the default one and those the cases add consumers for.
func suiteQueues(kind string) []string {
	return []string{"celery", "only-w1-" + kind, "prio-" + kind, "extra-" + kind, "contract-" + kind, "auth-q", "ext-" + kind}
}

func brokers() []brokerSetup {
	return []brokerSetup{
		{
			kind: "redis",
			start: func(t *testing.T) (app.Config, string, string) {
				testcluster.FlushRedisDB(t, 10)
				testcluster.FlushRedisDB(t, 11)
				b, r := testcluster.RedisURL(10), testcluster.RedisURL(11)
				return app.Config{BrokerURL: b, ResultBackend: r}, b, r
			},
			hasAbort: true,
		},
		{
			kind: "embedded",
			start: func(t *testing.T) (app.Config, string, string) {
				// The workers' URLs, with the password stamen generates, are
				// known once it started.
				addr := fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))
				return app.Config{EmbeddedAddr: addr}, "", ""
			},
			hasAbort: true,
		},
		{
			kind: "amqp",
			start: func(t *testing.T) (app.Config, string, string) {
				b := testcluster.AMQPURL(amqpVhost)
				return app.Config{BrokerURL: b, ResultBackend: "rpc://"}, b, "rpc://"
			},
			hasAbort: false,
			amqp:     true,
		},
		{
			// Results in Redis keep state a worker can read back, so abort
			// works on RabbitMQ too.
			kind: "amqp+redis",
			start: func(t *testing.T) (app.Config, string, string) {
				testcluster.FlushRedisDB(t, 3)
				b, r := testcluster.AMQPURL(amqpVhost), testcluster.RedisURL(3)
				return app.Config{BrokerURL: b, ResultBackend: r}, b, r
			},
			hasAbort: true,
			amqp:     true,
		},
	}
}

func newCluster(t *testing.T, s brokerSetup, celery string) *cluster {
	t.Helper()
	testcluster.RequireCelery(t, celery)
	cfg, wb, wr := s.start(t)
	if s.amqp {
		// What an earlier suite or run left in them must not reach this
		// suite's workers.
		testcluster.DeleteAMQPQueues(t, amqpVhost, suiteQueues(s.kind)...)
	}
	cfg.InspectTimeout = 2 * time.Second
	cfg.ApplyTimeout = 30 * time.Second
	cfg.QueueLengthInterval = 250 * time.Millisecond
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatalf("start stamen on %s: %v", s.kind, err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		a.Close()
	})
	if cfg.BrokerURL == "" {
		wb, wr = a.BrokerURL, a.ResultBackendURL
	}
	c := &cluster{kind: s.kind, celery: celery, app: a, api: &api{t: t, base: srv.URL, hc: &http.Client{Timeout: 60 * time.Second}}, hasAbort: s.hasAbort, amqp: s.amqp}
	c.cfg = cfg
	c.cfg.BrokerURL, c.cfg.ResultBackend, c.cfg.EmbeddedAddr = wb, wr, ""

	specs := []testcluster.WorkerOptions{
		{Name: "w1", Broker: wb, Backend: wr, Concurrency: 2, Celery: celery},
		{Name: "w2", Broker: wb, Backend: wr, Autoscale: "4,2", PoolRestarts: true, Celery: celery},
		{Name: "w3", Broker: wb, Backend: wr, Concurrency: 1, Celery: celery},
		{Name: "w4", Broker: wb, Backend: wr, Concurrency: 1, Celery: celery},
	}
	ws := make([]*testcluster.Worker, len(specs))
	var wg sync.WaitGroup
	for i := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i] = testcluster.StartWorker(t, specs[i])
		}()
	}
	wg.Wait()
	for _, w := range ws {
		if w == nil {
			t.FailNow()
		}
	}
	c.w1, c.w2, c.w3, c.w4 = ws[0], ws[1], ws[2], ws[3]

	// Every worker must be known to the inspector and alive in the events
	// state before the suite starts.
	eventually(t, 30*time.Second, "all workers inspected and alive", func() bool {
		workers := c.api.mustOK(c.api.get("/api/workers", q("refresh", "true")))
		status := c.api.mustOK(c.api.get("/api/workers", q("status", "true")))
		for _, w := range ws {
			if _, ok := workers[w.Name]; !ok || status[w.Name] != true {
				return false
			}
		}
		return true
	})
	return c
}

// suiteRelease is a Celery release the suite runs against, on which broker
// setups, and whether only the core cases.
type suiteRelease struct {
	celery string
	kinds  []string // nil: every broker setup
	core   bool
}

// suiteReleases: the system's Celery 5.2 on every broker setup, 5.6 (the
// newest) on Redis and RabbitMQ, and 5.5 on Redis with the core cases, which
// keeps `make test` well under its 30 minutes.
var suiteReleases = []suiteRelease{
	{celery: testcluster.Celery52},
	{celery: testcluster.Celery56, kinds: []string{"redis", "amqp"}},
	{celery: testcluster.Celery55, kinds: []string{"redis"}, core: true},
}

// runName is the subtest of a broker setup on a release: the setup's kind
// on Celery 5.2 (as before releases were a dimension), else
// "<kind>@celery<release>".
func runName(kind, celery string) string {
	if celery == testcluster.Celery52 {
		return kind
	}
	return kind + "@celery" + celery
}

func TestCluster(t *testing.T) {
	testcluster.SkipIfShort(t, "integration suite: real workers and brokers")
	for _, r := range suiteReleases {
		for _, s := range brokers() {
			if r.kinds != nil && !slices.Contains(r.kinds, s.kind) {
				continue
			}
			t.Run(runName(s.kind, r.celery), func(t *testing.T) {
				c := newCluster(t, s, r.celery)
				cases := suite()
				if r.core {
					cases = coreSuite()
				}
				for _, tc := range cases {
					t.Run(tc.name, func(t *testing.T) {
						c.api.t = t
						tc.run(t, c)
					})
				}
			})
		}
	}
}

type suiteCase struct {
	name string
	run  func(t *testing.T, c *cluster)
}

// suite lists the cases in the order they run: read operations first, then
// control operations, then the ones that take workers away.
func suite() []suiteCase {
	var cases []suiteCase
	cases = append(cases, readCases()...)
	cases = append(cases, writeCases()...)
	cases = append(cases, contractCases()...)
	cases = append(cases, observeCases()...)
	cases = append(cases, securityCases()...)
	cases = append(cases, opsCases()...)
	cases = append(cases, typedCases()...)
	cases = append(cases, retryCases()...)
	cases = append(cases, lifecycleCases()...)
	return cases
}

// coreSuite is the subset run on the releases that are not checked in full:
// reads, task execution and control, and typed values.
func coreSuite() []suiteCase {
	var cases []suiteCase
	cases = append(cases, readCases()...)
	cases = append(cases, writeCases()...)
	cases = append(cases, typedCases()...)
	return cases
}
