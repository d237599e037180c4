package state

import (
	"strings"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// Route is what the state holds of a task that its events are counted by:
// the name, worker and routing key (empty when not set), and whether the
// task is in the state at all.
type Route struct {
	Name, Worker, RoutingKey string
	Known                    bool
}

// TaskRoute returns a task's name, worker and routing key (empty when
// not set) without copying its record out: the activity statistics key
// every task event by them, and most events carry none of them.
func (s *State) TaskRoute(id string) (name, worker, routingKey string, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r := s.route(id)
	return r.Name, r.Worker, r.RoutingKey, r.Known
}

// Routes sets dst[i] to the route of the task of events[i], or leaves it
// zero for an event that is not a task's, all under one read lock. The
// ingest loop looks up every event of a batch it has just applied: one
// read lock per event put the writer's goroutine on the lock's shared
// counter hundreds of times a batch, beside the readers.
func (s *State) Routes(events []celery.Event, dst []Route) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for i := range events {
		if e := &events[i]; e.UUID != "" && strings.HasPrefix(e.Type, "task-") {
			dst[i] = s.route(e.UUID)
		} else {
			dst[i] = Route{}
		}
	}
}

// route is TaskRoute's answer; the caller holds the lock.
func (s *State) route(id string) Route {
	i, ok := s.lookup(id)
	if !ok {
		return Route{}
	}
	r := Route{Known: true}
	sl := s.slots.At(i)
	if sl.Set&taskrec.FieldName != 0 {
		r.Name = s.sym.Str(sl.Name)
	}
	if sl.Set&taskrec.FieldWorker != 0 {
		r.Worker = s.sym.Str(sl.Worker)
	}
	if sl.Set&taskrec.FieldRoutingKey == 0 {
		return r
	}
	// The root and parent ids come last in a record: leaving them out of
	// the fields read stops the unpacking before them, and the free text
	// is not copied.
	t := taskrec.Task{Set: sl.Set & taskrec.TaskFields &^ (taskrec.FieldRootID | taskrec.FieldParentID)}
	if err := taskrec.Unpack(s.arena.Get(sl.Cold), sl.Key, &t, &s.sym, func([]byte) string { return "" }, nil); err != nil {
		return r
	}
	r.RoutingKey = t.RoutingKey
	return r
}
