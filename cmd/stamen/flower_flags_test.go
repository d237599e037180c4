package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/metrics"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// flowerFlagsDB is the Redis database of the tests of Flower's
// --max_workers, --task_runtime_metric_buckets and --enable_events.
const flowerFlagsDB = 8

// unsetEnv leaves only what a case sets of the variables of names.
func unsetEnv(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		for _, k := range []string{"STAMEN_" + n, "FLOWER_" + n} {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// TestFlowerOptions: Flower's --max_workers,
// --task_runtime_metric_buckets and --enable_events, with their defaults,
// their variables (STAMEN_ first) and their bounds; a value stamen cannot
// use stops it at start, saying which option.
func TestFlowerOptions(t *testing.T) {
	unsetEnv(t, "MAX_WORKERS", "TASK_RUNTIME_METRIC_BUCKETS", "ENABLE_EVENTS")
	enableEvents := func(want bool) func(o options) bool { return func(o options) bool { return o.enableEvents == want } }
	buckets := func(want ...float64) func(o options) bool {
		return func(o options) bool { return slices.Equal(o.runtimeBuckets, want) }
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(o options) bool
		wantErr string
	}{
		{name: "defaults", check: func(o options) bool {
			return o.maxWorkers == state.DefaultMaxWorkers && slices.Equal(o.runtimeBuckets, metrics.DefaultRuntimeBuckets) && o.enableEvents
		}},
		{name: "--max_workers", args: []string{"--max_workers", "2"}, check: func(o options) bool { return o.maxWorkers == 2 }},
		{name: "--max-workers", args: []string{"--max-workers=7"}, check: func(o options) bool { return o.maxWorkers == 7 }},
		{name: "FLOWER_MAX_WORKERS", env: map[string]string{"FLOWER_MAX_WORKERS": "30"},
			check: func(o options) bool { return o.maxWorkers == 30 }},
		{name: "STAMEN_ wins over FLOWER_", env: map[string]string{"STAMEN_MAX_WORKERS": "40", "FLOWER_MAX_WORKERS": "30"},
			check: func(o options) bool { return o.maxWorkers == 40 }},
		{name: "zero workers", args: []string{"--max_workers", "0"}, wantErr: "--max_workers: want at least 1, got 0"},
		{name: "negative workers", env: map[string]string{"FLOWER_MAX_WORKERS": "-1"}, wantErr: "--max_workers: want at least 1, got -1"},
		{name: "unreadable workers", env: map[string]string{"FLOWER_MAX_WORKERS": "many"}, wantErr: `invalid FLOWER_MAX_WORKERS="many"`},
		{name: "--task_runtime_metric_buckets", args: []string{"--task_runtime_metric_buckets", "0.5,1,2.5,inf"}, check: buckets(0.5, 1, 2.5)},
		{name: "--task-runtime-metric-buckets", args: []string{"--task-runtime-metric-buckets=3"}, check: buckets(3)},
		{name: "FLOWER_TASK_RUNTIME_METRIC_BUCKETS", env: map[string]string{"FLOWER_TASK_RUNTIME_METRIC_BUCKETS": "1,10"},
			check: buckets(1, 10)},
		{name: "STAMEN_ buckets win over FLOWER_",
			env:   map[string]string{"STAMEN_TASK_RUNTIME_METRIC_BUCKETS": "2,20", "FLOWER_TASK_RUNTIME_METRIC_BUCKETS": "1,10"},
			check: buckets(2, 20)},
		{name: "the flag overrides unreadable buckets", env: map[string]string{"STAMEN_TASK_RUNTIME_METRIC_BUCKETS": "1,x"},
			args: []string{"--task_runtime_metric_buckets", "4"}, check: buckets(4)},
		{name: "decreasing buckets", args: []string{"--task_runtime_metric_buckets", "1,0.5"},
			wantErr: `invalid value "1,0.5" for flag -task_runtime_metric_buckets: bucket 2 (0.5) is not above bucket 1 (1)`},
		{name: "only inf", args: []string{"--task_runtime_metric_buckets", "inf"}, wantErr: "want at least one finite bucket"},
		{name: "unreadable buckets", env: map[string]string{"STAMEN_TASK_RUNTIME_METRIC_BUCKETS": "1,x"},
			wantErr: `invalid STAMEN_TASK_RUNTIME_METRIC_BUCKETS="1,x": bucket 2 ("x") is not a number`},
		{name: "--enable_events=false", args: []string{"--enable_events=false"}, check: enableEvents(false)},
		{name: "--enable-events=no", args: []string{"--enable-events=no"}, check: enableEvents(false)},
		{name: "--enable_events", args: []string{"--enable_events"}, check: enableEvents(true)},
		{name: "FLOWER_ENABLE_EVENTS=0", env: map[string]string{"FLOWER_ENABLE_EVENTS": "0"}, check: enableEvents(false)},
		{name: "STAMEN_ENABLE_EVENTS wins over FLOWER_", env: map[string]string{"STAMEN_ENABLE_EVENTS": "on", "FLOWER_ENABLE_EVENTS": "0"},
			check: enableEvents(true)},
		{name: "the flag overrides FLOWER_ENABLE_EVENTS", env: map[string]string{"FLOWER_ENABLE_EVENTS": "off"},
			args: []string{"--enable_events=yes"}, check: enableEvents(true)},
		{name: "unreadable FLOWER_ENABLE_EVENTS", env: map[string]string{"FLOWER_ENABLE_EVENTS": "maybe"},
			wantErr: `invalid FLOWER_ENABLE_EVENTS="maybe"`},
		{name: "--enable_events=nope", args: []string{"--enable_events=nope"}, wantErr: "want true or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if o, ok := parseCase(t, tc.env, tc.args, tc.wantErr); ok && !tc.check(o) {
				t.Fatalf("options %+v", o)
			}
		})
	}
}

// workersStatus is /api/workers?status=1: the workers of the events state,
// alive or not.
func workersStatus(t *testing.T, base string) map[string]bool {
	t.Helper()
	code, body := get(t, base+"/api/workers?status=1")
	if code != http.StatusOK {
		t.Fatalf("/api/workers?status=1: %d %s", code, body)
	}
	var m map[string]bool
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("/api/workers?status=1: %v: %s", err, body)
	}
	return m
}

// TestFlowerFlagsTakeEffect runs the binary on Redis with --max_workers 2
// and --task_runtime_metric_buckets: of three workers seen one after the
// other, the events state keeps the two seen last; a task's runtime is
// counted in the buckets given, not in the default ones.
func TestFlowerFlagsTakeEffect(t *testing.T) {
	testcluster.RequireRedis(t)
	bin := buildBinary(t)
	unsetEnv(t, "MAX_WORKERS", "TASK_RUNTIME_METRIC_BUCKETS")
	testcluster.FlushRedisDB(t, flowerFlagsDB)
	t.Cleanup(func() { testcluster.FlushRedisDB(t, flowerFlagsDB) })
	rdb := goredis.NewClient(&goredis.Options{Addr: testcluster.RedisAddr(), DB: flowerFlagsDB})
	t.Cleanup(func() { _ = rdb.Close() })

	base, logs, _ := runStamen(t, bin, "--broker", testcluster.RedisURL(flowerFlagsDB), "--max_workers", "2",
		"--task_runtime_metric_buckets", "0.0005,0.5,2,inf")

	heartbeat := func(host string) []byte {
		return testcluster.EventsEnvelope(host, host, map[string]any{"type": "worker-heartbeat", "hostname": host,
			"timestamp": float64(time.Now().UnixMicro()) / 1e6, "clock": 1, "pid": 1, "utcoffset": 0, "freq": 60,
			"active": 0, "processed": 0, "sw_ident": "py-celery", "sw_ver": "5.5.3", "sw_sys": "Linux"})
	}
	channel := fmt.Sprintf("/%d.celeryev/worker.heartbeat", flowerFlagsDB)
	// One at a time, each seen before the next is sent, so that the order
	// in which stamen first saw them is w1, w2, w3.
	for _, host := range []string{"w1@flags", "w2@flags", "w3@flags"} {
		testcluster.PublishUntil(t, rdb, channel, heartbeat(host), func() bool { return workersStatus(t, base)[host] })
	}
	got := workersStatus(t, base)
	if len(got) != 2 || !got["w2@flags"] || !got["w3@flags"] {
		t.Errorf("workers %v, want w2@flags and w3@flags alive, w1@flags forgotten\n%s", got, logs.String())
	}

	// The task succeeds in 1 ms (SucceededTaskEnvelope's runtime). The
	// envelope may be ingested more than once (PublishUntil publishes it
	// again until it is seen): each time counts once more in the same
	// buckets.
	metricsText := func() string {
		code, body := get(t, base+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		return string(body)
	}
	bucket := regexp.MustCompile(`(?m)^flower_task_runtime_seconds_bucket\{task="flags\.add",worker="w3@flags",le="([^"]+)"\} (\d+)$`)
	buckets := func(text string) map[string]string {
		m := map[string]string{}
		for _, b := range bucket.FindAllStringSubmatch(text, -1) {
			m[b[1]] = b[2]
		}
		return m
	}
	const id = "00000000-0000-4000-9000-000000000008"
	testcluster.PublishUntil(t, rdb, fmt.Sprintf("/%d.celeryev/task.multi", flowerFlagsDB),
		testcluster.SucceededTaskEnvelope(id, "flags.add", "w3@flags", 1), func() bool {
			n := buckets(metricsText())["+Inf"]
			return n != "" && n != "0"
		})
	text := metricsText()
	b := buckets(text)
	n := b["+Inf"]
	if len(b) != 4 || b["0.0005"] != "0" || b["0.5"] != n || b["2"] != n {
		t.Errorf("runtime buckets %v, want le 0.0005: 0 and le 0.5, 2, +Inf: %s, no others\n%s", b, n, text)
	}
}

// pidboxMethods follows the broadcasts on Redis database db's pidbox
// channel, from before stamen starts, sending each one's method to the
// channel returned, or marker for a message that is marker itself.
func pidboxMethods(t *testing.T, rdb *goredis.Client, db int, marker string) <-chan string {
	t.Helper()
	ps := rdb.Subscribe(t.Context(), fmt.Sprintf("/%d.celery.pidbox", db))
	if _, err := ps.Receive(t.Context()); err != nil {
		t.Fatal(err)
	}
	methods := make(chan string, 1000)
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = ps.Close()
		<-done
	})
	go func() {
		defer close(done)
		for msg := range ps.Channel() {
			if msg.Payload == marker {
				methods <- marker
				continue
			}
			env, err := celery.DecodeEnvelope([]byte(msg.Payload))
			if err != nil {
				methods <- "undecodable envelope: " + err.Error()
				continue
			}
			body, err := env.BodyBytes()
			var req struct{ Method string }
			if err == nil {
				err = json.Unmarshal(body, &req)
			}
			if err != nil {
				methods <- "undecodable body: " + err.Error()
				continue
			}
			methods <- req.Method
		}
	}()
	return methods
}

// methodsBefore reads broadcasts until one for want and returns the
// methods of those before it, failing the test if want does not come
// within 15 s.
func methodsBefore(t *testing.T, methods <-chan string, want string) []string {
	t.Helper()
	var before []string
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m := <-methods:
			if m == want {
				return before
			}
			before = append(before, m)
		case <-deadline:
			t.Fatalf("no %s broadcast within 15 s, after %v", want, before)
		}
	}
}

// TestEnableEventsTakesEffect runs the binary on Redis: by default it
// broadcasts enable_events on subscribing to the events; with
// --enable_events=false it broadcasts a heartbeat request on subscribing
// (and inspections to fill its cache), but no enable_events, then or for
// longer than the loop's 5 s period.
//
// The off case cannot pass while the switch does not reach the broker:
// the broadcasts are read up to a marker the test publishes on the same
// channel 6 s after the heartbeat request, and Redis delivers a channel's
// messages in the order it received them, so the subscription's
// enable_events (sent right after the heartbeat request) and the loop's
// first one (5 s after the subscription) would be read before the marker.
func TestEnableEventsTakesEffect(t *testing.T) {
	testcluster.RequireRedis(t)
	bin := buildBinary(t)
	unsetEnv(t, "ENABLE_EVENTS")
	testcluster.FlushRedisDB(t, flowerFlagsDB)
	t.Cleanup(func() { testcluster.FlushRedisDB(t, flowerFlagsDB) })
	rdb := goredis.NewClient(&goredis.Options{Addr: testcluster.RedisAddr(), DB: flowerFlagsDB})
	t.Cleanup(func() { _ = rdb.Close() })
	const marker = "stamen-test-marker"

	t.Run("on", func(t *testing.T) {
		methods := pidboxMethods(t, rdb, flowerFlagsDB, marker)
		runStamen(t, bin, "--broker", testcluster.RedisURL(flowerFlagsDB))
		methodsBefore(t, methods, "enable_events")
	})
	t.Run("off", func(t *testing.T) {
		methods := pidboxMethods(t, rdb, flowerFlagsDB, marker)
		runStamen(t, bin, "--broker", testcluster.RedisURL(flowerFlagsDB), "--enable_events=false")
		seen := methodsBefore(t, methods, "heartbeat")
		<-time.After(6 * time.Second)
		if err := rdb.Publish(t.Context(), fmt.Sprintf("/%d.celery.pidbox", flowerFlagsDB), marker).Err(); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, methodsBefore(t, methods, marker)...)
		if slices.Contains(seen, "enable_events") {
			t.Errorf("broadcasts %v (besides the heartbeat request): enable_events among them", seen)
		}
	})
}
