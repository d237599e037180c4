package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/store/bolt"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// forgetKeep is TestForgottenNamesStayBounded's --max_workers and
// --max_tasks; forgetRounds how many rounds of new names its outage
// brings.
const forgetKeep, forgetRounds = 5, 60

// forgetStore is a store TestForgottenNamesStayBounded makes fail.
type forgetStore struct {
	name string
	// open returns the store's part of the Config, and the functions
	// that make its writes fail, make them work again, and read the
	// workers' hostnames and the task names it holds once the App is
	// closed.
	open func(t *testing.T) (cfg Config, fail, mend func(a *App), held func(t *testing.T) (workers, types []string))
	// allTypes: the store keeps every task name written (PostgreSQL's
	// history), not only the state's.
	allTypes bool
}

// TestForgottenNamesStayBounded: while the store's writes fail, a
// replica forgets hundreds of worker hostnames and task names (new
// workers push the oldest out of --max_workers, new tasks of new names
// push the oldest out of --max_tasks), flushing every round. The batch
// kept for the next write holds no more names to delete than the state's
// bounds allow, however long the outage; once writes work again the store
// holds exactly the workers the state keeps (none of those forgotten: not
// those written before the outage and forgotten at its start, nor one
// still kept when it started and forgotten later, nor one that came back
// during it and went again; every one kept), and the task names it keeps
// (bbolt: only those; PostgreSQL's history keeps the names it had too).
func TestForgottenNamesStayBounded(t *testing.T) {
	for _, c := range []forgetStore{
		{name: "bbolt", open: func(t *testing.T) (Config, func(*App), func(*App), func(*testing.T) ([]string, []string)) {
			path := filepath.Join(t.TempDir(), "stamen.db")
			var write func(context.Context, history.Batch) error
			fail := func(a *App) {
				write = a.writeBatch
				a.writeBatch = func(context.Context, history.Batch) error { return errors.New("disk full") }
			}
			mend := func(a *App) { a.writeBatch = write }
			held := func(t *testing.T) (workers, types []string) {
				st, err := bolt.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				err = st.Load(func(uint64, []byte) error { return nil }, func(raw []byte) error {
					evs, err := celery.DecodeEvents(raw)
					if err != nil {
						return err
					}
					workers = append(workers, evs[0].Hostname)
					return nil
				}, func(name string) { types = append(types, name) })
				if err != nil {
					t.Fatal(err)
				}
				return workers, types
			}
			return Config{DBPath: path}, fail, mend, held
		}},
		{name: "postgres", allTypes: true, open: func(t *testing.T) (Config, func(*App), func(*App), func(*testing.T) ([]string, []string)) {
			proxy := testcluster.StartProxy(t, testcluster.PostgresAddr)
			db := testcluster.PostgresDB(t)
			held := func(t *testing.T) (workers, types []string) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				conn, err := pgx.Connect(ctx, testcluster.PostgresURL(testcluster.PostgresAddr, db))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				for _, q := range []struct {
					sql string
					out *[]string
				}{{`SELECT hostname FROM stamen_workers`, &workers}, {`SELECT name FROM stamen_task_types`, &types}} {
					rows, err := conn.Query(ctx, q.sql)
					if err != nil {
						t.Fatal(err)
					}
					if *q.out, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
						t.Fatal(err)
					}
				}
				return workers, types
			}
			// The cut refuses connections at once, so the timeout does not
			// pace the outage; it only needs room for a connection on a
			// busy machine (500 ms was too short for one).
			return Config{DBPath: testcluster.PostgresURL(proxy.Addr(), db), DBTimeout: 5 * time.Second},
				func(*App) { proxy.Cut() }, func(*App) { proxy.Start() }, held
		}},
	} {
		// The outage's first round is heard before the first failing
		// flush drains the state, or while it writes, after its drain:
		// the workers and task names written before the outage that the
		// round pushes out are named by that drain, or by the next only.
		for _, during := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/first round heard during the write %v", c.name, during), func(t *testing.T) {
				forgetDuringOutage(t, c, during)
			})
		}
	}
}

// forgetDuringOutage is TestForgottenNamesStayBounded on store c, during
// saying when the outage's first round is heard.
func forgetDuringOutage(t *testing.T, c forgetStore, during bool) {
	const keep, rounds = forgetKeep, forgetRounds
	cfg, fail, mend, held := c.open(t)
	cfg.EmbeddedAddr = fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))
	cfg.MaxWorkers, cfg.MaxTasks = keep, keep
	cfg.SaveInterval = time.Hour // the test flushes by hand
	a := openApp(t, cfg)

	var dec celery.EventDecoder
	// As the App's run context does, this one ends the discoveries of
	// the workers (Observe starts them) before Close waits for them.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	at := float64(time.Now().Add(-time.Hour).UnixMicro()) / 1e6
	// Each event is received a millisecond after the one before:
	// the state forgets the worker heard longest ago.
	received := float64(time.Now().UnixMicro()) / 1e6
	apply := func(payload []byte) {
		t.Helper()
		evs, err := dec.Decode(payload)
		if err != nil {
			t.Fatal(err)
		}
		for i := range evs {
			received += 0.001
			evs[i].LocalReceived = received
		}
		a.State.Apply(evs...)
		for i := range evs {
			a.ingester.Observe(ctx, &evs[i], 0)
		}
	}
	// A round brings tasks of names (run by steady@h), then a
	// heartbeat of each of workers, then one of steady@h: steady@h
	// and the names' type "steady.Task" are always kept, the rest
	// go the round after.
	task := 0
	round := func(workers, names []string) {
		t.Helper()
		for _, n := range append(names, "steady.Task") {
			apply(taskEnvelope(fmt.Sprintf("00000000-0000-4000-8000-%012d", task), n, "steady@h", task, at))
			task++
		}
		for _, w := range append(workers, "steady@h") {
			apply(workerEnvelope("heartbeat", w, at))
		}
	}
	names := func(r int) (workers, types []string) {
		for i := range keep - 1 {
			workers = append(workers, fmt.Sprintf("celery@pod-%d-%d", r, i))
			types = append(types, fmt.Sprintf("proj.Task%d_%d", r, i))
		}
		return workers, types
	}

	// Before the outage: written. late@h beats, and a task of late.Task
	// comes, in each round of the outage's first quarter (pushing out
	// one new worker and one new task a round meanwhile); both are
	// forgotten then.
	workers, types := names(-1)
	round(append(workers, "late@h"), append(types, "late.Task"))
	if err := a.flush(context.Background()); err != nil {
		t.Fatalf("flush before the outage: %v", err)
	}
	fail(a)
	for r := range rounds {
		workers, types := names(r)
		if r < rounds/4 {
			workers, types = append(workers, "late@h"), append(types, "late.Task")
		}
		if r == rounds/2 {
			// A worker and a task name written before the outage,
			// forgotten in its first round, come back, and go again
			// the round after: the store still holds them.
			back, backType := names(-1)
			workers[0], types[0] = back[0], backType[0]
		}
		if r == 0 && during {
			// The flush has steady@h's event to write: PostgreSQL's
			// Write of an empty batch writes nothing, and succeeds.
			apply(workerEnvelope("heartbeat", "steady@h", at))
			failing := a.writeBatch
			a.writeBatch = func(ctx context.Context, b history.Batch) error {
				a.writeBatch = failing
				round(workers, types)
				return failing(ctx, b)
			}
		} else {
			round(workers, types)
		}
		if err := a.flush(context.Background()); err == nil {
			t.Fatalf("round %d: the flush succeeded during the outage", r)
		}
		// The names the store may hold: the state's bound (keep,
		// for workers and for task names alike), and what two
		// flushes forgot (keep each).
		unsaved, _ := a.buffer.Pending()
		if w, ty := len(unsaved.ForgottenWorkers), len(unsaved.ForgottenTypes); w > 3*keep || ty > 3*keep {
			t.Fatalf("round %d: the kept batch names %d forgotten workers and %d forgotten types, want at most %d",
				r, w, ty, 3*keep)
		}
		if c.allTypes && len(unsaved.ForgottenTypes) > 0 {
			t.Fatalf("round %d: the kept batch names forgotten types %v, which PostgreSQL never deletes", r, unsaved.ForgottenTypes)
		}
	}
	mend(a)
	testcluster.Eventually(t, 10*time.Second, "a flush succeeding after the outage", func() bool { return a.flush(context.Background()) == nil })
	cancel()
	a.Close()

	keptWorkers, keptTypes := a.State.WorkerNames(), a.State.TaskTypes()
	workers, types = held(t)
	slices.Sort(keptWorkers)
	slices.Sort(workers)
	if !slices.Equal(workers, keptWorkers) {
		t.Errorf("the store holds workers %v, the state keeps %v", workers, keptWorkers)
	}
	switch {
	case !c.allTypes && !slices.Equal(types, keptTypes):
		t.Errorf("the store holds task names %v, the state keeps %v", types, keptTypes)
	case c.allTypes:
		for _, name := range keptTypes {
			if !slices.Contains(types, name) {
				t.Errorf("the store lacks the task name %s, which the state keeps (it holds %v)", name, types)
			}
		}
	}
	if len(keptWorkers) != keep || len(keptTypes) != keep {
		t.Errorf("the state keeps workers %v and task names %v, want %d of each", keptWorkers, keptTypes, keep)
	}
}
