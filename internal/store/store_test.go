package store

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func replayAll(t *testing.T, s *Store) []string {
	t.Helper()
	var got []string
	if err := s.Replay(func(e []byte) error { got = append(got, string(e)); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestAppendFlushReopenReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stamen.db")
	s, err := Open(path, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		s.Append([]byte(fmt.Sprintf(`{"n":%d}`, i)))
	}
	s.SetHeartbeat("w1", []byte(`{"hb":1}`))
	s.SetHeartbeat("w1", []byte(`{"hb":2}`))
	if got := replayAll(t, s); len(got) != 0 {
		t.Errorf("unflushed events visible: %v", got)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 7; i++ {
		s.Append([]byte(fmt.Sprintf(`{"n":%d}`, i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Trimmed to the 5 newest events, oldest first, then the heartbeat.
	want := []string{`{"n":2}`, `{"n":3}`, `{"n":4}`, `{"n":5}`, `{"n":6}`, `{"hb":2}`}
	if diff := cmp.Diff(want, replayAll(t, s)); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
	if s.Len() != 5 || s.Size() <= 0 {
		t.Errorf("Len %d Size %d", s.Len(), s.Size())
	}
}
