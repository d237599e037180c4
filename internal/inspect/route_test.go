package inspect

import (
	"encoding/json"
	"testing"
)

// TestTaskRouterRoutes checks routing from a conf reply as Celery's
// Router does it: task_routes maps (exact names first, then "*" patterns
// in the order given, anchored at the start only, as glob_to_re and
// re.match make them), a route as a queue name or as options, and
// task_default_queue when no route matches.
func TestTaskRouterRoutes(t *testing.T) {
	for _, tc := range []struct {
		name, conf, task string
		want             Route
		ok               bool
	}{
		{"nothing set", `{"task_serializer": "json"}`, "a.b", Route{}, false},
		{"default queue", `{"task_default_queue": "dflt"}`, "a.b", Route{Queue: "dflt"}, true},
		{"exact map", `{"task_routes": {"a.b": {"queue": "q1"}}, "task_default_queue": "dflt"}`, "a.b", Route{Queue: "q1"}, true},
		{"exact miss", `{"task_routes": {"a.b": {"queue": "q1"}}, "task_default_queue": "dflt"}`, "a.bc", Route{Queue: "dflt"}, true},
		{"queue name", `{"task_routes": {"a.b": "q1"}}`, "a.b", Route{Queue: "q1"}, true},
		{"options", `{"task_routes": {"a.b": {"exchange": "x", "routing_key": "k", "priority": 5}}}`, "a.b", Route{Exchange: "x", RoutingKey: "k"}, true},
		{"glob", `{"task_routes": {"proj.email.*": "mail"}}`, "proj.email.send", Route{Queue: "mail"}, true},
		{"glob needs a character", `{"task_routes": {"proj.*": "p"}}`, "proj.", Route{}, false},
		{"glob dot is literal", `{"task_routes": {"proj.*": "p"}}`, "projXsend", Route{}, false},
		{"glob anchored at the start only", `{"task_routes": {"*.send": "s"}}`, "a.sender", Route{Queue: "s"}, true},
		{"question mark is literal", `{"task_routes": {"a.?": "q"}}`, "a.b", Route{}, false},
		{"exact before pattern", `{"task_routes": {"a.*": "glob", "a.b": "exact"}}`, "a.b", Route{Queue: "exact"}, true},
		{"patterns in order", `{"task_routes": {"a.b*": "first", "a.*": "second"}}`, "a.bc", Route{Queue: "first"}, true},
		{"patterns in order, reversed", `{"task_routes": {"a.*": "second", "a.b*": "first"}}`, "a.bc", Route{Queue: "second"}, true},
		{"list of maps, first wins", `{"task_routes": [{"x.*": "x"}, {"a.b": "second"}, {"a.*": "third"}]}`, "a.b", Route{Queue: "second"}, true},
		{"router function skipped", `{"task_routes": ["proj.routers.route_task", {"a.b": "q"}]}`, "a.b", Route{Queue: "q"}, true},
		{"empty route skipped", `{"task_routes": {"a.b": {}}, "task_default_queue": "dflt"}`, "a.b", Route{Queue: "dflt"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := parseRouter(json.RawMessage(tc.conf))
			var got Route
			var ok bool
			if r != nil {
				got, ok = r.route(tc.task)
			}
			if got != tc.want || ok != tc.ok {
				t.Errorf("route(%q) = %+v, %v; want %+v, %v", tc.task, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestTaskRoutePrefersRegisteringWorkers: with workers of several apps in
// the cache, the conf of a worker that registers the task decides.
func TestTaskRoutePrefersRegisteringWorkers(t *testing.T) {
	in := New(nil, 0, 0, nil)
	add := func(name, registered, conf string) {
		in.workers[name] = &workerInfo{
			replies: map[string]json.RawMessage{"registered": json.RawMessage(registered)},
			router:  parseRouter(json.RawMessage(conf)),
		}
	}
	add("a@h", `["other.task"]`, `{"task_default_queue": "other"}`)
	add("b@h", `["proj.add"]`, `{"task_default_queue": "proj"}`)
	add("c@h", `["proj.add"]`, `{"task_serializer": "json"}`)
	for task, want := range map[string]Route{"proj.add": {Queue: "proj"}, "other.task": {Queue: "other"}, "unknown": {Queue: "other"}} {
		if got, ok := in.TaskRoute(task); !ok || got != want {
			t.Errorf("TaskRoute(%q) = %+v, %v; want %+v", task, got, ok, want)
		}
	}
}
