package crossorigin

import (
	"sync"
	"time"
)

// throttle lets one event a key through per period, so that a page that
// sends a request a millisecond makes one log line a minute. It remembers
// at most max keys; the events of further keys, while that many are
// remembered and none has expired, share one key of their own.
type throttle struct {
	period time.Duration
	max    int
	now    func() time.Time

	mu    sync.Mutex
	slots map[string]*slot
	// swept is when expired keys were last dropped: a sweep visits every
	// key, so a flood of new keys sweeps once a second, not once each.
	swept time.Time
}

type slot struct {
	at      time.Time // when the key's last event was let through
	skipped int       // its events held back since
}

// otherKey is the key the events of keys beyond max share; no reason and
// origin makes it (they are joined by a space, and it has none).
const otherKey = "\x00other"

func newThrottle(period time.Duration, max int) *throttle {
	return &throttle{period: period, max: max, now: time.Now, slots: map[string]*slot{}}
}

// allow tells whether key's event is let through now, and if so how many
// of its events were held back since the last one that was; other is true
// when key shared the key of the keys beyond max.
func (t *throttle) allow(key string) (ok bool, skipped int, other bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, known := t.slots[key]
	if !known && len(t.slots) >= t.max {
		if now.Sub(t.swept) >= time.Second {
			t.swept = now
			for k, s := range t.slots {
				if now.Sub(s.at) >= t.period {
					delete(t.slots, k)
				}
			}
		}
		if len(t.slots) >= t.max {
			key, other = otherKey, true
			s, known = t.slots[key]
		}
	}
	if known && now.Sub(s.at) < t.period {
		s.skipped++
		return false, 0, other
	}
	if known {
		skipped = s.skipped
	}
	t.slots[key] = &slot{at: now}
	return true, skipped, other
}
