package inspect

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"github.com/stamen-dev/stamen/internal/celery"
)

// Route is where Celery's client would send a task that was given no
// queue, exchange or routing key: what the app's task_routes say for the
// task's name, else its task_default_queue. Empty fields are not set by
// the route.
type Route struct {
	Queue, Exchange, RoutingKey string
}

// taskRouter is a worker app's routing settings, read from its conf reply
// (as Celery's app.amqp.router would apply them in the client).
type taskRouter struct {
	maps         []mapRoute
	defaultQueue string
}

// mapRoute is one of Celery's MapRoute: exact task names first, then the
// glob patterns in the order the setting lists them.
type mapRoute struct {
	exact    map[string]Route
	patterns []patternRoute
}

type patternRoute struct {
	re    *regexp.Regexp
	route Route
}

// globRE is Celery's glob_to_re: every punctuation character but "*" is
// literal, "*" is ".+?", and the match is anchored at the start only
// (re.match).
func globRE(glob string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteByte('^')
	for i, part := range strings.Split(glob, "*") {
		if i > 0 {
			b.WriteString(".+?")
		}
		b.WriteString(regexp.QuoteMeta(part))
	}
	return regexp.Compile(b.String())
}

// parseRouter reads task_routes and task_default_queue from a conf reply
// (with_defaults=False: a setting left at its default is absent). Keys
// are read in the order the worker wrote them, since Celery tries the
// patterns in that order. task_routes entries that are not maps (a router
// function or class named by its path) cannot be evaluated here and are
// skipped. It returns nil when the reply sets neither.
func parseRouter(conf json.RawMessage) *taskRouter {
	var top map[string]json.RawMessage
	if json.Unmarshal(conf, &top) != nil {
		return nil
	}
	r := &taskRouter{}
	if raw, ok := top["task_default_queue"]; ok {
		_ = json.Unmarshal(raw, &r.defaultQueue)
	}
	if raw, ok := top["task_routes"]; ok {
		raw = bytes.TrimSpace(raw)
		switch {
		case len(raw) > 0 && raw[0] == '{':
			if m, ok := parseMapRoute(raw); ok {
				r.maps = append(r.maps, m)
			}
		case len(raw) > 0 && raw[0] == '[':
			var items []json.RawMessage
			if json.Unmarshal(raw, &items) == nil {
				for _, it := range items {
					if m, ok := parseMapRoute(it); ok {
						r.maps = append(r.maps, m)
					}
				}
			}
		}
	}
	if r.defaultQueue == "" && len(r.maps) == 0 {
		return nil
	}
	return r
}

// parseMapRoute reads one task_routes map, keeping the order of its keys.
func parseMapRoute(raw json.RawMessage) (mapRoute, bool) {
	keys, vals, err := celery.ObjectMembers(raw)
	if err != nil {
		return mapRoute{}, false
	}
	m := mapRoute{exact: map[string]Route{}}
	for i, k := range keys {
		route, ok := parseRoute(vals[i])
		if !ok {
			continue
		}
		if !strings.Contains(k, "*") {
			m.exact[k] = route
			continue
		}
		re, err := globRE(k)
		if err != nil {
			continue
		}
		m.patterns = append(m.patterns, patternRoute{re: re, route: route})
	}
	return m, true
}

// parseRoute reads a route: a queue name, or a map of apply_async options
// of which queue, exchange and routing_key (strings) are used.
func parseRoute(raw json.RawMessage) (Route, bool) {
	var queue string
	if json.Unmarshal(raw, &queue) == nil {
		return Route{Queue: queue}, queue != ""
	}
	var opts struct {
		Queue      any `json:"queue"`
		Exchange   any `json:"exchange"`
		RoutingKey any `json:"routing_key"`
	}
	if json.Unmarshal(raw, &opts) != nil {
		return Route{}, false
	}
	str := func(v any) string { s, _ := v.(string); return s }
	r := Route{Queue: str(opts.Queue), Exchange: str(opts.Exchange), RoutingKey: str(opts.RoutingKey)}
	return r, r != Route{}
}

// route is where this app sends task name: the first map of task_routes
// that has a route for it (exact name, then patterns), else the default
// queue.
func (r *taskRouter) route(name string) (Route, bool) {
	for _, m := range r.maps {
		if route, ok := m.exact[name]; ok {
			return route, true
		}
		for _, p := range m.patterns {
			if p.re.MatchString(name) {
				return p.route, true
			}
		}
	}
	if r.defaultQueue != "" {
		return Route{Queue: r.defaultQueue}, true
	}
	return Route{}, false
}

// TaskRoute is where the workers' own Celery app would send task name
// when apply_async is given no queue, exchange or routing key: by its
// task_routes (maps of task names and "*" patterns to a queue or to
// queue/exchange/routing_key options), else to its task_default_queue,
// as last reported by the workers' conf replies. Workers that register
// the task are asked first, by name; false when none of the cached
// workers sets either.
func (in *Inspector) TaskRoute(name string) (Route, bool) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	type candidate struct {
		worker    string
		registers bool
		router    *taskRouter
	}
	var cands []candidate
	for w, info := range in.workers {
		if info.router == nil {
			continue
		}
		cands = append(cands, candidate{w, registers(info.replies["registered"], name), info.router})
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if a.registers != b.registers {
			if a.registers {
				return -1
			}
			return 1
		}
		return strings.Compare(a.worker, b.worker)
	})
	for _, c := range cands {
		if r, ok := c.router.route(name); ok {
			return r, true
		}
	}
	return Route{}, false
}
