package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/pyfmt"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/internal/tasksearch"
)

const flowerDir = "../../testdata/flower-responses"

// flowerCapture is one file of testdata/flower-responses.
type flowerCapture struct {
	Request struct {
		Path  string            `json:"path"`
		Query map[string]string `json:"query"`
	} `json:"request"`
	Response struct {
		Status  int             `json:"status"`
		Body    json.RawMessage `json:"body"`
		BodyRaw string          `json:"body_raw"`
	} `json:"response"`
}

func readCapture(t *testing.T, name string) flowerCapture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(flowerDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var c flowerCapture
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// record is a task as Flower printed it, the source of the events that
// re-create it.
type record struct {
	UUID      string   `json:"uuid"`
	Name      *string  `json:"name"`
	State     string   `json:"state"`
	Received  *float64 `json:"received"`
	Sent      *float64 `json:"sent"`
	Started   *float64 `json:"started"`
	Succeeded *float64 `json:"succeeded"`
	Failed    *float64 `json:"failed"`
	Revoked   *float64 `json:"revoked"`
	Args      *string  `json:"args"`
	Kwargs    *string  `json:"kwargs"`
	ETA       *string  `json:"eta"`
	Expires   *string  `json:"expires"`
	Retries   *int     `json:"retries"`
	Worker    *string  `json:"worker"`
	Result    *string  `json:"result"`
	Exception *string  `json:"exception"`
	Runtime   *float64 `json:"runtime"`
	Traceback *string  `json:"traceback"`
	Exchange  *string  `json:"exchange"`
	RoutingKy *string  `json:"routing_key"`
	Clock     int64    `json:"clock"`
	Client    *string  `json:"client"`
	RootID    *string  `json:"root_id"`
	ParentID  *string  `json:"parent_id"`
}

// eventsFor writes the events a worker and a client would have sent for r,
// in the order they are published (task-sent last: the client sends it
// after the message, and it often arrives after task-received).
func eventsFor(t *testing.T, r record) []celery.Event {
	t.Helper()
	details := map[string]any{
		"name": r.Name, "args": r.Args, "kwargs": r.Kwargs, "retries": r.Retries,
		"root_id": r.RootID, "parent_id": r.ParentID, "eta": r.ETA, "expires": r.Expires,
	}
	type step struct {
		kind   string
		at     *float64
		fields map[string]any
	}
	steps := []step{
		{"received", r.Received, details},
		{"started", r.Started, nil},
		{"succeeded", r.Succeeded, map[string]any{"result": r.Result, "runtime": r.Runtime}},
		{"failed", r.Failed, map[string]any{"exception": r.Exception, "traceback": r.Traceback}},
		{"revoked", r.Revoked, map[string]any{"terminated": true, "signum": 15, "expired": false}},
	}
	var out []celery.Event
	clock := r.Clock - 10
	for _, st := range steps {
		if st.at == nil {
			continue
		}
		ev := map[string]any{"type": "task-" + st.kind, "uuid": r.UUID, "hostname": *r.Worker,
			"timestamp": *st.at, "utcoffset": 0, "pid": 4242, "clock": clock}
		for k, v := range st.fields {
			ev[k] = v
		}
		out = append(out, encodeEvent(t, ev, *st.at+0.001))
		clock++
	}
	if r.Sent != nil {
		ev := map[string]any{"type": "task-sent", "uuid": r.UUID, "hostname": *r.Client,
			"timestamp": *r.Sent, "utcoffset": 0, "pid": 99, "clock": 1, "queue": "celery",
			"exchange": r.Exchange, "routing_key": r.RoutingKy}
		for k, v := range details {
			ev[k] = v
		}
		// Insert it right after task-received, where it tends to land.
		sent := encodeEvent(t, ev, *r.Sent+0.002)
		if len(out) > 0 && r.Received != nil {
			out = append(out[:1], append([]celery.Event{sent}, out[1:]...)...)
		} else {
			out = append([]celery.Event{sent}, out...)
		}
	}
	// The last event carries the record's clock.
	out[len(out)-1].Clock = r.Clock
	return out
}

func encodeEvent(t *testing.T, fields map[string]any, localReceived float64) celery.Event {
	t.Helper()
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := celery.DecodeEvents(raw)
	if err != nil {
		t.Fatal(err)
	}
	evs[0].LocalReceived = localReceived
	return evs[0]
}

// replayList applies events re-creating every task of a /api/tasks capture.
func replayList(t *testing.T, s *State, c flowerCapture) {
	t.Helper()
	var recs map[string]record
	if err := json.Unmarshal(c.Response.Body, &recs); err != nil {
		t.Fatal(err)
	}
	// Oldest first, so that creation order is realistic.
	var all []record
	for _, r := range recs {
		all = append(all, r)
	}
	sortRecords(all)
	for _, r := range all {
		s.Apply(eventsFor(t, r)...)
	}
}

func sortRecords(rs []record) {
	first := func(r record) float64 {
		if r.Sent != nil {
			return *r.Sent
		}
		return *r.Received
	}
	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			if first(rs[j]) < first(rs[i]) {
				rs[i], rs[j] = rs[j], rs[i]
			}
		}
	}
}

// listJSON writes an /api/tasks answer as the handler does.
func listJSON(tasks []taskrec.Task) string {
	b := []byte{'{'}
	for i := range tasks {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = pyfmt.AppendJSONString(b, tasks[i].UUID)
		b = append(b, ": "...)
		b = tasks[i].AppendListJSON(b)
	}
	return string(append(b, '}'))
}

func queryOf(t *testing.T, params map[string]string) Query {
	t.Helper()
	q := Query{Limit: NoLimit}
	for k, v := range params {
		var err error
		switch k {
		case "limit":
			q.Limit, err = strconv.Atoi(v)
		case "offset":
			q.Offset, err = strconv.Atoi(v)
		case "sort_by":
			q.SortBy = v
		case "workername":
			q.Worker = v
		case "taskname":
			q.TaskName = v
		case "state":
			q.State = v
		case "search":
			q.Search = v
		case "received_start", "received_end":
			// The capture ran in UTC.
			tm, perr := time.ParseInLocation("2006-01-02 15:04", v, time.UTC)
			err = perr
			if k == "received_start" {
				q.ReceivedStart = &tm
			} else {
				q.ReceivedEnd = &tm
			}
		default:
			t.Fatalf("unknown parameter %s", k)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return q
}

// TestFlowerTaskLists re-creates the tasks of Flower's full listing from
// events and checks every captured /api/tasks answer byte for byte.
func TestFlowerTaskLists(t *testing.T) {
	s := New(Config{})
	replayList(t, s, readCapture(t, "tasks.json"))
	for _, name := range []string{"tasks.json", "tasks-filtered.json", "tasks-limit-offset.json",
		"tasks-received-range.json", "tasks-search-state.json", "tasks-search-substring.json",
		"tasks-workername.json"} {
		t.Run(name, func(t *testing.T) {
			c := readCapture(t, name)
			got, err := s.Tasks(queryOf(t, c.Request.Query))
			if err != nil {
				t.Fatal(err)
			}
			if js := listJSON(got); js != c.Response.BodyRaw {
				t.Errorf("query %v:\n got %s\nwant %s", c.Request.Query, js, c.Response.BodyRaw)
			}
		})
	}
}

// TestFlowerTaskInfo checks /api/task/info answers byte for byte.
func TestFlowerTaskInfo(t *testing.T) {
	for _, name := range []string{"task-info.json", "task-info-failure.json",
		"task-info-after-abort.json", "task-info-after-revoke.json"} {
		t.Run(name, func(t *testing.T) {
			c := readCapture(t, name)
			var r record
			if err := json.Unmarshal(c.Response.Body, &r); err != nil {
				t.Fatal(err)
			}
			s := New(Config{})
			s.Apply(eventsFor(t, r)...)
			task, ok := s.Task(r.UUID)
			if !ok {
				t.Fatalf("task %s missing", r.UUID)
			}
			got, err := task.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.Response.BodyRaw {
				t.Errorf("\n got %s\nwant %s", got, c.Response.BodyRaw)
			}
		})
	}
}

// TestFlowerSearchError checks the one JSON error of /api/tasks.
func TestFlowerSearchError(t *testing.T) {
	c := readCapture(t, "error-tasks-search-too-short.json")
	_, err := New(Config{}).Tasks(queryOf(t, c.Request.Query))
	se, ok := err.(*tasksearch.Error)
	if !ok {
		t.Fatalf("error %v (%T), want *tasksearch.Error", err, err)
	}
	var body struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(c.Response.Body, &body); err != nil {
		t.Fatal(err)
	}
	if se.Error() != body.Error {
		t.Errorf("error %q, want %q", se.Error(), body.Error)
	}
}
