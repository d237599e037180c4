package celery

import (
	"context"
	"log/slog"
	"time"
)

// Broadcaster sends a remote-control command through the pidbox; every
// broker implements it.
type Broadcaster interface {
	Broadcast(ctx context.Context, cmd ControlCommand) ([]ControlReply, error)
}

// WakeWorkers asks every worker for a heartbeat, the way a Python event
// receiver starts, so that workers announce themselves at once; with
// enableEvents also for task events, so that workers started without -E
// send them (off with Flower's --enable_events=false, which leaves the
// workers' setting alone).
func WakeWorkers(ctx context.Context, b Broadcaster, enableEvents bool, log *slog.Logger) {
	methods := []string{"heartbeat", "enable_events"}
	if !enableEvents {
		methods = methods[:1]
	}
	for _, method := range methods {
		if _, err := b.Broadcast(ctx, ControlCommand{Method: method}); err != nil {
			log.Debug("broadcast failed", slog.String("method", method), slog.Any("err", err))
		}
	}
}

// EnableEventsLoop re-broadcasts enable_events every period until ctx ends:
// the setting does not survive a worker restart (Flower does the same every
// 5 s).
func EnableEventsLoop(ctx context.Context, b Broadcaster, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := b.Broadcast(ctx, ControlCommand{Method: "enable_events"}); err != nil {
				log.Debug("enable_events broadcast failed", slog.Any("err", err))
			}
		}
	}
}
