package pg_test

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/store/pg"
	"github.com/stamen-dev/stamen/internal/tasksearch"
)

// TestIDGramsMatchSQL: the grams the write path sends for an id are those
// stamen_id_grams computes from it in the database, with which the rows
// of a bulk load or an operator's backfill are filled: hex ids of every
// length around a gram's, in upper case, and ids with other characters
// (other letters, bytes beyond ASCII), which have none.
func TestIDGramsMatchSQL(t *testing.T) {
	url := newDB(t)
	openStore(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(t, url)
	for _, id := range []string{"", "a", "ab", "abc", "abcd", "ABCDEF", "ABCDEFG", "694061739e55-4A2B", "d1f0c0de-7c4e-4b8a-9f3e-2a1b0c9d8e7f",
		"D1F0C0DE-7C4E-4B8A-9F3E-2A1B0C9D8E7F", "0123456789", "tâche-É1", "ß", "\u00ff\u00fe\u00fd", "Z@[`{~", "abc/", "ab c"} {
		var want string
		if err := conn.QueryRow(ctx, "SELECT coalesce(stamen_id_grams($1)::text, 'NULL')", id).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := pg.IDGrams(id); got != want {
			t.Errorf("grams of %q: stamen sends %s, the database computes %s", id, got, want)
		}
	}
}

// TestTermGramsCoverEveryOffset: whatever the place of a fragment in an
// id, the grams of one of the fragment's first three offsets are all
// among the id's: the condition that selects the id's row.
func TestTermGramsCoverEveryOffset(t *testing.T) {
	id := "d1f0c0de-7c4e-4b8a-9f3e-2a1b0c9d8e7f"
	idGrams := map[string]bool{}
	for _, g := range strings.Split(strings.Trim(pg.IDGrams(id), "{}"), ",") {
		idGrams[g] = true
	}
	for n := 1; n <= len(id); n++ {
		for at := 0; at+n <= len(id); at++ {
			term := id[at : at+n]
			offsets := pg.TermGrams(term)
			if n < 5 {
				if offsets != nil {
					t.Fatalf("%q (%d bytes) has grams %v: a fragment under 5 bytes covers no whole gram at every place", term, n, offsets)
				}
				continue
			}
			found := slices.ContainsFunc(offsets, func(gs []int32) bool {
				return len(gs) > 0 && !slices.ContainsFunc(gs, func(g int32) bool { return !idGrams[fmt.Sprint(g)] })
			})
			if !found {
				t.Fatalf("%q at %d: no offset's grams %v all in the id's", term, at, offsets)
			}
		}
	}
}

// TestIDFragmentUsesIndexes: a search for an id fragment at 100,000 tasks
// finds its task through the grams' index, the rows written without grams
// (by a replica of an older stamen) through their ids' trigram index, and
// the other fields through the searched text's: no scan of the table. A
// fragment of a row without grams is found too, and a fragment under five
// characters by reading every id.
func TestIDFragmentUsesIndexes(t *testing.T) {
	const n = 100_000
	s := loadTasks(t, 10*time.Second, `INSERT INTO stamen_tasks (id, state, name, args, kwargs, ts, id_grams)
		SELECT id, 'SUCCESS', 'proj.a', '(1, 2)', '{}', i, CASE WHEN i % 100 <> 0 THEN stamen_id_grams(id) END
		FROM (SELECT i, CASE WHEN i % 1000 = 1 THEN 'job-' || i ELSE md5(i::text) END AS id
			FROM generate_series(1, $1::bigint) AS i) AS g`, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hex := func(i, from int) (id, term string) {
		id = fmt.Sprintf("%x", md5sum(i))
		return id, strings.ToUpper(id[from : from+12])
	}
	type find struct{ id, term string }
	var finds []find
	for _, c := range [][2]int{{7, 3}, {12345, 10}, {99_999, 0}, {500, 5}, {4200, 20}} {
		id, term := hex(c[0], c[1])
		finds = append(finds, find{id, term})
	}
	// Ids with other characters have no grams: found through their
	// trigrams, 3 characters up.
	finds = append(finds, find{"job-4001", "JOB-4001"}, find{"job-98001", "98001"}, find{"job-5001", "ob-5"})
	for _, c := range finds {
		id, term := c.id, c.term
		q := state.Query{Limit: 100, Search: term}
		plan, err := s.ExplainList(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"on stamen_tasks_id_grams ", "on stamen_tasks_id ", "on stamen_tasks_search "} {
			if want == "on stamen_tasks_id_grams " && strings.HasPrefix(id, "job-") {
				continue
			}
			if !strings.Contains(plan, want) {
				t.Errorf("%s: the plan reads no index %q:\n%s", term, strings.TrimSpace(want[3:]), plan)
			}
		}
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s: the plan scans the table:\n%s", term, plan)
		}
		ids, _, err := listPG(t, s, q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids, id) {
			t.Errorf("%s: found %v, want %s among them", term, ids, id)
		}
	}
	id := fmt.Sprintf("%x", md5sum(77))
	ids, _, err := listPG(t, s, state.Query{Limit: state.NoLimit, Search: id[9:13]})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ids, id) {
		t.Errorf("the 4-character fragment %s: found %d tasks, not %s", id[9:13], len(ids), id)
	}
}

func md5sum(i int) [16]byte { return md5.Sum([]byte(strconv.Itoa(i))) }

// TestMigrateIDGramsFromVersion9: the tasks an older stamen wrote (no
// grams) and those written after the migration (with them) are found by
// an id fragment as the state finds them, each through its own index.
func TestMigrateIDGramsFromVersion9(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := newDB(t)
	old, err := pg.OpenAtVersion(ctx, pg.Config{URL: url}, 9)
	if err != nil {
		t.Fatal(err)
	}
	st := state.New(state.Config{MaxTasks: 1000, TrackChanges: true})
	dataset(t, st, 120)
	drainTo(t, st, old)
	if err := old.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	_ = old.Close()
	s := openStore(t, url)
	for i := range 40 {
		st.Apply(taskEv(t, "received", fmt.Sprintf("%08x-1111-4000-8000-%012x", i, i), "w0@h", 2000+float64(i), map[string]any{"name": "proj.new"}))
	}
	drainTo(t, st, s)
	var without, with int
	if err := connect(t, url).QueryRow(ctx, `SELECT count(*) FILTER (WHERE id_grams IS NULL), count(*) FILTER (WHERE id_grams IS NOT NULL) FROM stamen_tasks`).Scan(&without, &with); err != nil {
		t.Fatal(err)
	}
	if without != 120 || with != 40 {
		t.Fatalf("%d rows without grams and %d with, want the 120 written before the migration and the 40 after", without, with)
	}
	for _, search := range []string{"0000000a-0000", "0a-0000-40", "1c-1111-4", "0-1111-4", "00000000001", "ext-1", "1111"} {
		t.Run(search, func(t *testing.T) { sameList(t, st, s, state.Query{Limit: state.NoLimit, Search: search}) })
	}
}

// connect opens a connection of its own to the database url, closed when
// the test ends.
func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// TestShortHexTermPastTimeoutIs400: a term of 3 or 4 hex characters is
// looked for in every id, with no index; when that outlasts the read
// timeout the answer is a 400 that says why, not a 503 that a load
// balancer would repeat on another replica.
func TestShortHexTermPastTimeoutIs400(t *testing.T) {
	const n = 400_000 // reading them takes several times the timeout
	s := loadTasks(t, 100*time.Millisecond, `INSERT INTO stamen_tasks (id, state, name, args, kwargs, ts)
		SELECT i::text, 'SUCCESS', 'proj.a', '(1, 2)', '{}', i FROM generate_series(1, $1::bigint) AS i`, n)
	_, _, err := listPG(t, s, state.Query{Limit: 10, Search: "abcd"})
	var se *tasksearch.Error
	if !errors.As(err, &se) || errors.Is(err, history.ErrUnavailable) || !strings.Contains(se.Message, "every task id") {
		t.Fatalf("a 4-character hex term no task holds, over %d tasks: %v; want a *tasksearch.Error saying every id was read", n, err)
	}
}
