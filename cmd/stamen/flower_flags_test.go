package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

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

// TestFlowerStateOptions: Flower's --max_workers, with its default, its
// variables (STAMEN_ first) and its bound; a value stamen cannot use stops
// it at start, saying which option.
func TestFlowerStateOptions(t *testing.T) {
	unsetEnv(t, "MAX_WORKERS")
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(o options) bool
		wantErr string
	}{
		{name: "defaults", check: func(o options) bool { return o.maxWorkers == state.DefaultMaxWorkers }},
		{name: "--max_workers", args: []string{"--max_workers", "2"}, check: func(o options) bool { return o.maxWorkers == 2 }},
		{name: "--max-workers", args: []string{"--max-workers=7"}, check: func(o options) bool { return o.maxWorkers == 7 }},
		{name: "FLOWER_MAX_WORKERS", env: map[string]string{"FLOWER_MAX_WORKERS": "30"},
			check: func(o options) bool { return o.maxWorkers == 30 }},
		{name: "STAMEN_ wins over FLOWER_", env: map[string]string{"STAMEN_MAX_WORKERS": "40", "FLOWER_MAX_WORKERS": "30"},
			check: func(o options) bool { return o.maxWorkers == 40 }},
		{name: "zero workers", args: []string{"--max_workers", "0"}, wantErr: "--max_workers: want at least 1, got 0"},
		{name: "negative workers", env: map[string]string{"FLOWER_MAX_WORKERS": "-1"}, wantErr: "--max_workers: want at least 1, got -1"},
		{name: "unreadable workers", env: map[string]string{"FLOWER_MAX_WORKERS": "many"}, wantErr: `invalid FLOWER_MAX_WORKERS="many"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			o, err := parseFlags(tc.args, &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(o) {
				t.Fatalf("options %+v, err %v", o, err)
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

// TestFlowerStateFlagsTakeEffect runs the binary on Redis with
// --max_workers 2: of three workers seen one after the other, the events
// state keeps the two seen last.
func TestFlowerStateFlagsTakeEffect(t *testing.T) {
	testcluster.RequireRedis(t)
	bin := buildBinary(t)
	unsetEnv(t, "MAX_WORKERS")
	testcluster.FlushRedisDB(t, flowerFlagsDB)
	t.Cleanup(func() { testcluster.FlushRedisDB(t, flowerFlagsDB) })
	rdb := goredis.NewClient(&goredis.Options{Addr: testcluster.RedisAddr(), DB: flowerFlagsDB})
	t.Cleanup(func() { _ = rdb.Close() })

	base, logs, _ := runStamen(t, bin, "--broker", testcluster.RedisURL(flowerFlagsDB), "--max_workers", "2")

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
}
