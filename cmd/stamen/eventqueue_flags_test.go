package main

import (
	"strings"
	"testing"
	"time"
)

// TestEventQueueAndReconcileOptions: the durable event queue's and the
// reconciler's options, from flags and the environment, with their
// defaults; a bad name or bound stops stamen at start, saying which.
func TestEventQueueAndReconcileOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(o options) bool
		wantErr string
	}{
		{name: "defaults", check: func(o options) bool {
			return o.eventQueue == "" && o.eventQueueTTL == time.Hour && o.eventQueueMaxLength == 1_000_000 &&
				o.reconcileAfter == 5*time.Minute && o.reconcileInterval == time.Minute && o.reconcileMaxLookups == 1000
		}},
		{name: "flags", args: []string{"--event_queue", "stamen.events", "--event-queue-ttl", "10m", "--event_queue_max_length", "5000",
			"--reconcile_after", "30s", "--reconcile_interval", "5s", "--reconcile_max_lookups", "50"},
			check: func(o options) bool {
				return o.eventQueue == "stamen.events" && o.eventQueueTTL == 10*time.Minute && o.eventQueueMaxLength == 5000 &&
					o.reconcileAfter == 30*time.Second && o.reconcileInterval == 5*time.Second && o.reconcileMaxLookups == 50
			}},
		{name: "environment", env: map[string]string{"STAMEN_EVENT_QUEUE": "fleet:events", "FLOWER_EVENT_QUEUE_TTL": "2h", "STAMEN_RECONCILE_AFTER": "1m"},
			check: func(o options) bool {
				return o.eventQueue == "fleet:events" && o.eventQueueTTL == 2*time.Hour && o.reconcileAfter == time.Minute
			}},
		{name: "name with a space", args: []string{"--event_queue", "my events"}, wantErr: "is not a letter"},
		{name: "reserved name", args: []string{"--event_queue", "amq.events"}, wantErr: "reserves"},
		{name: "long name", args: []string{"--event_queue", strings.Repeat("q", 201)}, wantErr: "1 to 200 bytes"},
		{name: "control byte", env: map[string]string{"STAMEN_EVENT_QUEUE": "ev\x1b[31m"}, wantErr: "--event_queue"},
		{name: "zero length", args: []string{"--event_queue_max_length", "0"}, wantErr: "--event_queue_max_length"},
		{name: "zero ttl", args: []string{"--event_queue_ttl", "0s"}, wantErr: "--event_queue_ttl"},
		{name: "zero interval", args: []string{"--reconcile_interval", "0s"}, wantErr: "--reconcile_interval"},
		{name: "unreadable env", env: map[string]string{"STAMEN_RECONCILE_AFTER": "soon"}, wantErr: "STAMEN_RECONCILE_AFTER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if o, ok := parseCase(t, tc.env, tc.args, tc.wantErr); ok && !tc.check(o) {
				t.Fatalf("options %+v", o)
			}
		})
	}
}
