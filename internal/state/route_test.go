package state

import (
	"testing"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TestRoutes looks a batch's tasks up as the ingest loop does after
// applying it: each task event gets its task's name, worker and routing
// key as the state holds them once the whole batch is in (an event that
// carries none of them gets those of the events before and after it), a
// task the state does not hold is not known, and a worker event gets
// nothing.
func TestRoutes(t *testing.T) {
	s := New(Config{MaxTasks: 2})
	a, b, c := "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b", "00000000-0000-4000-8000-00000000000c"
	evs := []celery.Event{
		taskEv(t, "started", a, "w1@h", 10.1, nil),
		taskEv(t, "received", a, "w1@h", 10, map[string]any{"name": "proj.add"}),
		ev(t, map[string]any{"type": "worker-heartbeat", "hostname": "w1@h", "timestamp": 10.2}),
		taskEv(t, "received", b, "w2@h", 11, map[string]any{"name": "proj.mul"}),
		// Task c evicts a, the oldest, at the bound of two tasks.
		taskEv(t, "received", c, "w2@h", 12, map[string]any{"name": "proj.div"}),
		taskEv(t, "succeeded", b, "w2@h", 11.5, map[string]any{"result": "2"}),
	}
	s.Apply(evs...)
	routes := make([]Route, len(evs))
	for i := range routes {
		routes[i] = Route{Name: "stale"} // each is set, whatever it held
	}
	s.Routes(evs, routes)
	want := []Route{
		{},
		{},
		{},
		{Name: "proj.mul", Worker: "w2@h", Known: true},
		{Name: "proj.div", Worker: "w2@h", Known: true},
		{Name: "proj.mul", Worker: "w2@h", Known: true},
	}
	for i := range want {
		if routes[i] != want[i] {
			t.Errorf("event %d (%s of %s): %+v, want %+v", i, evs[i].Type, evs[i].UUID, routes[i], want[i])
		}
	}

	// Without eviction, the route of a task whose name came later in the
	// batch, and the routing key of its task-sent event.
	s = New(Config{MaxTasks: 10})
	batch := []celery.Event{evs[0], evs[1], taskEv(t, "sent", a, "client@h", 9.9, map[string]any{"name": "proj.add", "routing_key": "fast"})}
	s.Apply(batch...)
	s.Routes(batch, routes[:3])
	for i := range 3 {
		if w := (Route{Name: "proj.add", Worker: "w1@h", RoutingKey: "fast", Known: true}); routes[i] != w {
			t.Errorf("event %d: %+v, want %+v", i, routes[i], w)
		}
	}
	if name, worker, key, ok := s.TaskRoute(a); name != "proj.add" || worker != "w1@h" || key != "fast" || !ok {
		t.Errorf("TaskRoute: %q %q %q %v", name, worker, key, ok)
	}
}
