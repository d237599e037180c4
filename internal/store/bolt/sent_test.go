package bolt

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/history"
)

// TestSentBounds keeps what PutSent was given, replaces a record put again,
// and drops the oldest beyond the count and the age, also across a reopen.
func TestSentBounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stamen.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := history.SentLimits{Max: 3, MaxAge: time.Hour}
	put := func(id string, at time.Time, data string) {
		t.Helper()
		if err := s.PutSent(id, at, []byte(data), lim); err != nil {
			t.Fatal(err)
		}
	}
	want := func(id, data string) {
		t.Helper()
		got, ok, err := s.Sent(id)
		switch {
		case err != nil:
			t.Fatal(err)
		case data == "" && ok:
			t.Errorf("%s: kept %q, want dropped", id, got)
		case data != "" && string(got) != data:
			t.Errorf("%s: %q (found %v), want %q", id, got, ok, data)
		}
	}
	for i := range 3 {
		put(fmt.Sprint("t", i), t0.Add(time.Duration(i)*time.Minute), fmt.Sprint("d", i))
	}
	want("t0", "d0")
	put("t0", t0.Add(3*time.Minute), "d0b") // replaced: now the newest
	want("t0", "d0b")
	put("t3", t0.Add(4*time.Minute), "d3") // count: t1 goes
	want("t1", "")
	want("t0", "d0b")
	want("t2", "d2")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want("t3", "d3")
	// Age: an hour after t2 (t0+2m), t2 goes; t0 (t0+3m) stays.
	put("t4", t0.Add(62*time.Minute+30*time.Second), "d4")
	want("t2", "")
	want("t0", "d0b")
	want("t4", "d4")
	if n := s.SentCount(); n != 3 {
		t.Errorf("%d records kept, want 3", n)
	}
}
