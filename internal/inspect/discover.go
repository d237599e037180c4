package inspect

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// A worker sends worker-online (and its first heartbeats) before its
// remote-control mailbox exists: Celery's Heart bootstep starts before
// Control, so an inspect sent on worker-online finds no pidbox queue
// (RabbitMQ) or no subscriber (Redis) and is lost. Discovery therefore
// asks again, with backoff, until the worker has answered every method.
const (
	// maxDiscoveries bounds the workers being discovered or cooling down
	// at once: worker names come from events anyone on the broker can
	// publish, and each discovery broadcasts.
	maxDiscoveries = 256
	// discoverCooldown is how long a worker that never answered is left
	// alone before its heartbeats start a discovery again.
	discoverCooldown = 5 * time.Minute
)

// discoverDelays are the pauses before each retry: six attempts over about
// 15 s plus the inspect timeout of each.
var discoverDelays = []time.Duration{
	500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
}

// discovery remembers which workers are being discovered (zero time) or
// were given up on (until when they are left alone). The zero value is
// ready.
type discovery struct {
	mu      sync.Mutex
	workers map[string]time.Time
	// delays and cooldown replace the defaults in tests.
	delays   []time.Duration
	cooldown time.Duration
}

// Discover returns the work that inspects worker until it has answered
// every inspect method, retrying with backoff, or nil when there is
// nothing to do: the worker is fully known, a discovery of it is under way
// or gave up less than a cooldown ago, or too many are. The caller runs
// the work on a goroutine it owns; the work ends early when ctx does.
func (in *Inspector) Discover(ctx context.Context, worker string) func() {
	if worker == "" || in.complete(worker) {
		return nil
	}
	d := &in.discovery
	now := in.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.workers == nil {
		d.workers = map[string]time.Time{}
	}
	if until, ok := d.workers[worker]; ok && (until.IsZero() || now.Before(until)) {
		return nil
	}
	if len(d.workers) >= maxDiscoveries {
		for w, until := range d.workers {
			if !until.IsZero() && !now.Before(until) {
				delete(d.workers, w)
			}
		}
		if len(d.workers) >= maxDiscoveries {
			return nil
		}
	}
	d.workers[worker] = time.Time{}
	delays, cooldown := d.delays, d.cooldown
	if delays == nil {
		delays = discoverDelays
	}
	if cooldown == 0 {
		cooldown = discoverCooldown
	}
	return func() {
		answered := in.discover(ctx, worker, delays)
		d.mu.Lock()
		defer d.mu.Unlock()
		if answered || ctx.Err() != nil {
			delete(d.workers, worker)
		} else {
			d.workers[worker] = in.now().Add(cooldown)
		}
	}
}

// discover refreshes worker, then again after each delay, until it has
// answered every method. It reports whether it did.
func (in *Inspector) discover(ctx context.Context, worker string, delays []time.Duration) bool {
	for attempt := 0; ; attempt++ {
		// Refresh waits at most the inspect timeout for each method.
		_ = in.Refresh(ctx, worker)
		if in.complete(worker) {
			if attempt > 0 {
				in.log.Debug("worker answered inspect after retries", slog.String("worker", worker), slog.Int("retries", attempt))
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if attempt == len(delays) {
			in.log.Warn("worker did not answer inspect; /api/workers lists it only after ?refresh=1",
				slog.String("worker", worker), slog.Int("attempts", attempt+1))
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delays[attempt]):
		}
	}
}

// complete reports whether worker has answered every inspect method.
func (in *Inspector) complete(worker string) bool {
	in.mu.RLock()
	defer in.mu.RUnlock()
	w, ok := in.workers[worker]
	return ok && len(w.replies) == len(Methods)
}
