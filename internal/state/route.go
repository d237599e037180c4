package state

import (
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// TaskRoute returns a task's name, worker and routing key (empty when
// not set) without copying its record out: the activity statistics key
// every task event by them, and most events carry none of them.
func (s *State) TaskRoute(id string) (name, worker, routingKey string, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.lookup(id)
	if !ok {
		return "", "", "", false
	}
	sl := s.slots.At(i)
	if sl.Set&taskrec.FieldName != 0 {
		name = s.sym.Str(sl.Name)
	}
	if sl.Set&taskrec.FieldWorker != 0 {
		worker = s.sym.Str(sl.Worker)
	}
	if sl.Set&taskrec.FieldRoutingKey == 0 {
		return name, worker, "", true
	}
	// The root and parent ids come last in a record: leaving them out of
	// the fields read stops the unpacking before them, and the free text
	// is not copied.
	t := taskrec.Task{Set: sl.Set & taskrec.TaskFields &^ (taskrec.FieldRootID | taskrec.FieldParentID)}
	if err := taskrec.Unpack(s.arena.Get(sl.Cold), sl.Key, &t, &s.sym, func([]byte) string { return "" }, nil); err != nil {
		return name, worker, "", true
	}
	return name, worker, t.RoutingKey, true
}
