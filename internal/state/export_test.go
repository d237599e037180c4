package state

import (
	"fmt"
	"testing"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// TestDrainEvicted: with DrainEvicted, a task created and evicted between
// two drains still reaches the store, with its own sequence number;
// without it (the bbolt store, which mirrors the state) it does not.
func TestDrainEvicted(t *testing.T) {
	for _, c := range []struct {
		keep bool
		want string
	}{
		{true, "[0:t0 1:t1 2:t2 3:t3 4:t4]"},
		{false, "[3:t3 4:t4]"},
	} {
		s := New(Config{MaxTasks: 2, TrackChanges: true, DrainEvicted: c.keep})
		for i := range 5 {
			s.Apply(taskEv(t, "received", fmt.Sprintf("t%d", i), "w@h", float64(100+i), nil))
		}
		var got []string
		for _, r := range s.Drain().Tasks {
			tk, err := taskrec.DecodeRecord(r.Data)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d:%s", r.Seq, tk.UUID))
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("DrainEvicted %v: drained %v, want %s", c.keep, got, c.want)
		}
		if again := s.Drain().Tasks; len(again) != 0 {
			t.Errorf("DrainEvicted %v: a second drain gave %d records", c.keep, len(again))
		}
	}
}
