package state

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// chunkID is the id of the n-th task of a chunk test: ids order as n.
func chunkID(n int) string { return fmt.Sprintf("%08x-0000-4000-8000-000000000000", n) }

// addNamedA adds tasks 100 to 102, received and named "a", first by
// name: in a state of 100 tasks they evict tasks 0 to 2.
func addNamedA(t testing.TB, s *State) {
	t.Helper()
	for n := 100; n < 103; n++ {
		s.Apply(taskEv(t, "received", chunkID(n), "w1@h", float64(1000+n), map[string]any{"name": "a"}))
	}
}

// chunkIDs are the ids of tasks from to to-1, in order.
func chunkIDs(from, to int) []string {
	var out []string
	for n := from; n < to; n++ {
		out = append(out, chunkID(n))
	}
	return out
}

// addChunkTask adds task n, named n%04d, received, and started unless
// receivedOnly is set.
func addChunkTask(t testing.TB, s *State, n int, receivedOnly bool) {
	t.Helper()
	ts := float64(1000 + n)
	s.Apply(taskEv(t, "received", chunkID(n), "w1@h", ts, map[string]any{"name": fmt.Sprintf("n%04d", n)}))
	if !receivedOnly {
		s.Apply(taskEv(t, "started", chunkID(n), "w1@h", ts+0.1, nil))
	}
}

// TestSortedPageBetweenChunks changes the state while a sorted page is
// being selected in chunks, and checks that the lock is free between
// chunks and that the page is the one a selection under one lock gives
// after the change.
func TestSortedPageBetweenChunks(t *testing.T) {
	defer func(was int) { selectChunk = was }(selectChunk)
	selectChunk = 7
	defer func() { chunkGap = nil }()

	for _, tc := range []struct {
		name string
		// received lists the tasks left RECEIVED; the others are STARTED.
		received []int
		q        Query
		// gap changes s in the first gap; want is the page's ids.
		gap  func(t *testing.T, s *State)
		want func(s *State, q Query) []string
	}{{
		name: "lock free in the gap",
		q:    Query{Limit: 5, SortBy: "-name"},
		gap: func(t *testing.T, s *State) {
			if !s.mu.TryLock() {
				t.Error("the state's lock is held between chunks")
				return
			}
			s.mu.Unlock()
		},
		want: scanTasks,
	}, {
		// n0099 is kept from the first chunk; once it no longer matches,
		// n0094 belongs on the page, and only a new selection finds it.
		name: "listed task stops matching",
		q:    Query{Limit: 5, SortBy: "-name", State: "STARTED"},
		gap: func(t *testing.T, s *State) {
			s.Apply(taskEv(t, "succeeded", chunkID(99), "w1@h", 2000, nil))
		},
		want: scanTasks,
	}, {
		// The newest five are RECEIVED, first by state; once n0099 is
		// STARTED it sorts after n0000, which only a new selection finds.
		name:     "listed task moves later",
		received: []int{95, 96, 97, 98, 99},
		q:        Query{Limit: 5, SortBy: "state"},
		gap: func(t *testing.T, s *State) {
			s.Apply(taskEv(t, "started", chunkID(99), "w1@h", 2000, nil))
		},
		want: scanTasks,
	}, {
		// n0098 SUCCESS sorts first descending: it stays, re-sorted.
		name: "listed task moves earlier",
		q:    Query{Limit: 5, SortBy: "-state"},
		gap: func(t *testing.T, s *State) {
			s.Apply(taskEv(t, "succeeded", chunkID(98), "w1@h", 2000, nil))
		},
		want: scanTasks,
	}, {
		// Three new tasks, first by name, evict n0000-n0002 before their
		// chunk is read.
		name: "evicted and added in a gap",
		q:    Query{Limit: 5, SortBy: "name"},
		gap: func(t *testing.T, s *State) {
			addNamedA(t, s)
		},
		want: func(*State, Query) []string {
			return []string{chunkID(100), chunkID(101), chunkID(102), chunkID(3), chunkID(4)}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{MaxTasks: 100})
			for n := range 100 {
				addChunkTask(t, s, n, slices.Contains(tc.received, n))
			}
			gaps := 0
			chunkGap = func() {
				if gaps++; gaps == 1 {
					tc.gap(t, s)
				}
			}
			got, err := s.Tasks(tc.q)
			chunkGap = nil
			if err != nil {
				t.Fatal(err)
			}
			if gaps == 0 {
				t.Fatal("the page was selected under one lock")
			}
			if diff := gocmp.Diff(tc.want(s, tc.q), ids(got)); diff != "" {
				t.Errorf("page (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSortedPagesWhileApplying selects sorted pages, and an unpaged
// sorted list, in chunks of a few tasks while another goroutine adds
// tasks and evicts the oldest (the race detector checks the locking), and
// checks every answer: full, all matching, in order.
func TestSortedPagesWhileApplying(t *testing.T) {
	defer func(was int) { selectChunk = was }(selectChunk)
	selectChunk = 5
	s := New(Config{MaxTasks: 200})
	for n := range 200 {
		addChunkTask(t, s, n, n%3 == 0)
	}
	applied := make(chan struct{})
	var feed []func()
	for n := 200; n < 2200; n++ {
		received := taskEv(t, "received", chunkID(n), "w1@h", float64(1000+n), map[string]any{"name": fmt.Sprintf("n%04d", n%300)})
		started := taskEv(t, "started", chunkID(n), "w1@h", float64(1000+n)+0.1, nil)
		feed = append(feed, func() { s.Apply(received); s.Apply(started) })
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(applied)
		for _, f := range feed {
			f()
		}
	})
	pages := 0
	for done := false; !done; pages++ {
		select {
		case <-applied:
			done = true
		default:
		}
		for _, q := range []Query{
			{Limit: 20, SortBy: "name", State: "STARTED"},
			{Limit: 20, SortBy: "-name", State: "STARTED"},
			{Limit: NoLimit, SortBy: "-name", State: "STARTED"},
		} {
			sortBy := q.SortBy
			got, err := s.Tasks(q)
			if err != nil {
				t.Fatal(err)
			}
			// An unpaged list leaves out the tasks evicted while it is
			// selected, which here may be all of them.
			if q.Limit != NoLimit && len(got) != 20 {
				t.Fatalf("%+v: %d tasks", q, len(got))
			}
			for _, task := range got {
				if task.State != "STARTED" {
					t.Fatalf("%s is %s, want STARTED", task.UUID, task.State)
				}
			}
			sorted := slices.IsSortedFunc(got, func(a, b taskrec.Task) int {
				c := cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.UUID, b.UUID))
				if sortBy[0] == '-' {
					return -c
				}
				return c
			})
			if !sorted {
				t.Fatalf("sort_by=%s page out of order: %v", sortBy, ids(got))
			}
		}
	}
	wg.Wait()
	if pages < 2 {
		t.Fatalf("only %d pages ran while applying", pages)
	}
}

// TestUnpagedSortBetweenChunks changes the state while an unpaged list
// sorted by name or state is being selected, and checks the lock is free
// in the gaps and the answer is the list's contract: the tasks there
// were when it began, each placed as it was when its chunk was read,
// written as it is then, left out if evicted before it is written.
func TestUnpagedSortBetweenChunks(t *testing.T) {
	defer func() { chunkGap = nil }()
	for _, tc := range []struct {
		name  string
		chunk int
		q     Query
		// gap changes s in gap number at (or checks the state's lock).
		at        int
		gap       func(t *testing.T, s *State)
		wantGaps  int
		want      []string
		wantState map[string]string // states written, by id
	}{{
		// Under the threshold the matches are gathered under one lock;
		// the only gap is the sort's.
		name:     "sorted with the lock free",
		chunk:    selectChunk,
		q:        Query{Limit: NoLimit, SortBy: "-name"},
		at:       1,
		wantGaps: 1,
		gap: func(t *testing.T, s *State) {
			if !s.mu.TryLock() {
				t.Error("the state's lock is held while the list is sorted")
				return
			}
			s.mu.Unlock()
		},
		want: func() []string { ids := chunkIDs(0, 100); slices.Reverse(ids); return ids }(),
	}, {
		// n0093-n0099 were read in the first chunk (after the gap in
		// which the keys are allocated); three new tasks evict
		// n0000-n0002 before theirs is read. The new ones are not
		// listed: they came after the list began.
		name:     "evicted and added in a gap",
		chunk:    7,
		q:        Query{Limit: NoLimit, SortBy: "name"},
		at:       2,
		wantGaps: 15, // the keys' allocation, 14 chunks of 97 tasks, the sort
		gap: func(t *testing.T, s *State) {
			addNamedA(t, s)
		},
		want: chunkIDs(3, 100),
	}, {
		// n0099 was read STARTED; its failure, after that chunk, does
		// not move it ahead of the STARTED tasks, but it is written
		// FAILURE.
		name:     "changed after its chunk was read",
		chunk:    7,
		q:        Query{Limit: NoLimit, SortBy: "state"},
		at:       2,
		wantGaps: 16, // the keys' allocation, 15 chunks of 100 tasks, the sort
		gap: func(t *testing.T, s *State) {
			s.Apply(taskEv(t, "failed", chunkID(99), "w1@h", 2000, nil))
		},
		want:      chunkIDs(0, 100),
		wantState: map[string]string{chunkID(98): "STARTED", chunkID(99): "FAILURE"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(was int) { selectChunk = was }(selectChunk)
			selectChunk = tc.chunk
			s := New(Config{MaxTasks: 100})
			for n := range 100 {
				addChunkTask(t, s, n, false)
			}
			gaps := 0
			chunkGap = func() {
				if gaps++; gaps == tc.at {
					tc.gap(t, s)
				}
			}
			l, err := s.List(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			states := map[string]string{}
			for l.Next(10, func(task *taskrec.Task) {
				// The task's strings are valid only during the call.
				id := strings.Clone(task.UUID)
				got = append(got, id)
				states[id] = strings.Clone(task.State)
			}) {
			}
			chunkGap = nil
			if gaps != tc.wantGaps {
				t.Errorf("%d gaps, want %d", gaps, tc.wantGaps)
			}
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("list (-want +got):\n%s", diff)
			}
			for id, want := range tc.wantState {
				if states[id] != want {
					t.Errorf("%s written %s, want %s", id, states[id], want)
				}
			}
		})
	}
}

// TestTasksSkipsTasksGoneWhileSorting: Tasks, which copies a selection
// out, leaves out the tasks evicted while an unpaged list is sorted with
// the lock released, rather than copying the new tasks in their slots.
func TestTasksSkipsTasksGoneWhileSorting(t *testing.T) {
	defer func() { chunkGap = nil }()
	s := New(Config{MaxTasks: 100})
	for n := range 100 {
		addChunkTask(t, s, n, false)
	}
	chunkGap = func() {
		chunkGap = nil
		addNamedA(t, s)
	}
	got, err := s.Tasks(Query{Limit: NoLimit, SortBy: "name"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(chunkIDs(3, 100), ids(got)); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
}
