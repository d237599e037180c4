package state

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stamen-dev/stamen/internal/celery"
)

// celeryScenarios is testdata/celery_scenarios.json: event sequences and
// what Celery's own State made of them (see gen_celery_scenarios.py).
type celeryScenarios struct {
	Celery    string `json:"celery"`
	Scenarios []struct {
		Name   string            `json:"name"`
		Events []json.RawMessage `json:"events"`
		Want   struct {
			Tasks []struct {
				UUID string `json:"uuid"`
				JSON string `json:"json"`
			} `json:"tasks"`
			Workers []struct {
				Hostname   string    `json:"hostname"`
				PID        *int      `json:"pid"`
				Freq       float64   `json:"freq"`
				Heartbeats []float64 `json:"heartbeats"`
				Clock      int64     `json:"clock"`
				Active     *int      `json:"active"`
				Processed  *int      `json:"processed"`
				Loadavg    []float64 `json:"loadavg"`
				SWIdent    *string   `json:"sw_ident"`
				SWVer      *string   `json:"sw_ver"`
				SWSys      *string   `json:"sw_sys"`
			} `json:"workers"`
			TaskTypes []string `json:"task_types"`
		} `json:"want"`
	} `json:"scenarios"`
}

// decodeTestEvent decodes one event object the way the broker would hand
// it over, taking LocalReceived from its local_received key.
func decodeTestEvent(t testing.TB, raw []byte) celery.Event {
	t.Helper()
	evs, err := celery.DecodeEvents(raw)
	if err != nil || len(evs) != 1 {
		t.Fatalf("decode %s: %v (%d events)", raw, err, len(evs))
	}
	var lr struct {
		LocalReceived float64 `json:"local_received"`
	}
	if err := json.Unmarshal(raw, &lr); err != nil {
		t.Fatal(err)
	}
	evs[0].LocalReceived = lr.LocalReceived
	return evs[0]
}

func fixedNow(sec float64) func() time.Time {
	return func() time.Time { return time.Unix(0, int64(sec*1e9)) }
}

// TestCeleryScenarios replays each scenario one event at a time and as one
// batch, and compares every record byte for byte with what Celery 5.2.6
// serialised (children sorted: Celery keeps them in a WeakSet).
func TestCeleryScenarios(t *testing.T) {
	data, err := os.ReadFile("testdata/celery_scenarios.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden celeryScenarios
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden.Scenarios) == 0 {
		t.Fatal("no scenarios")
	}
	for _, sc := range golden.Scenarios {
		var events []celery.Event
		for _, raw := range sc.Events {
			events = append(events, decodeTestEvent(t, raw))
		}
		for _, batched := range []bool{false, true} {
			name := sc.Name
			if batched {
				name += "/batch"
			}
			t.Run(name, func(t *testing.T) {
				s := New(Config{Now: fixedNow(1e9)})
				if batched {
					s.Apply(events...)
				} else {
					for _, e := range events {
						s.Apply(e)
					}
				}
				if s.Len() != len(sc.Want.Tasks) {
					t.Errorf("Len() = %d, want %d", s.Len(), len(sc.Want.Tasks))
				}
				for _, want := range sc.Want.Tasks {
					task, ok := s.Task(want.UUID)
					if !ok {
						t.Errorf("task %s missing", want.UUID)
						continue
					}
					slices.Sort(task.Children)
					got, err := task.MarshalJSON()
					if err != nil {
						t.Fatal(err)
					}
					if string(got) != want.JSON {
						t.Errorf("task %s:\n got %s\nwant %s", want.UUID, got, want.JSON)
					}
				}
				var wantWorkers []Worker
				for _, w := range sc.Want.Workers {
					wantWorkers = append(wantWorkers, Worker{
						Hostname: w.Hostname, PID: deref(w.PID), Freq: w.Freq, Heartbeats: w.Heartbeats,
						Clock: w.Clock, Active: deref(w.Active), Processed: deref(w.Processed),
						Loadavg: w.Loadavg, SWIdent: deref(w.SWIdent), SWVer: deref(w.SWVer), SWSys: deref(w.SWSys),
					})
				}
				opts := []cmp.Option{cmpopts.IgnoreFields(Worker{}, "Alive"), cmpopts.EquateEmpty()}
				if diff := cmp.Diff(wantWorkers, s.Workers(), opts...); diff != "" {
					t.Errorf("workers (-celery +state):\n%s", diff)
				}
				if diff := cmp.Diff(sc.Want.TaskTypes, s.TaskTypes(), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("task types (-celery +state):\n%s", diff)
				}
			})
		}
	}
}

func deref[T any](p *T) T {
	var zero T
	if p != nil {
		zero = *p
	}
	return zero
}
