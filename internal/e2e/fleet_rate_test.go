package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// The fleet at the rate a large Celery cluster runs: thousands of tasks a
// second. A real Celery worker on the test machine runs a few hundred
// tasks a second, so these streams are published by the test itself on
// the broker's event channel, in the envelopes Celery workers publish (a
// task's received, started and succeeded events in one task.multi
// message); the broker, the replicas and PostgreSQL are the real ones.

// rateStream is a paced stream of tasks' events on a Redis broker.
type rateStream struct {
	rdb     *goredis.Client
	channel string
	prefix  string
}

func newRateStream(t *testing.T, redis *testcluster.Redis, prefix string) *rateStream {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", redis.Port), DB: 0})
	t.Cleanup(func() { _ = rdb.Close() })
	return &rateStream{rdb: rdb, channel: "/0.celeryev/task.multi", prefix: prefix}
}

// awaitSubscribers returns once n subscribers receive the event channel's
// messages (the replicas' event consumers are connected).
func (s *rateStream) awaitSubscribers(t *testing.T, n int) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%d subscribers to the events", n), func() bool {
		got, err := s.rdb.Publish(context.Background(), "/0.celeryev/probe", "{}").Result()
		return err == nil && got >= int64(n)
	})
}

func (s *rateStream) id(i int) string { return fmt.Sprintf("%s-%07d", s.prefix, i) }

// publish publishes n tasks at rate tasks a second (the tasks due at each
// tick of 5 ms, in one pipeline), calling progress with the tasks published so far
// after each batch, and returns how long it took.
func (s *rateStream) publish(t *testing.T, n int, rate float64, progress func(sent int)) time.Duration {
	t.Helper()
	ctx := context.Background()
	env := newEnvelopeTemplate(t, s.id(0), float64(time.Now().UnixMicro())/1e6)
	began := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for sent := 0; sent < n; <-tick.C {
		due := min(n, int(rate*time.Since(began).Seconds()))
		if due <= sent {
			continue
		}
		pipe := s.rdb.Pipeline()
		for i := sent; i < due; i++ {
			pipe.Publish(ctx, s.channel, env.of(s.id(i)))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("publish: %v", err)
		}
		sent = due
		if progress != nil {
			progress(sent)
		}
	}
	return time.Since(began)
}

// envelopeTemplate makes a task's envelope (testcluster.TaskEnvelope, a
// success stamped at) from one made once, by replacing its id: under the
// race detector, on the 2-core machine busy with the other tests, encoding
// each envelope's events as JSON took about 210 µs, more than the 100 µs
// between two tasks at 10,000 a second; replacing the id takes about 45.
type envelopeTemplate struct {
	id, body, env []byte
	b64           string
}

func newEnvelopeTemplate(t *testing.T, id string, at float64) *envelopeTemplate {
	t.Helper()
	env := testcluster.TaskEnvelope(id, "stamen.rate", "celery@rate", 1, at, false)
	var m struct{ Body string }
	if err := json.Unmarshal(env, &m); err != nil {
		t.Fatal(err)
	}
	body, err := base64.StdEncoding.DecodeString(m.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &envelopeTemplate{id: []byte(id), body: body, env: env, b64: m.Body}
}

// of is the envelope of the task id, as long as the template's.
func (e *envelopeTemplate) of(id string) []byte {
	body := bytes.ReplaceAll(e.body, e.id, []byte(id))
	env := bytes.Replace(e.env, []byte(e.b64), []byte(base64.StdEncoding.EncodeToString(body)), 1)
	return bytes.ReplaceAll(env, e.id, []byte(id))
}

// finalInPostgres counts the stream's tasks whose row is SUCCESS.
func (s *rateStream) finalInPostgres(t *testing.T, dsn string) int {
	t.Helper()
	var n int
	pgRow(t, dsn, `SELECT count(*) FROM stamen_tasks WHERE id LIKE $1 AND state = 'SUCCESS'`, []any{s.prefix + "-%"}, &n)
	return n
}

// TestFleetReplicaKilledAtRate SIGKILLs one of two replicas, which share
// the writing, a quarter of the way into a stream of 20,000 tasks at
// 10,000 a second. Every task ends in PostgreSQL in its final state: the
// other replica received every event, held the killed one's share, wrote
// those records it found unwritten, and dropped none.
func TestFleetReplicaKilledAtRate(t *testing.T) {
	rs, s, dsn := sharingFleet(t, "killed")
	a, b := rs[0], rs[1]

	const total, rate = 20_000, 10_000
	killedAt := -1
	took := s.publish(t, total, rate, func(sent int) {
		if killedAt < 0 && sent >= total/4 {
			a.kill()
			killedAt = sent
		}
	})
	t.Logf("published %d tasks in %s (%.0f tasks/s); a SIGKILLed at %d published", total, took.Round(time.Millisecond), total/took.Seconds(), killedAt)
	began := time.Now()
	eventually(t, 2*time.Minute, "every task of the stream SUCCESS in PostgreSQL", func() bool {
		return s.finalInPostgres(t, dsn) == total
	})
	t.Logf("all %d tasks final in PostgreSQL %s after the last publish", total, time.Since(began).Round(time.Millisecond))
	ingested, err := b.metric(`stamen_events_ingested_total{kind="task"}`)
	if err != nil {
		t.Fatal(err)
	}
	if ingested < 3*total {
		t.Errorf("b ingested %.0f task events, want %d", ingested, 3*total)
	}
	if lost, err := b.metric(lostMetric); err != nil || lost != 0 {
		t.Errorf("b's %s = %v (%v), want 0", lostMetric, lost, err)
	}
	// b held a's share for a, and wrote what a had not written when it
	// was killed (and what a still owned until its stamp went stale)
	// from those records, a grace period later.
	written, err := b.metric(writtenMetric)
	if err != nil {
		t.Fatal(err)
	}
	taken, err := b.metric(takenOverMetric)
	if err != nil || taken <= 0 {
		t.Errorf("b's %s = %v (%v), want some: the records a owned and had not written when killed", takenOverMetric, taken, err)
	}
	t.Logf("b wrote %.0f task records, %.0f of them held for a and not written by it", written, taken)
}

// The metrics of the shared writing (pg.Store.Written, TakenOver, Held,
// Replicas).
const (
	writtenMetric   = "stamen_store_written_records_total"
	takenOverMetric = "stamen_store_taken_over_records_total"
	heldMetric      = "stamen_store_held_records"
	replicasMetric  = "stamen_store_live_replicas"
)

// sharingFleet starts two replicas, a and b, on a Redis and a PostgreSQL
// database of the test's own, and returns them once both receive the
// events and see each other live (so that they divide the task records
// between them), with a stream of tasks named prefix and the database.
func sharingFleet(t *testing.T, prefix string) ([]*replica, *rateStream, string) {
	t.Helper()
	testcluster.Require(t)
	redis := testcluster.StartRedis(t)
	broker, backend := redis.URL(0), redis.URL(1)
	dsn := testcluster.PostgresURL(testcluster.PostgresAddr, testcluster.PostgresDB(t))
	args := append(fleetArgs(dsn, broker, backend), "--max_tasks", "50000")
	rs := startReplicas(t, buildStamen(t), args, "a", "b")
	s := newRateStream(t, redis, prefix)
	s.awaitSubscribers(t, len(rs))
	eventually(t, 30*time.Second, fmt.Sprintf("every replica seeing %d live", len(rs)), func() bool {
		for _, r := range rs {
			if n, err := r.metric(replicasMetric); err != nil || int(n) != len(rs) {
				return false
			}
		}
		return true
	})
	return rs, s, dsn
}

// TestFleetReplicasShareTheWriting: two replicas ingest every event of a
// stream of 20,000 tasks at 10,000 a second, and write each task once
// between them: each writes about half the records, the rows written in
// PostgreSQL (inserts and updates) are at most 1.2 a task, every task
// ends final, and once the grace period has passed neither holds a
// record for the other. One stopped gracefully leaves the fleet.
func TestFleetReplicasShareTheWriting(t *testing.T) {
	rs, s, dsn := sharingFleet(t, "shared")
	var before int64
	pgRow(t, dsn, `SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0) FROM pg_stat_user_tables WHERE relname = 'stamen_tasks'`, nil, &before)

	const total, rate = 20_000, 10_000
	took := s.publish(t, total, rate, nil)
	t.Logf("published %d tasks in %s (%.0f tasks/s)", total, took.Round(time.Millisecond), total/took.Seconds())
	eventually(t, 2*time.Minute, "every task of the stream SUCCESS in PostgreSQL", func() bool {
		return s.finalInPostgres(t, dsn) == total
	})
	eventually(t, time.Minute, "no record held for the other replica", func() bool {
		for _, r := range rs {
			if n, err := r.metric(heldMetric); err != nil || n != 0 {
				return false
			}
		}
		return true
	})
	var sum float64
	for _, r := range rs {
		n, err := r.metric(writtenMetric)
		if err != nil {
			t.Fatal(err)
		}
		sum += n
		if n < 0.3*total || n > 0.7*total {
			t.Errorf("%s wrote %.0f task records of %d tasks, want about half", r.name, n, total)
		}
	}
	if sum > 1.2*total {
		t.Errorf("the replicas wrote %.0f task records for %d tasks, want at most 1.2 a task", sum, total)
	}
	// The statistics collector reports a backend's counts when its
	// transaction ends, within a second: poll until they are all in.
	var rows int64
	eventually(t, 30*time.Second, "the rows written reported", func() bool {
		pgRow(t, dsn, `SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0) FROM pg_stat_user_tables WHERE relname = 'stamen_tasks'`, nil, &rows)
		return rows-before >= total
	})
	if got := float64(rows - before); got > 1.2*total {
		t.Errorf("%.0f rows written in PostgreSQL for %d tasks, want at most 1.2 a task", got, total)
	}
	t.Logf("the replicas wrote %.0f task records, PostgreSQL %d rows, for %d tasks", sum, rows-before, total)

	// A replica stopped gracefully leaves the fleet as it exits: its row
	// is gone, so that the other owns every task from its next flush.
	a := rs[0]
	a.mu.Lock()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	exited := a.exited
	a.mu.Unlock()
	<-exited
	var live []string
	pgRow(t, dsn, `SELECT coalesce(array_agg(id), '{}') FROM stamen_replicas`, nil, &live)
	if len(live) != 1 {
		t.Errorf("stamen_replicas holds %v after a stopped, want b's row alone", live)
	}
}

// TestFleetPostgresOutageAtRate takes PostgreSQL away from a replica for
// 200,000 tasks, 20 s of a stream of 10,000 tasks a second (cutting a TCP
// proxy between them, as TestFleetPostgresOutage does). The replica's
// bound on unwritten records (--max_tasks, 300,000) holds the outage's
// 200,000 tasks; once PostgreSQL is back every task of the stream ends
// there in its final state, and none was dropped.
func TestFleetPostgresOutageAtRate(t *testing.T) {
	a, redis, proxy, direct := proxiedReplica(t, "--max_tasks", "300000")
	s := newRateStream(t, redis, "outage")
	s.awaitSubscribers(t, 1)

	// 27 s of tasks at 10,000 a second: 3 s with PostgreSQL, 20 s without
	// (200,000 tasks), 4 s with. The cut and the return go by the tasks
	// published, so that a busy machine that publishes slower still
	// brings the outage its 200,000 tasks, over a longer time.
	const rate, total, cutAt, backAt = 10_000, 270_000, 30_000, 230_000
	var cut time.Time
	var away time.Duration
	took := s.publish(t, total, rate, func(sent int) {
		switch {
		case cut.IsZero() && sent >= cutAt:
			proxy.Cut()
			cut = time.Now()
		case !cut.IsZero() && away == 0 && sent >= backAt:
			proxy.Start()
			away = time.Since(cut)
		}
	})
	t.Logf("published %d tasks in %s (%.0f tasks/s); PostgreSQL away for %s, tasks %d to %d",
		total, took.Round(time.Millisecond), total/took.Seconds(), away.Round(time.Millisecond), cutAt, backAt)
	began := time.Now()
	eventually(t, 3*time.Minute, "every task of the stream SUCCESS in PostgreSQL", func() bool {
		return s.finalInPostgres(t, direct) == total
	})
	t.Logf("all %d tasks final in PostgreSQL %s after the last publish", total, time.Since(began).Round(time.Millisecond))
	if lost, err := a.metric(lostMetric); err != nil || lost != 0 {
		t.Errorf("%s = %v (%v), want 0: the outage stayed inside the bound", lostMetric, lost, err)
	}
}
