package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stamen-dev/stamen/internal/broker"
	"github.com/stamen-dev/stamen/internal/redact"
)

// readyTimeout bounds the checks of one /readyz call: a probe that waits
// longer than Kubernetes' default timeout (1 s) counts as failed anyway.
const readyTimeout = time.Second

// notReady names what keeps the app from serving, with why: "broker"
// while the event subscription is not established (the monitor would show
// a frozen cluster), "store" while the store or database does not answer.
// Empty means ready.
func (a *App) notReady(ctx context.Context) map[string]string {
	out := map[string]string{}
	if s, ok := a.broker.(broker.Subscriber); ok && !s.EventsSubscribed() {
		out["broker"] = "not subscribed to the broker's events"
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var err error
	if a.db != nil {
		err = a.db.Ping(ctx)
	}
	if err != nil {
		// /readyz answers anyone: the reason names no host, user or
		// database; the log has the error.
		out["store"] = "the store does not answer"
		a.log.Debug("not ready: the store does not answer", slog.String("err", redact.String(err.Error())))
	}
	return out
}

// readyHandler answers /readyz: 200 while check finds nothing missing,
// else 503 with an error naming what is not ready. /healthcheck stays
// Flower's liveness answer, which only says the process serves.
func readyHandler(check func(context.Context) map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		missing := check(r.Context())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if len(missing) == 0 {
			_ = json.NewEncoder(w).Encode(map[string]string{"status": "ready"})
			return
		}
		names := make([]string, 0, len(missing))
		for name := range missing {
			names = append(names, name)
		}
		slices.Sort(names)
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(struct {
			Error    string            `json:"error"`
			NotReady map[string]string `json:"not_ready"`
		}{"not ready: " + strings.Join(names, ", "), missing})
	})
}
