package state

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// unfinished are the states a task waits in for a later event: Celery's
// unready states a worker's events move on (PENDING, RECEIVED, STARTED,
// RETRY). REJECTED and custom states are left alone: nothing says a
// result will follow them.
var unfinished = [...]string{taskrec.Pending, taskrec.Received, taskrec.Started, taskrec.Retry}

// StaleTasks returns the ids of at most limit tasks in an unfinished state
// whose latest event is older than before, oldest first: the tasks whose
// finishing events stamen may have missed, for a reconciler to look up in
// the result backend. It reads the state indexes (each ordered by the
// latest event's timestamp): a binary search and at most limit items per
// state, under the read lock. ctx is not waited on; it is there for
// stores that do (reconcile.Source).
func (s *State) StaleTasks(_ context.Context, before time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	cut := epoch(before)
	s.mu.RLock()
	defer s.mu.RUnlock()
	var found []taskrec.Item
	for _, st := range unfinished {
		id, ok := s.sym.Lookup(st)
		if !ok {
			continue
		}
		x := s.byState[s.sym.Folded[id]]
		if x == nil {
			continue
		}
		// An index holds every state that folds to its key (a custom
		// "started" shares STARTED's): check the slot's own state.
		from, _ := x.All()
		to := x.Bound(cut, false)
		n := 0
		x.Walk(from, to, false, func(it taskrec.Item) bool {
			if s.slots.At(it.Slot).State != id {
				return true
			}
			found = append(found, it)
			n++
			return n < limit
		})
	}
	slices.SortFunc(found, func(a, b taskrec.Item) int {
		if c := cmp.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return cmp.Compare(a.Slot, b.Slot)
	})
	found = found[:min(len(found), limit)]
	ids := make([]string, len(found))
	for i, it := range found {
		ids[i] = s.taskID(it.Slot)
	}
	return ids, nil
}
