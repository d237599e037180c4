package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
)

// lateWorker answers inspect commands addressed to it from its
// answerFrom-th round on (a round is one command per method); before, its
// mailbox does not exist yet and the commands are lost.
type lateWorker struct {
	name       string
	answerFrom int // 0: never

	mu   sync.Mutex
	seen map[string]int // commands seen per method
}

func (w *lateWorker) Broadcast(ctx context.Context, cmd celery.ControlCommand) ([]celery.ControlReply, error) {
	w.mu.Lock()
	if w.seen == nil {
		w.seen = map[string]int{}
	}
	w.seen[cmd.Method]++
	round := w.seen[cmd.Method]
	w.mu.Unlock()
	if len(cmd.Destination) != 1 || cmd.Destination[0] != w.name || w.answerFrom == 0 || round < w.answerFrom {
		<-ctx.Done() // nobody answers: the inspect timeout passes
		return nil, nil
	}
	return []celery.ControlReply{{Hostname: w.name, Value: json.RawMessage(`{}`)}}, nil
}

func (w *lateWorker) roundsSeen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen["stats"]
}

func newDiscoverer(w *lateWorker) *Inspector {
	in := New(w, 20*time.Millisecond, 0, slog.New(slog.DiscardHandler))
	in.discovery.delays = []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}
	in.discovery.cooldown = time.Hour
	return in
}

func TestDiscoverRetriesUntilTheWorkerAnswers(t *testing.T) {
	w := &lateWorker{name: "late@h", answerFrom: 3}
	in := newDiscoverer(w)
	work := in.Discover(t.Context(), w.name)
	if work == nil {
		t.Fatal("an unknown worker is not discovered")
	}
	if again := in.Discover(t.Context(), w.name); again != nil {
		t.Error("a second discovery starts while one is under way")
	}
	work()
	if !in.complete(w.name) {
		t.Fatalf("not every method cached after the worker answered: %v", in.Names())
	}
	if got := w.roundsSeen(); got != 3 {
		t.Errorf("%d rounds of inspect, want 3 (two lost, one answered)", got)
	}
	if again := in.Discover(t.Context(), w.name); again != nil {
		t.Error("a known worker is discovered again")
	}
}

func TestDiscoverGivesUpAndCoolsDown(t *testing.T) {
	w := &lateWorker{name: "silent@h"}
	in := newDiscoverer(w)
	now := time.Now()
	in.now = func() time.Time { return now }
	in.Discover(t.Context(), w.name)()
	if got, want := w.roundsSeen(), len(in.discovery.delays)+1; got != want {
		t.Errorf("%d rounds of inspect to a silent worker, want %d", got, want)
	}
	if in.Discover(t.Context(), w.name) != nil {
		t.Error("a worker given up on is discovered again before the cooldown ends")
	}
	now = now.Add(time.Hour)
	if in.Discover(t.Context(), w.name) == nil {
		t.Error("a worker is never discovered again after the cooldown")
	}
}

// TestDiscoveriesAreBounded: names come from events anyone can publish;
// only so many discoveries run or are remembered at once.
func TestDiscoveriesAreBounded(t *testing.T) {
	w := &lateWorker{name: "late@h"}
	in := newDiscoverer(w)
	now := time.Now()
	in.now = func() time.Time { return now }
	for i := range maxDiscoveries {
		if in.Discover(t.Context(), fmt.Sprintf("forged-%d@h", i)) == nil {
			t.Fatalf("discovery %d refused below the bound", i)
		}
	}
	if in.Discover(t.Context(), w.name) != nil {
		t.Fatalf("discovery %d started beyond the bound", maxDiscoveries+1)
	}
	// One that gave up and cooled down makes room.
	in.discovery.mu.Lock()
	in.discovery.workers["forged-0@h"] = now.Add(-time.Second)
	in.discovery.mu.Unlock()
	if in.Discover(t.Context(), w.name) == nil {
		t.Error("no room made by a discovery whose cooldown ended")
	}
}
