package handlers

import (
	"testing"
	"time"

	"github.com/stamen-dev/stamen/gen/models"
)

// TestTaskMessageETA: every form of eta a Flower or Celery client sends is
// read as Celery reads it; an ISO 8601 time without an offset is UTC.
func TestTaskMessageETA(t *testing.T) {
	h := New(Config{})
	tests := []struct {
		eta  string
		want time.Time
	}{
		{"2030-01-01T00:00:00", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"2030-01-01T12:30:45.123456", time.Date(2030, 1, 1, 12, 30, 45, 123456000, time.UTC)},
		{"2030-01-01T00:00:00+02:00", time.Date(2029, 12, 31, 22, 0, 0, 0, time.UTC)},
		{"2030-01-01T00:00:00Z", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
		// Flower's own format is naive local time, as Flower takes it.
		{"2030-01-01 00:00:00.000000", time.Date(2030, 1, 1, 0, 0, 0, 0, time.Local)},
	}
	for _, tt := range tests {
		msg, err := h.taskMessage("t", &models.TaskApplyRequest{Eta: tt.eta})
		if err != nil {
			t.Errorf("eta %q: %v", tt.eta, err)
			continue
		}
		if msg.ETA == nil || !msg.ETA.Equal(tt.want) {
			t.Errorf("eta %q = %v, want %v", tt.eta, msg.ETA, tt.want)
		}
	}
	for _, bad := range []string{"2030-01-01", "2030-13-01T00:00:00", "tomorrow"} {
		if _, err := h.taskMessage("t", &models.TaskApplyRequest{Eta: bad}); err == nil {
			t.Errorf("eta %q accepted", bad)
		}
	}
}
