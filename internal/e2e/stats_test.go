package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// statsClient has a Celery client send the 60 tasks of the statistics
// tests: 35 that succeed, 5 that fail once, are retried and then succeed,
// and 20 that fail. It prints "<name> <id>" a line.
const statsClient = `
import sys
from stamen_testapp import app
out = []
for i in range(35):
    out.append(("stamen.add", app.send_task("stamen.add", (i, 1)).id))
for i in range(5):
    out.append(("stamen.retry", app.send_task("stamen.retry", kwargs={"succeed_on": 2}).id))
for i in range(20):
    out.append(("stamen.fail", app.send_task("stamen.fail", ("stats",)).id))
print("\n".join(n + " " + i for n, i in out))
`

var statKinds = []string{"received", "started", "succeeded", "failed", "retried", "revoked"}

// statsAnswer is GET /api/stats/tasks decoded.
type statsAnswer struct {
	Step    int64 `json:"step"`
	Buckets []struct {
		Time       time.Time `json:"time"`
		Received   int64     `json:"received"`
		Started    int64     `json:"started"`
		Succeeded  int64     `json:"succeeded"`
		Failed     int64     `json:"failed"`
		Retried    int64     `json:"retried"`
		Revoked    int64     `json:"revoked"`
		RuntimeP50 *float64  `json:"runtime_p50"`
		RuntimeP95 *float64  `json:"runtime_p95"`
	} `json:"buckets"`
}

// counts is the answer's counts, bucket by bucket, in statKinds order.
func (s statsAnswer) counts() [][6]int64 {
	out := make([][6]int64, len(s.Buckets))
	for i, b := range s.Buckets {
		out[i] = [6]int64{b.Received, b.Started, b.Succeeded, b.Failed, b.Retried, b.Revoked}
	}
	return out
}

// stamp is one counted occurrence: a task's kind at a time.
type stamp struct {
	name string
	kind int
	at   float64
}

// expect buckets the stamps of name ("" for all) as the answer's buckets
// lie, and sums them by kind.
func expect(s statsAnswer, stamps []stamp, name string) (per [][6]int64, total [6]int64) {
	per = make([][6]int64, len(s.Buckets))
	for _, st := range stamps {
		if name != "" && st.name != name {
			continue
		}
		total[st.kind]++
		for i, b := range s.Buckets {
			start := float64(b.Time.Unix())
			if st.at >= start && st.at < start+float64(s.Step) {
				per[i][st.kind]++
			}
		}
	}
	return per, total
}

func sum(per [][6]int64) (t [6]int64) {
	for _, b := range per {
		for k, n := range b {
			t[k] += n
		}
	}
	return t
}

// getStats asks a replica for the last 10 minutes by minute.
func getStats(r *replica, extra ...string) (statsAnswer, error) {
	status, body, err := r.get("/api/stats/tasks", q(append([]string{"window", "600", "step", "60"}, extra...)...))
	if err != nil {
		return statsAnswer{}, err
	}
	if status != http.StatusOK {
		return statsAnswer{}, fmt.Errorf("status %d: %s", status, body)
	}
	var s statsAnswer
	err = json.Unmarshal(body, &s)
	return s, err
}

// awaitStats polls a replica until its answer (with the extra filters)
// holds the stamps in their buckets, and returns it.
func awaitStats(t *testing.T, r *replica, stamps []stamp, name string, extra ...string) statsAnswer {
	t.Helper()
	var last statsAnswer
	var why string
	ok := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		s, err := getStats(r, extra...)
		if err != nil {
			why = err.Error()
			continue
		}
		last = s
		want, _ := expect(s, stamps, name)
		if reflect.DeepEqual(s.counts(), want) {
			ok = true
			break
		}
		why = fmt.Sprintf("got %v\nwant %v", s.counts(), want)
	}
	if !ok {
		t.Fatalf("replica %s, %v: the buckets never held the expected counts: %s", r.name, extra, why)
	}
	for i, b := range last.Buckets {
		if (b.Succeeded > 0) != (b.RuntimeP50 != nil && b.RuntimeP95 != nil) {
			t.Errorf("bucket %d: %d successes, runtime p50 %v p95 %v", i, b.Succeeded, b.RuntimeP50, b.RuntimeP95)
		}
	}
	return last
}

// runStatsTasks sends the 60 tasks and returns their names by id.
func runStatsTasks(t *testing.T, broker, backend string) map[string]string {
	t.Helper()
	out := testcluster.RunClient(t, testcluster.ClientOptions{Broker: broker, Backend: backend}, statsClient)
	names := map[string]string{}
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		name, id, _ := strings.Cut(strings.TrimSpace(line), " ")
		names[id] = name
	}
	if len(names) != 60 {
		t.Fatalf("the client sent %d tasks, want 60", len(names))
	}
	return names
}

// awaitFinished waits until the replica shows every task in its final
// state, and returns the records.
func awaitFinished(t *testing.T, r *replica, names map[string]string) map[string]map[string]any {
	t.Helper()
	var tasks map[string]map[string]any
	eventually(t, 60*time.Second, "the 60 tasks finished", func() bool {
		status, body, err := r.get("/api/tasks", nil)
		if err != nil || status != http.StatusOK {
			return false
		}
		tasks = taskMap(t, body)
		for id, name := range names {
			want := "SUCCESS"
			if name == "stamen.fail" {
				want = "FAILURE"
			}
			if rec, ok := tasks[id]; !ok || rec["state"] != want {
				return false
			}
		}
		return true
	})
	return tasks
}

// recordStamps are the stamps of the task records: each task once per
// state, at its record's time of it (what PostgreSQL counts).
func recordStamps(tasks map[string]map[string]any, names map[string]string) []stamp {
	var out []stamp
	for id, name := range names {
		for k, field := range statKinds {
			if v, ok := tasks[id][field].(float64); ok {
				out = append(out, stamp{name, k, v})
			}
		}
	}
	return out
}

// eventStamps subscribes to the broker's event channels and collects
// every task event of the kinds counted until stop is called: what the
// in-memory statistics count, seen independently of stamen.
func eventStamps(t *testing.T, redisAddr string) (ready func() bool, stop func() []stamp) {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Addr: redisAddr, DB: 0})
	ps := rdb.PSubscribe(context.Background(), "/0.celeryev/*")
	if _, err := ps.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stamps []stamp
	seen := false
	names := map[string]string{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msg := range ps.Channel() {
			evs, err := celery.DecodeEventEnvelope([]byte(msg.Payload))
			if err != nil {
				continue
			}
			mu.Lock()
			seen = true
			for _, e := range evs {
				if e.Name != "" {
					names[e.UUID] = e.Name
				}
				for k, kind := range statKinds {
					if e.Type == "task-"+kind {
						stamps = append(stamps, stamp{e.UUID, k, e.Timestamp})
					}
				}
			}
			mu.Unlock()
		}
	}()
	ready = func() bool { mu.Lock(); defer mu.Unlock(); return seen }
	stop = func() []stamp {
		_ = ps.Close()
		<-done
		_ = rdb.Close()
		mu.Lock()
		defer mu.Unlock()
		for i := range stamps {
			stamps[i].name = names[stamps[i].name]
		}
		return stamps
	}
	return ready, stop
}

func totals(stamps []stamp, name string) (t [6]int64) {
	for _, s := range stamps {
		if name == "" || s.name == name {
			t[s.kind]++
		}
	}
	return t
}

// TestStatsSurviveRestart: 60 tasks run by a real worker (20 fail, 5 are
// retried once) are counted by a stamen on a bbolt file in the buckets
// their events' times fall in, each event once (the broker's events,
// subscribed to independently, are the expectation), for every task name
// filter and the queue's, and the same after stamen restarts. The task
// list exports the worker's tasks, with their fields, as CSV and JSON
// lines.
func TestStatsSurviveRestart(t *testing.T) {
	testcluster.Require(t)
	redis := testcluster.StartRedis(t)
	broker, backend := redis.URL(0), redis.URL(1)
	bin := buildStamen(t)
	args := []string{"--persistent", "--db", filepath.Join(t.TempDir(), "stamen.db"), "--broker", broker, "--result_backend", backend, "--state_save_interval", "100"}
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "stats", Broker: broker, Backend: backend, Concurrency: 4})
	r := newReplica(t, bin, "bolt", args...)
	r.api.awaitWorkerReady(w.Name)

	ready, stop := eventStamps(t, fmt.Sprintf("127.0.0.1:%d", redis.Port))
	eventually(t, 30*time.Second, "the broker's events seen", ready)
	names := runStatsTasks(t, broker, backend)
	tasks := awaitFinished(t, r, names)
	// Every event has come once the records are final, but for none.
	stamps := stop()
	if got, want := totals(stamps, ""), [6]int64{65, 65, 40, 20, 5, 0}; got != want {
		t.Fatalf("the broker carried %v task events by kind, want %v", got, want)
	}

	check := func(r *replica) {
		t.Helper()
		all := awaitStats(t, r, stamps, "")
		if got := sum(all.counts()); got != totals(stamps, "") {
			t.Fatalf("totals %v, want %v", got, totals(stamps, ""))
		}
		for _, name := range []string{"stamen.fail", "stamen.retry", "stamen.add"} {
			s := awaitStats(t, r, stamps, name, "taskname", name)
			if got := sum(s.counts()); got != totals(stamps, name) {
				t.Fatalf("%s: totals %v", name, got)
			}
		}
		s := awaitStats(t, r, nil, "", "taskname", "stamen.none")
		if got := sum(s.counts()); got != [6]int64{} {
			t.Fatalf("an unknown name counts %v", got)
		}
	}
	check(r)

	// A graceful restart: the aggregate comes back from the file.
	r.mu.Lock()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	exited := r.exited
	r.mu.Unlock()
	<-exited
	r.start()
	check(r)

	// The export: every task, with the fields the JSON list has.
	status, body, err := r.get("/api/tasks", q("format", "csv"))
	if err != nil || status != http.StatusOK {
		t.Fatalf("csv export: %d %v", status, err)
	}
	rows, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil || len(rows) != 61 {
		t.Fatalf("csv export: %d rows, %v", len(rows), err)
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	for _, row := range rows[1:] {
		rec := tasks[row[col["uuid"]]]
		if rec == nil {
			t.Fatalf("exported task %s is not listed", row[col["uuid"]])
		}
		for _, f := range []string{"name", "state", "worker", "args", "kwargs", "result", "exception", "routing_key"} {
			want, _ := rec[f].(string)
			if row[col[f]] != want {
				t.Errorf("task %s: %s exported %q, listed %q", row[0], f, row[col[f]], want)
			}
		}
		if row[col["worker"]] != w.Name {
			t.Errorf("task %s exported with worker %q", row[0], row[col["worker"]])
		}
	}
	status, body, err = r.get("/api/tasks", q("format", "jsonl", "taskname", "stamen.fail"))
	if err != nil || status != http.StatusOK {
		t.Fatalf("jsonl export: %d %v", status, err)
	}
	n := 0
	for sc := bufio.NewScanner(bytes.NewReader(body)); sc.Scan(); n++ {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if want := tasks[rec["uuid"].(string)]; !reflect.DeepEqual(rec, want) {
			t.Errorf("exported %v\nlisted %v", rec, want)
		}
	}
	if n != 20 {
		t.Errorf("%d failed tasks exported, want 20", n)
	}
}

// TestStatsFleetSameAnswers: the same 60 tasks counted from PostgreSQL by
// both replicas of a fleet, one of which started after they finished and
// never saw their events: each task once per state, in the bucket of its
// record's time of it, the same on both, with and without a task name
// filter.
func TestStatsFleetSameAnswers(t *testing.T) {
	broker, backend, bin, args := newFleet(t)
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "statsfleet", Broker: broker, Backend: backend, Concurrency: 4})
	a := newReplica(t, bin, "a", args...)
	a.api.awaitWorkerReady(w.Name)
	names := runStatsTasks(t, broker, backend)
	tasks := awaitFinished(t, a, names)
	stamps := recordStamps(tasks, names)
	if got, want := totals(stamps, ""), [6]int64{60, 60, 40, 20, 5, 0}; got != want {
		t.Fatalf("the records hold %v by kind, want %v", got, want)
	}
	b := newReplica(t, bin, "b", args...)
	for _, f := range [][]string{nil, {"taskname", "stamen.fail"}, {"taskname", "STAMEN.RETRY"}, {"workername", w.Name}} {
		name := ""
		if f != nil && f[0] == "taskname" {
			name = strings.ToLower(f[1])
		}
		// Each against the records, bucketed as its own answer lies (a
		// minute may turn between the two reads).
		awaitStats(t, a, stamps, name, f...)
		awaitStats(t, b, stamps, name, f...)
	}
}
