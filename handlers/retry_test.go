package handlers

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

func TestRetryBody(t *testing.T) {
	orig := &sentTask{Name: "t", Args: []any{1}, Kwargs: map[string]any{"k": 1}, Queue: "q", Priority: 4}
	three := int32(3)
	tests := []struct {
		name    string
		opts    *models.TaskApplyRequest
		want    *models.TaskApplyRequest
		wantErr bool
	}{
		{"as sent", nil, &models.TaskApplyRequest{Args: []any{1}, Kwargs: map[string]any{"k": 1}, Queue: "q", Priority: ptrTo(int32(4))}, false},
		{"new route replaces the whole route", &models.TaskApplyRequest{Exchange: "x", RoutingKey: "rk", Priority: &three, Countdown: 5},
			&models.TaskApplyRequest{Args: []any{1}, Kwargs: map[string]any{"k": 1}, Exchange: "x", RoutingKey: "rk", Priority: &three, Countdown: 5}, false},
		{"args refused", &models.TaskApplyRequest{Args: []any{2}}, nil, true},
		{"kwargs refused", &models.TaskApplyRequest{Kwargs: map[string]any{}}, nil, true},
		{"task_id refused", &models.TaskApplyRequest{TaskID: "x"}, nil, true},
	}
	for _, tt := range tests {
		got, err := retryBody(orig, tt.opts)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: error %v, want error %v", tt.name, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: body (-want +got):\n%s", tt.name, diff)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestFromEvents(t *testing.T) {
	full := taskrec.FieldName | taskrec.FieldArgs | taskrec.FieldKwargs | taskrec.FieldExchange | taskrec.FieldRoutingKey
	tests := []struct {
		name string
		task taskrec.Task
		want *sentTask
	}{
		{"default exchange", taskrec.Task{Name: "t", Args: "(1, 'a')", Kwargs: "{'k': None}", RoutingKey: "q1", Set: full},
			&sentTask{Name: "t", Args: []any{json.Number("1"), "a"}, Kwargs: map[string]any{"k": nil}, Queue: "q1"}},
		{"the queue's own exchange", taskrec.Task{Name: "t", Args: "()", Kwargs: "{}", Exchange: "q1", RoutingKey: "q1", Set: full},
			&sentTask{Name: "t", Args: []any{}, Kwargs: map[string]any{}, Queue: "q1"}},
		{"another exchange", taskrec.Task{Name: "t", Args: "()", Kwargs: "{}", Exchange: "x", RoutingKey: "a.b", Set: full},
			&sentTask{Name: "t", Args: []any{}, Kwargs: map[string]any{}, Exchange: "x", RoutingKey: "a.b"}},
		{"no route", taskrec.Task{Name: "t", Args: "()", Kwargs: "{}", Set: taskrec.FieldName | taskrec.FieldArgs | taskrec.FieldKwargs}, nil},
		{"cut args", taskrec.Task{Name: "t", Args: "('xxx...', ...", Kwargs: "{}", RoutingKey: "q", Set: full}, nil},
		{"cut kwargs", taskrec.Task{Name: "t", Args: "()", Kwargs: "{'a': 'yy...'}", RoutingKey: "q", Set: full}, nil},
		{"no args", taskrec.Task{Name: "t", RoutingKey: "q", Set: taskrec.FieldName | taskrec.FieldRoutingKey}, nil},
	}
	for _, tt := range tests {
		got, why := fromEvents(&tt.task)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tt.name, diff)
		}
		if got == nil && why == "" {
			t.Errorf("%s: refused without a reason", tt.name)
		}
	}
}

// TestMemorySentLog bounds the in-memory log by count and age, oldest
// first, and keeps a record put again as the newest.
func TestMemorySentLog(t *testing.T) {
	m := NewMemorySentLog(3, time.Hour)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(id string, min int) {
		if err := m.PutSent(context.Background(), id, t0.Add(time.Duration(min)*time.Minute), []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	has := func(id string) bool { _, ok, _ := m.Sent(context.Background(), id); return ok }
	put("a", 0)
	put("b", 1)
	put("c", 2)
	put("a", 3) // again: now the newest
	put("d", 4) // four order entries for three records: b goes
	if has("b") || !has("a") || !has("c") || !has("d") {
		t.Errorf("after count pruning: a %v b %v c %v d %v", has("a"), has("b"), has("c"), has("d"))
	}
	put("e", 63) // c (minute 2) is over an hour old
	if has("c") || !has("a") || !has("e") {
		t.Errorf("after age pruning: a %v c %v e %v", has("a"), has("c"), has("e"))
	}
}

// TestReceivedRange: GET /api/tasks and the operations taking its filters
// read received_start/received_end alike: local time, nil when absent, an
// error naming the parameter.
func TestReceivedRange(t *testing.T) {
	good, bad := "2024-05-06 07:08", "2024-05-06T07:08"
	from, to, err := receivedRange(&good, nil)
	if err != nil || to != nil || !from.Equal(time.Date(2024, 5, 6, 7, 8, 0, 0, time.Local)) {
		t.Errorf("receivedRange(%q, nil) = %v, %v, %v", good, from, to, err)
	}
	if _, _, err := receivedRange(&bad, &good); err == nil || err.Error() != "received_start must be YYYY-MM-DD HH:MM" {
		t.Errorf("bad start: %v", err)
	}
	if _, _, err := receivedRange(&good, &bad); err == nil || err.Error() != "received_end must be YYYY-MM-DD HH:MM" {
		t.Errorf("bad end: %v", err)
	}
}

// TestBulkIDs: the ids of a bulk operation are checked before anything is
// selected: each a task id, duplicates once.
func TestBulkIDs(t *testing.T) {
	if got, fail := bulkIDs(nil); got != nil || fail != nil {
		t.Errorf("no ids: %v %v, want nil (no id filter)", got, fail)
	}
	got, fail := bulkIDs([]string{"a", "b", "a", "c"})
	if fail != nil || !cmp.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("a, b, a, c: %v %v", got, fail)
	}
	for _, bad := range [][]string{{"a", "b c"}, {"a\n"}, {""}, {"\xff"}} {
		if got, fail := bulkIDs(bad); got != nil || fail == nil {
			t.Errorf("%q: %v, want a 400", bad, got)
		} else if e, ok := fail.(errorResponse); !ok || e.status != 400 {
			t.Errorf("%q: %#v, want a 400", bad, fail)
		}
	}
}

// TestCSVText: a text cell that a spreadsheet would run as a formula gets
// a leading single quote; any other is written as it is.
func TestCSVText(t *testing.T) {
	for in, want := range map[string]string{
		`=HYPERLINK("http://x","y")`: `'=HYPERLINK("http://x","y")`,
		"+1":                         "'+1",
		"-4":                         "'-4",
		"@SUM(A1)":                   "'@SUM(A1)",
		"\tx":                        "'\tx",
		"\rx":                        "'\rx",
		"":                           "",
		"(1, 'a')":                   "(1, 'a')",
		" =1":                        " =1",
		"a=1":                        "a=1",
	} {
		if got := csvText(in); got != want {
			t.Errorf("csvText(%q) = %q, want %q", in, got, want)
		}
	}
}
