package app

import (
	"encoding/json"
	"strings"

	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/state"
)

// envelope wraps a JSON body of events as a worker publishes it on Redis
// (testcluster.TaskEnvelope's shape, written with a template: the test
// makes 100,000 of them).
func envelope(worker string, body []byte) []byte {
	return fmt.Appendf(nil, `{"body": %q, "content-encoding": "utf-8", "content-type": "application/json", `+
		`"headers": {"hostname": %q}, "properties": {"delivery_mode": 1, "body_encoding": "base64", "priority": 0, `+
		`"delivery_info": {"exchange": "celeryev", "routing_key": "task.multi"}, "delivery_tag": "t"}}`,
		base64.StdEncoding.EncodeToString(body), worker)
}

// workerEnvelope is a worker event (online or heartbeat), its interval
// short so that the worker is offline soon after.
func workerEnvelope(kind, worker string, at float64) []byte {
	return envelope(worker, fmt.Appendf(nil, `{"type": "worker-%s", "hostname": %q, "timestamp": %f, "freq": 0.01, `+
		`"clock": 1, "pid": 1, "utcoffset": 0, "active": 0, "processed": 1, "sw_ident": "py-celery", "sw_ver": "5.2.6", "sw_sys": "Linux"}`,
		kind, worker, at))
}

// taskEnvelope is a task's received, started and succeeded events.
func taskEnvelope(id, name, worker string, clock int, at float64) []byte {
	common := fmt.Sprintf(`"uuid": %q, "hostname": %q, "timestamp": %f, "clock": %d, "pid": 1, "utcoffset": 0`, id, worker, at, clock)
	return envelope(worker, fmt.Appendf(nil, `[{"type": "task-received", %s, "name": %q, "args": "(1, 2)", "kwargs": "{}", "retries": 0}, `+
		`{"type": "task-started", %s}, {"type": "task-succeeded", %s, "result": "3", "runtime": 0.001}]`, common, name, common, common))
}

// answerInspections answers every pidbox request on the embedded broker
// for the workers it names, with an empty reply, as kombu's Redis
// transport carries a Celery worker's: the reply goes through the reply
// exchange's bindings (SMEMBERS, then LPUSH to the bound list).
func answerInspections(t *testing.T, a *App) {
	rdb := brokerClient(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	ps := rdb.PSubscribe(ctx, "/0.celery.pidbox")
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		_ = ps.Close()
		<-done
		_ = rdb.Close()
	})
	go func() {
		defer close(done)
		for {
			msg, err := ps.ReceiveMessage(ctx)
			if err != nil {
				return
			}
			env, err := celery.DecodeEnvelope([]byte(msg.Payload))
			if err != nil {
				continue
			}
			body, err := env.BodyBytes()
			if err != nil {
				continue
			}
			var req struct {
				Destination []string `json:"destination"`
				Ticket      string   `json:"ticket"`
				ReplyTo     struct {
					RoutingKey string `json:"routing_key"`
				} `json:"reply_to"`
			}
			if json.Unmarshal(body, &req) != nil {
				continue
			}
			members, _ := rdb.SMembers(ctx, "_kombu.binding.reply.celery.pidbox").Result()
			for _, w := range req.Destination {
				reply, _ := json.Marshal(celery.NewEnvelope(fmt.Appendf(nil, `{%q: {}}`, w), map[string]any{"ticket": req.Ticket},
					celery.Properties{DeliveryMode: 1, DeliveryTag: req.Ticket + w,
						DeliveryInfo: celery.DeliveryInfo{Exchange: "reply.celery.pidbox", RoutingKey: req.ReplyTo.RoutingKey}}))
				for _, m := range members {
					if parts := strings.Split(m, "\x06\x16"); len(parts) == 3 && parts[0] == req.ReplyTo.RoutingKey {
						_ = rdb.LPush(ctx, parts[2], reply).Err()
					}
				}
			}
		}
	}()
}

// TestNamesAndWorkersStayBounded streams 50k tasks, each with its own
// task name and its own worker (a pod name), through stamen holding 100
// tasks with a real store and a short --purge_offline_workers, the events
// as the Redis broker delivers them: afterwards the state's symbols and
// task types, its workers, the store's buckets, the inspector's cache and
// the metric series are those of at most 100 tasks.
func TestNamesAndWorkersStayBounded(t *testing.T) {
	const keep = 100
	// 500 times what is kept: what grew with the names would be 500 times
	// its bound. (200k took four minutes of the race-enabled suite and
	// showed nothing 50k does not.)
	n := 50000
	if testing.Short() {
		n = 20000
	}
	a, err := New(context.Background(), Config{
		EmbeddedAddr: "127.0.0.1:0", MaxTasks: keep, DBPath: filepath.Join(t.TempDir(), "stamen.db"),
		SaveInterval: 20 * time.Millisecond, PurgeOfflineWorkers: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	answerInspections(t, a)
	ref := state.New(state.Config{MaxTasks: keep})
	var dec celery.EventDecoder
	ctx := context.Background()
	// An hour ago: the task events' own heartbeats are long expired.
	at := float64(time.Now().Add(-time.Hour).UnixMicro()) / 1e6
	for i := range n {
		worker := fmt.Sprintf("celery@pod-%d", i)
		// Every 10,000th worker comes online, which makes stamen inspect
		// it (the others only send heartbeats: 50k inspections would
		// take the test's time).
		online := i%10000 == 0
		kind := "heartbeat"
		if online {
			kind = "online"
		}
		for _, p := range [][]byte{
			workerEnvelope(kind, worker, at),
			taskEnvelope(fmt.Sprintf("00000000-0000-4000-8000-%012d", i), fmt.Sprintf("proj.Task%d", i), worker, i, at),
		} {
			evs, err := dec.Decode(p)
			if err != nil {
				t.Fatal(err)
			}
			a.State.Apply(evs...)
			if i >= n-keep {
				ref.Apply(evs...)
			}
			for j := range evs {
				a.ingester.Observe(ctx, &evs[j], 0)
			}
		}
		if online {
			// The inspection worker-online sends may join the one stamen
			// started with, sent before the worker answered: ask again,
			// as ?refresh=1 does, until it is cached or an inspection of it
			// was answered in full. Its heartbeat is an hour old, so the
			// purge (every 50 ms here) may forget it again before Known
			// looks; the bound below is what this test is about.
			for deadline := time.Now().Add(10 * time.Second); !a.Inspector.Known(worker); {
				if time.Now().After(deadline) {
					t.Fatalf("%s came online and no inspection of it was answered", worker)
				}
				if missing, err := a.Inspector.RefreshReport(ctx, worker); err == nil && len(missing) == 0 {
					break
				}
			}
		}
	}
	if a.State.Len() != keep {
		t.Fatalf("%d tasks kept, want %d", a.State.Len(), keep)
	}
	var report string
	deadline := time.Now().Add(30 * time.Second)
	for {
		tasks, workers, types := a.store.Counts()
		got := []int{a.State.Symbols(), len(a.State.TaskTypes()), len(a.State.WorkerNames()),
			tasks, workers, types, a.Inspector.Len(), a.Metrics.Series()}
		// With 100 tasks of their own names: the reference's symbols, 100
		// types, no worker (all offline), and no more series than 100
		// tasks' (three event series, runtime, prefetch and prefetched
		// per task, two per worker).
		limit := []int{ref.Symbols(), keep, 0, keep, 0, keep, 0, 8 * keep}
		report = fmt.Sprintf("symbols, types, workers, stored tasks, stored workers, stored types, inspector entries, series = %v, want at most %v", got, limit)
		ok := true
		for i := range got {
			ok = ok && got[i] <= limit[i]
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(report)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Log(report)
}
