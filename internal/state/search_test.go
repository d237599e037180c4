package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/internal/tasksearch"
)

// searchID is a canonical uuid, or now and then an id kept as text.
func searchID(r *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	id := taskrec.FormatUUID(b)
	switch r.IntN(20) {
	case 0:
		return strings.ToUpper(id)
	case 1:
		return "job-" + id[:13]
	}
	return id
}

// mixCase turns some letters of s to upper case.
func mixCase(r *rand.Rand, s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' && r.IntN(2) == 0 {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// fragment is a piece of s from a random offset.
func fragment(r *rand.Rand, s string) string {
	n := 3 + r.IntN(min(len(s)-2, 18))
	start := r.IntN(len(s) - n + 1)
	return s[start : start+n]
}

// searchState holds tasks whose args, kwargs, results, names and workers
// quote pieces of other tasks' ids in any case, some evicted and some
// updated, so that the arena holds dead copies of records.
// Up to bigs of them have records larger than a chunk.
func searchState(t testing.TB, r *rand.Rand, n, bigs int) (*State, []string) {
	s := New(Config{MaxTasks: n * 3 / 4})
	var ids []string
	var evs []celery.Event
	big := 0
	for i := range n {
		id := searchID(r)
		ids = append(ids, id)
		w := fmt.Sprintf("w%d@host", i%3)
		// Numbers in every record, as real arguments have: runs of digits
		// and hyphens that the chunks' digests record.
		extra := map[string]any{"name": []string{"proj.add", "proj.mail"}[i%2], "args": fmt.Sprintf("(%d, 'order-%d')", i*7919, i)}
		if i > 0 && r.IntN(8) == 0 {
			other := ids[r.IntN(len(ids))]
			switch r.IntN(5) {
			case 0:
				extra["args"] = fmt.Sprintf("('%s', 2)", mixCase(r, other))
			case 1:
				extra["kwargs"] = fmt.Sprintf("{'ref': '%s'}", mixCase(r, other))
			case 2:
				extra["name"] = "proj.t" + mixCase(r, fragment(r, other))
			case 3:
				w = "w-" + fragment(r, other) + "@host"
			case 4:
				if i < n/2 || big == bigs {
					break
				}
				big++
				// Larger than a chunk: a record of its own chunk.
				extra["args"] = "('" + strings.Repeat("x", taskrec.ChunkSize) + mixCase(r, other) + "',)"
			}
		}
		if r.IntN(40) == 0 {
			// Hex letters only, in any case.
			extra["kwargs"] = "{'sum': '" + mixCase(r, "xdeadbeefcafe-bad") + "'}"
		}
		if r.IntN(50) == 0 {
			extra["args"] = "('qzaﬀ0-\u212a', 'café')"
		}
		ts := 1.7e9 + float64(i)
		evs = append(evs, taskEv(t, "received", id, w, ts, extra))
		if r.IntN(2) == 0 {
			res := map[string]any{"result": "'" + mixCase(r, ids[r.IntN(len(ids))]) + "'"}
			evs = append(evs, taskEv(t, "succeeded", id, w, ts+0.5, res))
		}
	}
	s.Apply(evs...)
	return s, ids
}

// sealedChunks counts the arena's chunks of standard size that records are
// no longer appended to.
func sealedChunks(s *State) int {
	n := 0
	for i, ch := range s.arena.Chunks {
		if ch != nil && cap(ch.Data) == taskrec.ChunkSize && s.arena.Sealed(i) {
			n++
		}
	}
	return n
}

// slowTasks is what Tasks answers, found by matching every task.
// all holds every task of each State filter, newest first.
func slowTasks(t testing.TB, s *State, q Query, all map[string][]taskrec.Task) []string {
	t.Helper()
	search, err := tasksearch.Compile(q.Search)
	if err != nil {
		t.Fatal(err)
	}
	if all[q.State] == nil {
		tasks, err := s.Tasks(Query{Limit: NoLimit, State: q.State})
		if err != nil {
			t.Fatal(err)
		}
		all[q.State] = tasks
	}
	tasks := all[q.State]
	var out []string
	for i := range tasks {
		if search.Match(&tasks[i]) {
			out = append(out, tasks[i].UUID)
		}
	}
	out = out[min(q.Offset, len(out)):]
	if q.Limit != NoLimit {
		out = out[:min(q.Limit, len(out))]
	}
	return out
}

func TestSearchCandidatesMatchEveryTask(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s, ids := searchState(t, r, 16000, 3)
	// Records in chunks no longer written to: the searches read those
	// through their digests (taskrec.Grams).
	if sealed := sealedChunks(s); sealed < 3 {
		t.Fatalf("%d sealed chunks of records", sealed)
	}
	fast := 0
	all := map[string][]taskrec.Task{}
	for range 400 {
		id := ids[r.IntN(len(ids))]
		frag := fragment(r, id)
		switch r.IntN(6) {
		case 0:
			frag = strings.ToUpper(frag)
		case 1:
			frag = strings.ReplaceAll(frag, "-", "")
		case 2:
			frag = frag + " state:SUCCESS"
		case 3:
			frag = frag + " OR " + fragment(r, ids[r.IntN(len(ids))])
		case 4:
			frag = []string{"ﬀ0-", "zaff0-", "aFf0-k", "deadbeef", "BEEFCA", "fe-ba", "abcdef", "xDEAD"}[r.IntN(8)]
		}
		q := Query{Limit: 100, Search: frag}
		switch r.IntN(4) {
		case 0:
			q.Offset = r.IntN(3)
		case 1:
			q.Limit = 1
		case 2:
			q.State = "SUCCESS"
		}
		search, err := tasksearch.Compile(q.Search)
		if err != nil {
			continue // too short once hyphens are gone
		}
		if _, ok := search.Candidates(tasksearch.Records{Slots: &s.slots, Arena: &s.arena, Symbols: &s.sym, TextIDs: s.textIDs}); ok {
			fast++
		}
		want := slowTasks(t, s, q, all)
		got, err := s.Tasks(q)
		if err != nil {
			t.Fatal(err)
		}
		gotIDs := make([]string, len(got))
		for i := range got {
			gotIDs[i] = got[i].UUID
		}
		if !slices.Equal(gotIDs, want) {
			t.Fatalf("search %+v: got %q, want %q", q, gotIDs, want)
		}
	}
	if fast < 200 {
		t.Fatalf("only %d searches took the candidate scan", fast)
	}
}

// FuzzSearchCandidates compares the answers of searches with those of
// matching every task.
func FuzzSearchCandidates(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	s, ids := searchState(f, r, 400, 0)
	for _, seed := range []string{ids[350][24:], ids[390][9:23], strings.ToUpper(ids[399][3:17]), "zaff0-", "aFf0-k", "-4", "0-9 OR 123", "DeadBeef", "abcdef"} {
		f.Add(seed, 0)
	}
	all := map[string][]taskrec.Task{}
	slowTasks(f, s, Query{Limit: NoLimit}, all)
	f.Fuzz(func(t *testing.T, search string, offset int) {
		q := Query{Limit: 10, Offset: offset & 3, Search: search}
		if _, err := tasksearch.Parse(search); err != nil {
			return
		}
		want := slowTasks(t, s, q, all)
		got, err := s.Tasks(q)
		if err != nil {
			t.Fatal(err)
		}
		gotIDs := make([]string, len(got))
		for i := range got {
			gotIDs[i] = got[i].UUID
		}
		if !slices.Equal(gotIDs, want) {
			t.Fatalf("search %q offset %d: got %q, want %q", search, q.Offset, gotIDs, want)
		}
	})
}

// TestSearchesBuildDigestsWhileTheWriterApplies: concurrent searches for
// pieces of ids build the digests of the sealed chunks (taskrec.Grams),
// a few each,
// under the read lock while the writer applies new tasks. Run with -race,
// it finds a digest built or read outside the lock's protection; each
// answer must still be a task whose id holds the piece.
func TestSearchesBuildDigestsWhileTheWriterApplies(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	s, ids := searchState(t, r, 16000, 0)
	if sealed := sealedChunks(s); sealed < 3 {
		t.Fatalf("%d sealed chunks of records", sealed)
	}
	var evs [][]celery.Event
	for b := range 40 {
		var batch []celery.Event
		for k := range 50 {
			id := searchID(r)
			batch = append(batch, taskEv(t, "received", id, "w@host", 1.8e9+float64(b*50+k),
				map[string]any{"name": "proj.add", "args": fmt.Sprintf("(%d,)", b*50+k)}))
		}
		evs = append(evs, batch)
	}
	var frags []string
	var searches []*tasksearch.Search
	for len(frags) < 200 {
		id := ids[len(ids)-1-r.IntN(8000)]
		if len(id) != 36 {
			continue
		}
		frag := strings.ToLower(id[24:])
		search, err := tasksearch.Compile(frag)
		if err != nil {
			t.Fatal(err)
		}
		frags, searches = append(frags, frag), append(searches, search)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(frags); i += 4 {
				got, err := s.Tasks(Query{Limit: 10, Search: frags[i]})
				if err != nil {
					t.Error(err)
					return
				}
				for _, task := range got {
					if !searches[i].Match(&task) {
						t.Errorf("search %q answered %s, which does not match", frags[i], task.UUID)
					}
				}
			}
		})
	}
	for _, batch := range evs {
		s.Apply(batch...)
	}
	wg.Wait()
}
