package celery

import (
	"context"
	"log/slog"
	"slices"
	"testing"
)

// castRecorder is a Broadcaster that records the methods it is asked to
// send.
type castRecorder struct{ methods []string }

func (r *castRecorder) Broadcast(_ context.Context, cmd ControlCommand) ([]ControlReply, error) {
	r.methods = append(r.methods, cmd.Method)
	return nil, nil
}

// TestWakeWorkers: a heartbeat is always asked for; task events only with
// enableEvents (Flower's --enable_events).
func TestWakeWorkers(t *testing.T) {
	for _, tc := range []struct {
		enableEvents bool
		want         []string
	}{
		{true, []string{"heartbeat", "enable_events"}},
		{false, []string{"heartbeat"}},
	} {
		var r castRecorder
		WakeWorkers(t.Context(), &r, tc.enableEvents, slog.New(slog.DiscardHandler))
		if !slices.Equal(r.methods, tc.want) {
			t.Errorf("enableEvents %v: sent %v, want %v", tc.enableEvents, r.methods, tc.want)
		}
	}
}
