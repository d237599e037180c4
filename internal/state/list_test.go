package state

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// family is n tasks in canonical uuid form, every third the child of the
// one before, with text ids among them, started at 100 + i.
func family(t testing.TB, s *State, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		if i%5 == 4 {
			id = fmt.Sprintf("text-%d", i)
		}
		extra := map[string]any{"name": []string{"a", "B", "c"}[i%3], "args": fmt.Sprintf("(%d,)", i), "root_id": id}
		if i%3 == 1 && i%5 != 0 {
			parent := fmt.Sprintf("%08x-0000-4000-8000-%012x", i-1, i-1)
			extra["parent_id"], extra["root_id"] = parent, parent
		}
		s.Apply(taskEv(t, "received", id, fmt.Sprintf("w%d@h", i%2), float64(100+i), extra))
		if i%2 == 0 {
			s.Apply(taskEv(t, "started", id, fmt.Sprintf("w%d@h", i%2), float64(100+i)+0.5, nil))
		}
	}
}

// listed reads all of l as the handler does, a chunk of chunk tasks at a
// time, and returns the ids and each task's list form.
func listed(l *TaskList, chunk int) (ids []string, body []string) {
	for more := true; more; {
		more = l.Next(chunk, func(t *taskrec.Task) {
			ids = append(ids, strings.Clone(t.UUID)) // a view
			body = append(body, string(t.AppendListJSON(nil)))
		})
	}
	return ids, body
}

// TestListEqualsTasks: the records List writes from views of the state
// are those Tasks copies out, in the same order, for every kind of query.
func TestListEqualsTasks(t *testing.T) {
	s := New(Config{MaxTasks: 1000})
	family(t, s, 200)
	start := time.Unix(150, 0)
	for _, q := range []Query{
		{Limit: NoLimit},
		{Limit: 7, Offset: 3},
		{Limit: NoLimit, SortBy: "name"},
		{Limit: NoLimit, SortBy: "-started"},
		{Limit: NoLimit, SortBy: "received", Offset: 10},
		{Limit: NoLimit, State: "STARTED"},
		{Limit: NoLimit, TaskName: "b", Worker: "w1@h"},
		{Limit: NoLimit, ReceivedStart: &start},
		{Limit: NoLimit, Search: `args:"(19" OR text-1`},
		{Limit: NoLimit, Search: `args:"(19" OR text-1`, Offset: 4, SortBy: "-name"},
		{Limit: NoLimit, Search: `args:"(19" OR text-1`, Offset: 400},
		{Limit: 5, Search: `args:"(19" OR text-1`, Offset: 2},
		{Limit: 0},
	} {
		want, err := s.Tasks(q)
		if err != nil {
			t.Fatal(err)
		}
		var wantBody []string
		for i := range want {
			wantBody = append(wantBody, string(want[i].AppendListJSON(nil)))
		}
		l, err := s.List(q)
		if err != nil {
			t.Fatal(err)
		}
		if q.Search == "" && l.Len() != len(want) {
			t.Errorf("%+v: List selects %d tasks, Tasks %d", q, l.Len(), len(want))
		}
		_, got := listed(l, 16)
		if diff := cmp.Diff(wantBody, got); diff != "" {
			t.Errorf("%+v (-Tasks +List):\n%s", q, diff)
		}
	}
	if _, err := s.List(Query{Search: "ab"}); err == nil {
		t.Error("an invalid search is no error")
	}
}

// TestListSkipsTasksGoneMidway evicts and expires tasks between the chunks
// of a list: they are skipped, and tasks created since are not listed.
func TestListSkipsTasksGoneMidway(t *testing.T) {
	s := New(Config{MaxTasks: 20})
	family(t, s, 20)
	l, err := s.List(Query{Limit: NoLimit, SortBy: "received"}) // oldest first
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	l.Next(3, func(t *taskrec.Task) { ids = append(ids, strings.Clone(t.UUID)) })
	// Five new tasks take the slots of the five oldest, three of them
	// listed already; then the next two oldest expire.
	for i := range 5 {
		s.Apply(taskEv(t, "received", fmt.Sprintf("new-%d", i), "w@h", float64(1000+i), nil))
	}
	if n := s.Expire(time.Unix(107, 0)); n != 2 {
		t.Fatalf("expired %d tasks, want 2", n)
	}
	more, _ := listed(l, 4)
	ids = append(ids, more...)
	var want []string
	for i := range 20 {
		if i >= 3 && i < 7 {
			continue
		}
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		if i%5 == 4 {
			id = fmt.Sprintf("text-%d", i)
		}
		want = append(want, id)
	}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
}

// TestListViewAllocatesNothing: writing a chunk of tasks, with parents,
// roots and children, allocates nothing per task, so that listing a
// million leaves no garbage for the collector to catch up with.
func TestListViewAllocatesNothing(t *testing.T) {
	s := New(Config{MaxTasks: 1000})
	family(t, s, 300)
	l, err := s.List(Query{Limit: NoLimit})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 1<<20)
	write := func(t *taskrec.Task) { buf = t.AppendListJSON(buf) }
	l.Next(300, write) // sizes the list's buffers
	allocs := testing.AllocsPerRun(10, func() {
		l.next, buf = 0, buf[:0]
		l.Next(300, write)
	})
	if allocs != 0 {
		t.Errorf("%v allocations writing 300 tasks", allocs)
	}
}

// TestListByIDs: a query with IDs selects, in the query's order and page,
// exactly the tasks the same query without IDs lists that have one of the
// ids (exact: a UUID in upper case is another id); unknown ids and
// duplicates change nothing, an empty list selects nothing, and Match
// bounds the selection as it does without ids.
func TestListByIDs(t *testing.T) {
	s := New(Config{MaxTasks: 1000})
	family(t, s, 200)
	ids := []string{"00000000-0000-4000-8000-000000000000", "text-4", "text-19", "0000000a-0000-4000-8000-00000000000a",
		"0000000B-0000-4000-8000-00000000000B", "00000011-0000-4000-8000-000000000011", "nope", "text-4",
		"00000021-0000-4000-8000-000000000021", "0000007c-0000-4000-8000-00000000007c"}
	set := map[string]bool{}
	for _, id := range ids {
		set[id] = true
	}
	for _, q := range []Query{
		{Limit: NoLimit},
		{Limit: 2, Offset: 1},
		{Limit: NoLimit, State: "STARTED"},
		{Limit: NoLimit, SortBy: "-name"},
		{Limit: NoLimit, SortBy: "started"},
		{Limit: 3, SortBy: "received", Offset: 1},
		{Limit: NoLimit, Search: `args:"(17," OR text-19`},
		{Limit: NoLimit, TaskName: "b", Worker: "w1@h"},
	} {
		all := q
		all.Limit, all.Offset = NoLimit, 0
		every, err := s.Tasks(all)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range every {
			if set[every[i].UUID] {
				want = append(want, every[i].UUID)
			}
		}
		want = want[min(max(q.Offset, 0), len(want)):]
		if q.Limit != NoLimit {
			want = want[:min(q.Limit, len(want))]
		}
		q.IDs = ids
		l, err := s.List(q)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := listed(l, 2)
		if len(want) == 0 && q.Search == "" {
			t.Fatalf("%+v: no task to select, the test proves nothing", q)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", q, diff)
		}
	}
	for _, id := range []string{"0000000b-0000-4000-8000-00000000000b"} {
		if got, _, _ := s.Match(Query{IDs: ids}, 100); contains(got, id) {
			t.Errorf("the upper-case id selected %s", id)
		}
	}
	if got, more, err := s.Match(Query{IDs: []string{}}, 10); err != nil || len(got) != 0 || more {
		t.Errorf("empty ids: %v, more %v, %v; want nothing", got, more, err)
	}
	got, more, err := s.Match(Query{IDs: ids}, 3)
	if err != nil || len(got) != 3 || !more {
		t.Errorf("max 3 of 7 ids: %v, more %v, %v", got, more, err)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
