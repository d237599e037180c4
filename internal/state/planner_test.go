package state

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/stamen-dev/stamen/internal/pyfmt"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// TestQueriesAgainstScan checks every way Tasks can answer (an index
// walk, the received-time index, sorting) against a plain scan of all the
// records that applies Flower's rules literally, over random states and
// random queries. Sorted pages are selected in chunks of a few tasks as
// well as under one lock.
func TestQueriesAgainstScan(t *testing.T) {
	for _, chunk := range []int{selectChunk, 7} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) {
			defer func(was int) { selectChunk = was }(selectChunk)
			selectChunk = chunk
			queriesAgainstScan(t)
		})
	}
}

func queriesAgainstScan(t *testing.T) {
	kinds := []string{"sent", "received", "started", "succeeded", "failed", "retried", "revoked"}
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 99))
		s := New(Config{MaxTasks: 50 + rng.IntN(300)})
		// Half the states have few tasks never received, so that narrow
		// received ranges are answered from the received-time index.
		pick := kinds
		if seed%2 == 1 {
			pick = append(slices.Repeat([]string{"received"}, 10), kinds[2:]...)
		}
		for range 2000 {
			fields := map[string]any{
				"type":      "task-" + pick[rng.IntN(len(pick))],
				"uuid":      fmt.Sprintf("%08x-0000-4000-8000-%012x", rng.IntN(400), 7),
				"hostname":  []string{"w1@h", "W2@h", "w3@h"}[rng.IntN(3)],
				"timestamp": float64(rng.IntN(500)),
			}
			if rng.IntN(3) == 0 {
				fields["name"] = []string{"a", "B", "c"}[rng.IntN(3)]
			}
			s.Apply(ev(t, fields))
		}
		for qi := range 300 {
			q := Query{Limit: []int{1, 5, 100, NoLimit}[rng.IntN(4)], Offset: rng.IntN(4) * rng.IntN(30)}
			if rng.IntN(3) == 0 {
				q.State = []string{"SUCCESS", "failure", "RECEIVED", "PENDING"}[rng.IntN(4)]
			}
			if rng.IntN(3) == 0 {
				q.TaskName = []string{"a", "b", "C", "zz"}[rng.IntN(4)]
			}
			if rng.IntN(3) == 0 {
				q.Worker = []string{"w1@h", "w2@h", "W3@H"}[rng.IntN(3)]
			}
			if rng.IntN(2) == 0 {
				start := time.Unix(int64(rng.IntN(500)), 0)
				q.ReceivedStart = &start
			}
			if rng.IntN(2) == 0 {
				end := time.Unix(int64(rng.IntN(500)), 0)
				if q.ReceivedStart != nil && rng.IntN(2) == 0 {
					end = q.ReceivedStart.Add(time.Duration(rng.IntN(40)) * time.Second)
				}
				q.ReceivedEnd = &end
			}
			sorts := []string{"", "", "received", "-received", "name", "-name", "started", "-started", "state", "-state"}
			q.SortBy = sorts[rng.IntN(len(sorts))]
			got, err := s.Tasks(q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(scanTasks(s, q), ids(got)); diff != "" {
				t.Fatalf("seed %d query %d %+v (-scan +Tasks):\n%s", seed, qi, q, diff)
			}
		}
	}
}

// scanTasks is Tasks by brute force, on ids.
func scanTasks(s *State, q Query) []string {
	var all []taskrec.Task
	for p := range s.slots.Pages {
		for j := range s.slots.Pages[p] {
			if i := uint32(p<<taskrec.PageBits | j); s.slots.At(i).Live() {
				all = append(all, s.load(i, taskrec.CopyText))
			}
		}
	}
	same := func(t *taskrec.Task, f taskrec.Field, v, want string) bool {
		return want == "" || (f == 0 || t.Has(f)) && v != "" && pyfmt.Fold(v) == pyfmt.Fold(want)
	}
	var match []taskrec.Task
	for _, t := range all {
		if !same(&t, taskrec.FieldWorker, t.Worker, q.Worker) || !same(&t, taskrec.FieldName, t.Name, q.TaskName) || !same(&t, 0, t.State, q.State) {
			continue
		}
		if t.Has(taskrec.FieldReceived) && (q.ReceivedStart != nil && t.Received < epoch(*q.ReceivedStart) || q.ReceivedEnd != nil && t.Received > epoch(*q.ReceivedEnd)) {
			continue
		}
		match = append(match, t)
	}
	field, desc := q.SortBy, false
	if len(field) > 0 && field[0] == '-' {
		field, desc = field[1:], true
	}
	key := func(t *taskrec.Task) (bool, float64, string) {
		switch field {
		case "received":
			return t.Has(taskrec.FieldReceived), t.Received, ""
		case "started":
			return t.Has(taskrec.FieldStarted), t.Started, ""
		case "name":
			return t.Has(taskrec.FieldName), 0, pyfmt.Fold(t.Name)
		case "state":
			return true, 0, pyfmt.Fold(t.State)
		}
		return true, orderKey(t), ""
	}
	slices.SortFunc(match, func(a, b taskrec.Task) int {
		ha, na, sa := key(&a)
		hb, nb, sb := key(&b)
		if !ha {
			na, sa = 0, ""
		}
		if !hb {
			nb, sb = 0, ""
		}
		c := cmp.Or(cmp.Compare(boolInt(ha), boolInt(hb)), cmp.Compare(na, nb), cmp.Compare(sa, sb), cmp.Compare(a.UUID, b.UUID))
		if desc || field == "" {
			return -c
		}
		return c
	})
	out := []string{}
	for i, t := range match {
		if i >= q.Offset && (q.Limit == NoLimit || len(out) < q.Limit) {
			out = append(out, t.UUID)
		}
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
