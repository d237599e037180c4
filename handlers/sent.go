package handlers

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
)

// Bounds of the sent-task log when the caller gives none.
const (
	DefaultSentMax    = 100_000
	DefaultSentMaxAge = 7 * 24 * time.Hour
)

// sentTask is what stamen keeps of a task it sent: what sending it again
// needs. Times (eta, expires) are left out: a retry runs now unless its
// own options say otherwise.
type sentTask struct {
	Name       string         `json:"name"`
	Args       []any          `json:"args"`
	Kwargs     map[string]any `json:"kwargs"`
	Queue      string         `json:"queue,omitempty"`
	Exchange   string         `json:"exchange,omitempty"`
	RoutingKey string         `json:"routing_key,omitempty"`
	Priority   int            `json:"priority,omitempty"`
}

// rememberSent records msg in the sent log. A failure costs only the first
// retry source of this task, so it is logged, not returned: the task is
// already on its queue. A client that leaves meanwhile does not stop the
// record: ctx's values are kept, not its end.
func (h *Handlers) rememberSent(ctx context.Context, msg *celery.TaskMessage) {
	if h.Sent == nil {
		return
	}
	data, err := json.Marshal(sentTask{
		Name: msg.Name, Args: msg.Args, Kwargs: msg.Kwargs, Queue: msg.Queue,
		Exchange: msg.Exchange, RoutingKey: msg.RoutingKey, Priority: msg.Priority,
	})
	if err == nil {
		err = h.Sent.PutSent(context.WithoutCancel(ctx), msg.ID, h.Now(), data)
	}
	if err != nil {
		h.log.Warn("cannot record a sent task; retrying it will need another source", "task_id", msg.ID, "err", err)
	}
}

// memorySentLog is the SentLog of a stamen without a store: the same
// bounds, lost on restart.
type memorySentLog struct {
	mu     sync.Mutex
	max    int
	maxAge time.Duration
	byID   map[string]memorySent
	order  []memoryOrder // oldest first; order[head:] is live
	head   int
	seq    uint64
}

type memorySent struct {
	seq  uint64
	at   time.Time
	data []byte
}

type memoryOrder struct {
	seq uint64
	id  string
}

// NewMemorySentLog returns a SentLog kept in memory, holding at most max
// records none older than maxAge.
func NewMemorySentLog(max int, maxAge time.Duration) SentLog {
	return &memorySentLog{max: max, maxAge: maxAge, byID: map[string]memorySent{}}
}

func (m *memorySentLog) PutSent(_ context.Context, id string, at time.Time, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.byID[id] = memorySent{seq: m.seq, at: at, data: append([]byte(nil), data...)}
	m.order = append(m.order, memoryOrder{seq: m.seq, id: id})
	for m.head < len(m.order) {
		o := m.order[m.head]
		rec, ok := m.byID[o.id]
		current := ok && rec.seq == o.seq
		tooMany := m.max > 0 && len(m.order)-m.head > m.max
		tooOld := m.maxAge > 0 && current && at.Sub(rec.at) > m.maxAge
		if current && !tooMany && !tooOld {
			break
		}
		if current {
			delete(m.byID, o.id)
		}
		m.order[m.head] = memoryOrder{}
		m.head++
	}
	if m.head > len(m.order)/2 {
		m.order = append(m.order[:0], m.order[m.head:]...)
		m.head = 0
	}
	return nil
}

func (m *memorySentLog) Sent(_ context.Context, id string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.byID[id]
	return rec.data, ok, nil
}
