package state

import (
	"cmp"
	"fmt"
	"math"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// TestOrderedTime: the started times of an unpaged sort, mapped to
// integers, order as compareKeys orders them (cmp.Compare: a NaN first,
// NaNs equal, -0 equal to 0), and above 0, which is a task without one.
func TestOrderedTime(t *testing.T) {
	times := []float64{
		math.NaN(), math.Copysign(math.NaN(), -1), math.Inf(-1), -1e300, -1, math.Copysign(0, -1),
		0, 5e-324, 1, 1.7e9, math.MaxFloat64, math.Inf(1),
	}
	for _, a := range times {
		if orderedTime(a) == 0 {
			t.Errorf("orderedTime(%v) is 0, the key of no time", a)
		}
		for _, b := range times {
			if got, want := cmp.Compare(orderedTime(a), orderedTime(b)), cmp.Compare(a, b); got != want {
				t.Errorf("%v against %v: %d, want %d", a, b, got, want)
			}
		}
	}
}

// TestUnpagedSortTies: received tasks of one name (so one state, and no
// started time), whose ids share their first eight bytes or are not uuids
// at all, so that the id decides every place; their timestamps shuffle
// the order they are gathered in. Each unpaged sort, both ways, lists
// them as a plain scan does.
func TestUnpagedSortTies(t *testing.T) {
	s := New(Config{MaxTasks: 100})
	for n := range 60 {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012x", (n*7919)%1000)
		if n%10 == 0 {
			id += "!" // not a uuid: compared as text, among the uuids
		}
		s.Apply(taskEv(t, "received", id, "w1@h", float64(1000+(n*37)%60), map[string]any{"name": "same"}))
	}
	for _, sortBy := range []string{"name", "-name", "state", "-state", "started", "-started"} {
		q := Query{Limit: NoLimit, SortBy: sortBy}
		got, err := s.Tasks(q)
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(scanTasks(s, q), ids(got)); diff != "" {
			t.Errorf("sort_by=%s (-scan +got):\n%s", sortBy, diff)
		}
	}
}
