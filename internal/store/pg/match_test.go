package pg_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/store/pg"
	"github.com/stamen-dev/stamen/internal/tasksearch"
)

// failureSet adds failed tasks to st: three task names and one without a
// name, exception reprs that ExceptionType folds together (spaces before
// the parenthesis, Unicode spaces, none at all), groups of more than
// FailureExamples, failures at the same time (ties go by id), some without
// a traceback, some received long before the others.
func failureSet(t testing.TB, st *state.State) {
	t.Helper()
	excs := []string{"ValueError('a')", " ValueError ('b')", "ValueError", "mod.Error()", "", "\u00a0(x)", "KeyError('k (1)')", "\u2003OSError\t(2)"}
	for i := range 60 {
		id := fmt.Sprintf("f%07d-0000-4000-8000-%012x", i, i)
		w := fmt.Sprintf("w%d@h", i%2)
		// Every 4 tasks fail at the same second, and some received at 500.
		ts := 3000 + float64(i/4)
		recv := ts - 1
		if i%9 == 0 {
			recv = 500
		}
		failed := map[string]any{"exception": excs[i%len(excs)]}
		if i%5 != 0 {
			failed["traceback"] = fmt.Sprintf("Traceback %d", i)
		}
		if i%11 == 10 {
			// Never received: no name.
			st.Apply(taskEv(t, "failed", id, w, ts, failed))
			continue
		}
		st.Apply(taskEv(t, "received", id, w, recv, map[string]any{"name": []string{"proj.a", "Proj.B", "proj.c"}[i%3], "args": "()", "kwargs": "{}"}))
		st.Apply(taskEv(t, "failed", id, w, ts, failed))
	}
	// Failures whose timestamp is not their failure time: a task-started
	// that comes after the task-failed is copied in, timestamp included.
	// One failed last but stamped long before, so newest of its group
	// though far down the newest-first list, in a group whose other
	// failures are the newest of all and one that has just a few; one
	// stamped after every other failure though it failed first; a rare
	// group of three.
	late := []struct {
		name, exc     string
		failed, stamp float64
	}{
		{"proj.d", "LateError()", 3300, 3300},
		{"proj.d", "LateError()", 3301, 3301},
		{"proj.d", "LateError()", 3302, 3302},
		{"proj.d", "LateError()", 3303, 3303},
		{"proj.d", "LateError()", 3304, 3304},
		{"proj.d", "LateError()", 3305, 3305},
		{"proj.d", "LateError()", 3400, 11},
		{"proj.a", "ValueError('late')", 3100, 10},
		{"proj.a", "ValueError('early')", 1, 3200},
		{"proj.c", "RareError()", 2990, 2990},
		{"proj.c", "RareError()", 2995, 2995},
		{"proj.c", "RareError()", 2995, 2995},
	}
	for i, l := range late {
		id := fmt.Sprintf("l%07d-0000-4000-8000-%012x", i, i)
		st.Apply(taskEv(t, "received", id, "w0@h", l.failed-1, map[string]any{"name": l.name, "args": "()", "kwargs": "{}"}))
		st.Apply(taskEv(t, "failed", id, "w0@h", l.failed, map[string]any{"exception": l.exc, "traceback": "late " + l.exc}))
		if l.stamp != l.failed {
			st.Apply(taskEv(t, "started", id, "w0@h", l.stamp, nil))
		}
	}
	// Exception reprs longer than the failures' index holds (the store
	// reads them through another index): in groups of short ones too, one
	// the newest of its group, one the oldest, one tied in failure time
	// with a short one; one with no parenthesis (its type is all of it);
	// one whose type starts with spaces. And failures without a failed
	// time (a task-failure event sets the state but not the time, so the
	// timestamp is the failure time), without an exception (unknown), and
	// tied with others of their group.
	long := strings.Repeat("x", 900)
	odd := []struct {
		kind, name    string
		exc           any
		failed, stamp float64
	}{
		{"failed", "proj.a", "ValueError('" + long + "')", 3500, 3500},
		{"failed", "proj.a", "KeyError('" + long + "')", 100, 100},
		{"failed", "proj.b", "mod.Error('" + long + "')", 3010, 3010},
		{"failed", "proj.b", "mod.Error('tie')", 3010, 3010},
		{"failed", "proj.c", "NoParen" + long, 3020, 3020},
		{"failed", "proj.c", "NoParen" + long, 3021, 3021},
		{"failed", "proj.c", "\u2003\tSpaced" + long + "(1)", 3022, 3022},
		{"failed", "proj.c", " Spaced('s')", 3022, 3022},
		{"failure", "proj.e", "NullError('a')", 0, 3600},
		{"failure", "proj.e", "NullError('b')", 0, 3600},
		{"failed", "proj.e", "NullError('c')", 3600, 3599},
		{"failed", "proj.e", "NullError('d')", 3601, 3601},
		{"failure", "proj.e", nil, 0, 3602},
		{"failed", "proj.e", nil, 3603, 3603},
		{"failed", "proj.e", "", 3603, 3603},
		// Incompressible reprs without a parenthesis, at the short
		// index's bound and past what a b-tree entry can hold.
		{"failed", "proj.e", noise(800), 3604, 3604},
		{"failed", "proj.e", noise(3000), 3605, 3605},
	}
	for i, o := range odd {
		id := fmt.Sprintf("o%07d-0000-4000-8000-%012x", i, i)
		st.Apply(taskEv(t, "received", id, "w1@h", o.stamp-1, map[string]any{"name": o.name, "args": "()", "kwargs": "{}"}))
		fields := map[string]any{"traceback": fmt.Sprintf("odd %d", i)}
		if o.exc != nil {
			fields["exception"] = o.exc
		}
		ts := o.stamp
		if o.kind == "failed" {
			ts = o.failed
		}
		st.Apply(taskEv(t, o.kind, id, "w1@h", ts, fields))
		if o.kind == "failed" && o.stamp != o.failed {
			st.Apply(taskEv(t, "started", id, "w1@h", o.stamp, nil))
		}
	}
}

// noise is n bytes of hex that pglz does not compress.
func noise(n int) string {
	var b strings.Builder
	for x := uint64(1); b.Len() < n; x = x*6364136223846793005 + 1442695040888963407 {
		fmt.Fprintf(&b, "%016x", x)
	}
	return b.String()[:n]
}

func sortGroups(gs []state.FailureGroup) {
	slices.SortFunc(gs, func(a, b state.FailureGroup) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ExceptionType, b.ExceptionType))
	})
}

// TestFailuresMatchState: GET /api/failures's groups, for each filter it
// takes, are the same from PostgreSQL as from the in-memory state holding
// the same events: names, exception types, counts, times, the examples in
// their order and the traceback.
func TestFailuresMatchState(t *testing.T) {
	s := openStore(t, newDB(t))
	st := state.New(state.Config{MaxTasks: 1000, TrackChanges: true})
	dataset(t, st, 120)
	failureSet(t, st)
	drainTo(t, st, s)
	at := func(sec int64) *time.Time { x := time.Unix(sec, 0); return &x }
	failuresMatch(t, s, st, at)
}

// TestMigrateFailuresFromVersion3: a database an older stamen left at
// version 3, holding failures, is migrated to 4 when a replica opens it:
// the failures' indexes are built over the rows already there, and the
// groups read through them match the state's.
func TestMigrateFailuresFromVersion3(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := newDB(t)
	old, err := pg.OpenAtVersion(ctx, pg.Config{URL: url}, 3)
	if err != nil {
		t.Fatal(err)
	}
	st := state.New(state.Config{MaxTasks: 1000, TrackChanges: true})
	dataset(t, st, 120)
	failureSet(t, st)
	drainTo(t, st, old)
	_ = old.Close()
	s := openStore(t, url)
	if v, err := s.SchemaVersion(ctx); err != nil || v != pg.LatestVersion() {
		t.Fatalf("schema version %d, %v; want %d", v, err, pg.LatestVersion())
	}
	at := func(sec int64) *time.Time { x := time.Unix(sec, 0); return &x }
	failuresMatch(t, s, st, at)
}

func failuresMatch(t *testing.T, s *pg.Store, st *state.State, at func(int64) *time.Time) {
	for _, q := range []state.Query{
		{State: "FAILURE"},
		{State: "FAILURE", TaskName: "proj.b"},
		{State: "FAILURE", TaskName: "proj.a"},
		{State: "FAILURE", TaskName: "nope"},
		{State: "FAILURE", ReceivedStart: at(1000)},
		{State: "FAILURE", ReceivedEnd: at(1000)},
		{State: "FAILURE", ReceivedStart: at(2900), ReceivedEnd: at(3005)},
		{State: "FAILURE", Worker: "w1@h", Limit: 3, Offset: 2, SortBy: "name"},
		{State: "failure", TaskName: "PROJ.E"},
		{State: "FAILURE", TaskName: "proj.c", ReceivedStart: at(2000)},
		{State: "FAILURE", ReceivedStart: at(2900), ReceivedEnd: at(3700)},
		// Another state is grouped too (the handler passes FAILURE).
		{State: "SUCCESS"},
	} {
		t.Run(fmt.Sprintf("%+v", q), func(t *testing.T) {
			want, err := st.Failures(q)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Failures(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			sortGroups(want)
			sortGroups(got)
			if len(want) == 0 && q.TaskName != "nope" && q.State != "SUCCESS" {
				t.Fatal("the state has no failures: the test compares nothing")
			}
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Fatalf("groups (-state +postgres):\n%s", diff)
			}
		})
	}
}

// TestMatchTasksMatchesState: the selection of the bulk operations, the
// first max ids and whether more match, is the same from PostgreSQL as
// from the in-memory state, for each filter and search and a max under,
// at and over the number of matches.
func TestMatchTasksMatchesState(t *testing.T) {
	s := openStore(t, newDB(t))
	st := state.New(state.Config{MaxTasks: 1000, TrackChanges: true})
	dataset(t, st, 300)
	failureSet(t, st)
	drainTo(t, st, s)
	at := func(sec int64) *time.Time { x := time.Unix(sec, 0); return &x }
	for _, q := range []state.Query{
		{},
		{State: "FAILURE"},
		{State: "failure", TaskName: "PROJ.A"},
		{Worker: "w1@h", State: "STARTED"},
		{ReceivedStart: at(1100), ReceivedEnd: at(1200)},
		{ReceivedStart: at(1100)},
		{Search: "state:retry"},
		{Search: `name:sleep args:"x3'"`},
		{State: "NOPE"},
		{Search: "kwargs:k=1"},
		{Search: "kwargs:f=1.5 OR state:retry"},
		{IDs: []string{"00000000-0000-4000-8000-000000000000", "text-6", "f0000003-0000-4000-8000-000000000003", "nope", "text-13"}},
		{IDs: []string{"f0000003-0000-4000-8000-000000000003", "f0000004-0000-4000-8000-000000000004", "text-6"}, State: "FAILURE"},
		{IDs: []string{}},
	} {
		all, _, err := st.Match(q, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		for _, max := range []int{1, max(len(all)-1, 1), max(len(all), 1), len(all) + 1} {
			t.Run(fmt.Sprintf("%+v max %d", q, max), func(t *testing.T) {
				wantIDs, wantMore, err := st.Match(q, max)
				if err != nil {
					t.Fatal(err)
				}
				gotIDs, gotMore, err := s.MatchTasks(context.Background(), q, max)
				if err != nil {
					t.Fatal(err)
				}
				if diff := gocmp.Diff(wantIDs, gotIDs, cmpopts.EquateEmpty()); diff != "" || gotMore != wantMore {
					t.Fatalf("more %v, want %v; ids (-state +postgres):\n%s", gotMore, wantMore, diff)
				}
				if wantMore != (len(all) > max) {
					t.Fatalf("the state says more=%v with %d matches over max %d", wantMore, len(all), max)
				}
			})
		}
	}
	// Failures refuses a kwargs:key=value search with the state's error
	// type (400): its groups are counted in SQL, where the pair cannot be
	// checked.
	var se *tasksearch.Error
	if _, err := s.Failures(context.Background(), state.Query{Search: "kwargs:k=1"}); !errors.As(err, &se) {
		t.Errorf("failures with a kwargs pair: %v, want a *tasksearch.Error", err)
	}
}

// TestListKwargsPairTooBroad: a kwargs:key=value search whose words are in
// every task while the pair is in none reads and checks every row; past
// the read timeout it is a 400 that says why (*tasksearch.Error), not a
// 503 as for an outage. A pair that fills its page early answers within
// the same timeout.
func TestListKwargsPairTooBroad(t *testing.T) {
	const n = 250_000 // checking them takes several times the timeout
	s := loadTasks(t, 300*time.Millisecond, `INSERT INTO stamen_tasks (id, state, name, kwargs, ts)
		SELECT format('t-%s', i), 'SUCCESS', 'proj.add', format('{''region'': ''eu-%s''}', i % 7), i
		FROM generate_series(1, $1::bigint) AS i`, n)
	ids, _, err := listPG(t, s, state.Query{Limit: 100, Search: "kwargs:region=eu-3"})
	if err != nil || len(ids) != 100 {
		t.Fatalf("kwargs:region=eu-3: %d tasks, %v; want 100", len(ids), err)
	}
	_, _, err = listPG(t, s, state.Query{Limit: 100, Search: "kwargs:region=eu"})
	var se *tasksearch.Error
	if !errors.As(err, &se) || errors.Is(err, history.ErrUnavailable) || !strings.Contains(err.Error(), "checked") {
		t.Fatalf("kwargs:region=eu over %d tasks: %v, want a *tasksearch.Error saying how many were checked", n, err)
	}
}

// TestFailureSpaces: the spaces the failures' index trims from an
// exception type are the ones state.ExceptionType trims.
func TestFailureSpaces(t *testing.T) {
	if pg.SQLSpaces != state.Spaces {
		t.Fatalf("the index trims %+q, the state %+q", pg.SQLSpaces, state.Spaces)
	}
}

// TestFailuresUseIndexes: the statement of the whole history's groups
// reads the failures through the indexes of migration 4, the counts from
// the index alone: each index's WHERE is implied by the statement's and
// its expressions are spelled the same. 100,000 tasks, a tenth of them
// failed, vacuumed and analyzed, as the fleet's are by autovacuum.
func TestFailuresUseIndexes(t *testing.T) {
	s := loadTasks(t, 10*time.Second, `INSERT INTO stamen_tasks (id, state, name, exception, failed, ts)
		SELECT format('t-%s', i), CASE WHEN i % 10 = 0 THEN 'FAILURE' ELSE 'SUCCESS' END,
			(ARRAY['proj.a', 'proj.b', 'proj.c'])[i % 3 + 1],
			CASE WHEN i % 10 = 0 THEN 'ValueError(''boom'')' END, CASE WHEN i % 10 = 0 THEN i END, i
		FROM generate_series(1, $1::bigint) AS i`, 100_000)
	for _, q := range []state.Query{
		{State: "FAILURE"},
		{State: "FAILURE", TaskName: "proj.a"},
	} {
		t.Run(fmt.Sprintf("%+v", q), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			plan, err := s.ExplainFailures(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			// The long exceptions' index is empty here: how it is read
			// does not matter, that it is does.
			for _, want := range []string{"Index Only Scan using stamen_tasks_failures on", "Index Only Scan Backward using stamen_tasks_failures on",
				"stamen_tasks_failures_long"} {
				if !strings.Contains(plan, want) {
					t.Errorf("the plan has no %q:\n%s", want, plan)
				}
			}
			if strings.Contains(plan, "Seq Scan") {
				t.Errorf("the plan scans the table:\n%s", plan)
			}
		})
	}
}
