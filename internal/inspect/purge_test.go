package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
)

// echoWorkers answers every command for the workers it is sent to.
type echoWorkers struct{}

func (echoWorkers) Broadcast(_ context.Context, cmd celery.ControlCommand) ([]celery.ControlReply, error) {
	var out []celery.ControlReply
	for _, d := range cmd.Destination {
		out = append(out, celery.ControlReply{Hostname: d, Value: json.RawMessage(`{}`)})
	}
	return out, nil
}

// TestPurgeForgetsOldWorkersNotKept: of workers that answered long ago,
// those keep does not claim go; recent answers and kept workers stay.
func TestPurgeForgetsOldWorkersNotKept(t *testing.T) {
	now := time.Unix(1.7e9, 0)
	in := New(echoWorkers{}, time.Second, 0, slog.New(slog.DiscardHandler))
	in.now = func() time.Time { return now }
	ctx := context.Background()
	for i := range 1000 {
		if err := in.Refresh(ctx, fmt.Sprintf("old%d@h", i)); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Hour)
	for _, w := range []string{"new@h", "old0@h"} {
		if err := in.Refresh(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	gone := in.Purge(now.Add(-time.Minute), func(w string) bool { return w == "old1@h" })
	if len(gone) != 998 || in.Len() != 3 {
		t.Errorf("purged %d, %d left; want 998 and 3", len(gone), in.Len())
	}
	for _, w := range []string{"new@h", "old0@h", "old1@h"} {
		if !in.Known(w) {
			t.Errorf("%s was purged", w)
		}
	}
}

// TestCacheBounded: without a purge age nothing else forgets a worker that
// answered once, so the cache holds at most its bound (DefaultMaxWorkers,
// or --max_workers'), and new names push out those that answered longest
// ago, not the recent ones.
func TestCacheBounded(t *testing.T) {
	for _, tc := range []struct{ given, bound int }{{0, DefaultMaxWorkers}, {400, 400}} {
		t.Run(fmt.Sprint(tc.bound), func(t *testing.T) {
			now := time.Unix(1.7e9, 0)
			in := New(echoWorkers{}, time.Second, tc.given, slog.New(slog.DiscardHandler))
			in.now = func() time.Time { return now }
			ctx := context.Background()
			names := 3 * tc.bound
			for i := range names {
				now = now.Add(time.Second)
				if err := in.Refresh(ctx, fmt.Sprintf("w%d@h", i)); err != nil {
					t.Fatal(err)
				}
			}
			if in.Len() > tc.bound {
				t.Errorf("%d workers cached after %d names, want at most %d", in.Len(), names, tc.bound)
			}
			// An eviction leaves seven eighths of the bound, the newest.
			for _, w := range []string{"w0@h", fmt.Sprintf("w%d@h", names-tc.bound-1)} {
				if in.Known(w) {
					t.Errorf("%s, among the oldest, is still cached", w)
				}
			}
			for i := names - tc.bound*7/8; i < names; i++ {
				if w := fmt.Sprintf("w%d@h", i); !in.Known(w) {
					t.Fatalf("%s, among the newest, was dropped", w)
				}
			}
		})
	}
}
