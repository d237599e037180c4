// Package stream fans Celery events out to live subscribers (the
// Server-Sent Events endpoint) without ever blocking event ingestion.
package stream

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
)

// Message is one event as subscribers see it.
type Message struct {
	Type   string
	Task   string // task name, when known
	Worker string
	Data   []byte // the event's JSON
	// ID is the event's SSE id; empty sends none.
	ID string
}

// Filter selects messages; empty fields match everything.
type Filter struct {
	// Types are exact event types, or prefixes ending in "*" (task-*).
	Types  []string
	Task   string
	Worker string
}

func (f Filter) match(m *Message) bool {
	if f.Task != "" && !strings.EqualFold(f.Task, m.Task) {
		return false
	}
	if f.Worker != "" && !strings.EqualFold(f.Worker, m.Worker) {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if p, ok := strings.CutSuffix(t, "*"); ok {
			if strings.HasPrefix(m.Type, p) {
				return true
			}
		} else if t == m.Type {
			return true
		}
	}
	return false
}

// Subscription receives matching messages on C until it is closed.
type Subscription struct {
	C       chan Message
	filter  Filter
	dropped atomic.Int64
}

// Dropped returns and resets the number of messages lost because the
// subscriber was too slow.
func (s *Subscription) Dropped() int64 { return s.dropped.Swap(0) }

// Hub is safe for concurrent use.
type Hub struct {
	mu     sync.RWMutex
	subs   map[*Subscription]struct{}
	max    int
	closed bool
}

// DefaultMaxSubscribers is NewHub's bound when it is given none.
const DefaultMaxSubscribers = 256

// ErrTooManySubscribers is Subscribe's answer past the hub's bound.
var ErrTooManySubscribers = errors.New("too many subscribers")

// NewHub returns an empty hub that takes at most max subscribers at once
// (DefaultMaxSubscribers when max <= 0): each holds its buffer and is
// offered every message, so their number is what a client could
// otherwise grow without limit.
func NewHub(max int) *Hub {
	if max <= 0 {
		max = DefaultMaxSubscribers
	}
	return &Hub{subs: map[*Subscription]struct{}{}, max: max}
}

// Max is the most subscribers the hub takes at once.
func (h *Hub) Max() int { return h.max }

// Subscribe registers a subscriber with a buffer of buf messages, or
// answers ErrTooManySubscribers when the hub has its most. After Close the
// subscription's channel is closed at once.
func (h *Hub) Subscribe(f Filter, buf int) (*Subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed && len(h.subs) >= h.max {
		return nil, ErrTooManySubscribers
	}
	s := &Subscription{C: make(chan Message, buf), filter: f}
	if h.closed {
		close(s.C)
	} else {
		h.subs[s] = struct{}{}
	}
	return s, nil
}

// Close ends every subscription (its channel is closed, so a stream
// ends after what it already holds) and every later one. The server calls
// it when shutting down: streams never end by themselves, and the server
// would otherwise wait its whole shutdown timeout for them.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.C)
	}
}

// Unsubscribe removes the subscriber and closes its channel.
func (h *Hub) Unsubscribe(s *Subscription) {
	h.mu.Lock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.C)
	}
	h.mu.Unlock()
}

// Subscribers returns how many subscribers there are.
func (h *Hub) Subscribers() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs)
}

// Publish offers m to every matching subscriber; a full subscriber loses it.
func (h *Hub) Publish(m Message) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs {
		if !s.filter.match(&m) {
			continue
		}
		select {
		case s.C <- m:
		default:
			s.dropped.Add(1)
		}
	}
}
