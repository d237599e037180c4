package stream

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFilter(t *testing.T) {
	m := Message{Type: "task-succeeded", Task: "proj.add", Worker: "w1@h"}
	tests := []struct {
		name string
		f    Filter
		want bool
	}{
		{"empty matches", Filter{}, true},
		{"exact type", Filter{Types: []string{"task-succeeded"}}, true},
		{"other type", Filter{Types: []string{"task-failed"}}, false},
		{"prefix", Filter{Types: []string{"worker-*", "task-*"}}, true},
		{"task name case-insensitive", Filter{Task: "PROJ.ADD"}, true},
		{"other task", Filter{Task: "proj.mul"}, false},
		{"worker", Filter{Worker: "w1@h", Types: []string{"task-*"}}, true},
		{"other worker", Filter{Worker: "w2@h"}, false},
	}
	for _, tc := range tests {
		if got := tc.f.match(&m); got != tc.want {
			t.Errorf("%s: match = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPublishNeverBlocks(t *testing.T) {
	h := NewHub(0)
	fast, _ := h.Subscribe(Filter{}, 10)
	slow, _ := h.Subscribe(Filter{Types: []string{"task-*"}}, 1)
	for _, typ := range []string{"task-sent", "worker-heartbeat", "task-received"} {
		h.Publish(Message{Type: typ})
	}
	var got []string
	for range 3 {
		got = append(got, (<-fast.C).Type)
	}
	if diff := cmp.Diff([]string{"task-sent", "worker-heartbeat", "task-received"}, got); diff != "" {
		t.Errorf("fast subscriber (-want +got):\n%s", diff)
	}
	if m := <-slow.C; m.Type != "task-sent" || slow.Dropped() != 1 {
		t.Errorf("slow subscriber got %v, dropped %d", m, slow.Dropped())
	}
	h.Unsubscribe(fast)
	h.Unsubscribe(fast)
	if _, open := <-fast.C; open || h.Subscribers() != 1 {
		t.Errorf("unsubscribe: open=%v subscribers=%d", open, h.Subscribers())
	}
}

// TestCloseEndsSubscriptions: Close ends every stream, present and later.
func TestCloseEndsSubscriptions(t *testing.T) {
	h := NewHub(0)
	s, _ := h.Subscribe(Filter{}, 4)
	h.Publish(Message{Type: "task-sent"})
	h.Close()
	if m, ok := <-s.C; !ok || m.Type != "task-sent" {
		t.Errorf("first receive after Close: %v %v, want the queued message", m, ok)
	}
	if _, ok := <-s.C; ok {
		t.Error("subscription still open after Close")
	}
	h.Unsubscribe(s) // must not close twice
	late, _ := h.Subscribe(Filter{}, 4)
	if _, ok := <-late.C; ok {
		t.Error("a subscription after Close is open")
	}
	h.Publish(Message{Type: "task-sent"})
	if n := h.Subscribers(); n != 0 {
		t.Errorf("%d subscribers after Close", n)
	}
}

// TestSubscribersBounded: past its bound the hub refuses a subscriber, and
// takes one again once another has gone.
func TestSubscribersBounded(t *testing.T) {
	h := NewHub(2)
	a, err := h.Subscribe(Filter{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Subscribe(Filter{}, 1); err != nil {
		t.Fatal(err)
	}
	if s, err := h.Subscribe(Filter{}, 1); !errors.Is(err, ErrTooManySubscribers) || s != nil {
		t.Fatalf("a third subscriber of 2: %v, %v", s, err)
	}
	if h.Subscribers() != 2 {
		t.Errorf("%d subscribers, want 2", h.Subscribers())
	}
	h.Unsubscribe(a)
	if _, err := h.Subscribe(Filter{}, 1); err != nil {
		t.Errorf("after one left: %v", err)
	}
}
