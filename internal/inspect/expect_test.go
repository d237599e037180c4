package inspect

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
)

// fleet answers every command at once for its answering workers; the
// others never answer. Like a broker, it returns when the command has
// collected what it waits for, else when ctx ends.
type fleet struct{ answering []string }

func (f fleet) Broadcast(ctx context.Context, cmd celery.ControlCommand) ([]celery.ControlReply, error) {
	var replies []celery.ControlReply
	for _, w := range f.answering {
		if len(cmd.Destination) == 0 || slices.Contains(cmd.Destination, w) {
			replies = append(replies, celery.ControlReply{Hostname: w, Value: json.RawMessage(`{}`)})
		}
	}
	if !cmd.Collected(replies) {
		<-ctx.Done()
	}
	return replies, nil
}

// An extra unit test of the waiting rule (the behaviour with real workers
// is TestWorkersRefreshWaitsOnlyForSilentWorkers in internal/e2e).
func TestRefreshWaitsForAliveWorkersOnly(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for _, tc := range []struct {
		name      string
		answering []string
		alive     []string
		target    string
		wantSlow  bool
		timedOut  []string
	}{
		{name: "all alive answer", answering: []string{"a", "b", "c"}, alive: []string{"a", "b", "c"}},
		{name: "one silent", answering: []string{"a", "b"}, alive: []string{"a", "b", "c"}, wantSlow: true, timedOut: []string{"c"}},
		{name: "none alive waits the timeout", answering: []string{"a"}, wantSlow: true},
		{name: "one worker answers", answering: []string{"a"}, target: "a"},
		{name: "one worker silent", answering: []string{"a"}, target: "b", wantSlow: true, timedOut: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := New(fleet{answering: tc.answering}, timeout, 0, slog.New(slog.DiscardHandler))
			defer in.Close()
			if tc.alive != nil {
				in.SetAlive(func() []string { return tc.alive })
			}
			began := time.Now()
			got, err := in.RefreshReport(context.Background(), tc.target)
			took := time.Since(began)
			if err != nil {
				t.Fatal(err)
			}
			if slow := took >= timeout; slow != tc.wantSlow {
				t.Errorf("took %s with a %s timeout; want slow=%v", took, timeout, tc.wantSlow)
			}
			if !slices.Equal(got, tc.timedOut) {
				t.Errorf("timed out %v, want %v", got, tc.timedOut)
			}
			for _, w := range tc.answering {
				if (tc.target == "" || tc.target == w) && !in.complete(w) {
					t.Errorf("%s answered but is not cached", w)
				}
			}
		})
	}
}
