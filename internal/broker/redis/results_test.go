package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/pyfmt"
)

// resultFixture is a fresh task ID with a client on the results db; the
// task's document is removed after the test.
func resultFixture(t *testing.T) (string, *goredis.Client) {
	t.Helper()
	rdb := admin(t, resultDB)
	id := uuid.NewString()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rdb.Del(ctx, celery.ResultKey(id)).Err()
	})
	return id, rdb
}

// doc is a result document in Celery's layout for id.
func doc(id, status, result string) string {
	done := "null"
	if status == "SUCCESS" || status == "FAILURE" || status == "REVOKED" {
		done = `"2026-11-22T17:33:19.285275"`
	}
	return fmt.Sprintf(`{"status": %q, "result": %s, "traceback": null, "children": [], "date_done": %s, "task_id": %q}`,
		status, result, done, id)
}

// store writes a document the way a worker does: SETEX, then PUBLISH.
func store(ctx context.Context, rdb *goredis.Client, id, document string, publish bool) error {
	key := celery.ResultKey(id)
	if err := rdb.SetEx(ctx, key, document, time.Hour).Err(); err != nil {
		return err
	}
	if publish {
		return rdb.Publish(ctx, key, document).Err()
	}
	return nil
}

func TestResult(t *testing.T) {
	b := newTestBroker(t)
	id, rdb := resultFixture(t)
	r, err := b.Result(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "PENDING" || r.TaskID != id || r.Ready() {
		t.Errorf("missing document gives %+v, want PENDING", r)
	}

	// The lab's FAILURE document, byte for byte.
	failure := readWire(t, "result-meta-failure-redis.json")
	if err := rdb.SetEx(t.Context(), celery.ResultKey(id), failure, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	r, err = b.Result(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "FAILURE" || !r.Ready() || pyfmt.ExceptionRepr(r.Result) != "ValueError('kaput')" || r.Traceback == nil {
		t.Errorf("FAILURE document gives %+v", r)
	}

	if err := rdb.Set(t.Context(), celery.ResultKey(id), "not json", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Result(t.Context(), id); err == nil || errors.Is(err, celery.ErrUnavailable) {
		t.Errorf("garbage document: %v, want a decode error", err)
	}
}

// resultStep is one document a fake worker writes while a test waits.
type resultStep struct {
	after   time.Duration
	status  string
	publish bool
}

func TestWaitResult(t *testing.T) {
	b := newTestBroker(t)
	tests := []struct {
		name string
		// steps are written by a fake worker, each after its delay.
		steps      []resultStep
		wantStatus string
		// within bounds how long the wait may take.
		within time.Duration
	}{
		{
			name:       "already stored",
			steps:      []resultStep{{0, "SUCCESS", false}},
			wantStatus: "SUCCESS", within: 300 * time.Millisecond,
		},
		{
			// Faster than the 500 ms poll: the notification did it.
			name:       "notified",
			steps:      []resultStep{{150 * time.Millisecond, "STARTED", true}, {250 * time.Millisecond, "SUCCESS", true}},
			wantStatus: "SUCCESS", within: 450 * time.Millisecond,
		},
		{
			name:       "stored without notification",
			steps:      []resultStep{{100 * time.Millisecond, "FAILURE", false}},
			wantStatus: "FAILURE", within: 1200 * time.Millisecond,
		},
		{
			name:       "retry is not the end",
			steps:      []resultStep{{50 * time.Millisecond, "RETRY", true}, {200 * time.Millisecond, "REVOKED", true}},
			wantStatus: "REVOKED", within: 450 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, rdb := resultFixture(t)
			if len(tt.steps) > 0 && tt.steps[0].after == 0 {
				if err := store(t.Context(), rdb, id, doc(id, tt.steps[0].status, "1"), false); err != nil {
					t.Fatal(err)
				}
				tt.steps = tt.steps[1:]
			}
			done := make(chan error, 1)
			go func() {
				start := time.Now()
				for _, s := range tt.steps {
					time.Sleep(time.Until(start.Add(s.after)))
					if err := store(context.Background(), rdb, id, doc(id, s.status, `"v"`), s.publish); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			start := time.Now()
			r, err := b.WaitResult(ctx, id)
			elapsed := time.Since(start)
			if werr := <-done; werr != nil {
				t.Fatal(werr)
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tt.wantStatus || r.TaskID != id {
				t.Errorf("WaitResult = %+v, want %s", r, tt.wantStatus)
			}
			if elapsed > tt.within {
				t.Errorf("WaitResult took %v, want at most %v", elapsed, tt.within)
			}
		})
	}
}

func TestWaitResultDeadline(t *testing.T) {
	b := newTestBroker(t)
	id, rdb := resultFixture(t)
	if err := store(t.Context(), rdb, id, doc(id, "STARTED", `{"pid": 1, "hostname": "w@h"}`), true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	r, err := b.WaitResult(ctx, id)
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, celery.ErrUnavailable) || r != nil {
		t.Errorf("WaitResult = %+v, %v; want DeadlineExceeded", r, err)
	}
	if elapsed < 650*time.Millisecond || elapsed > time.Second {
		t.Errorf("WaitResult returned after %v, want about 700ms", elapsed)
	}

	// Cancelling works as well, without a deadline.
	cctx, ccancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, ccancel)
	if _, err := b.WaitResult(cctx, id); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled WaitResult: %v, want Canceled", err)
	}
}

func TestAbort(t *testing.T) {
	b := newTestBroker(t)
	tests := []struct {
		name      string
		stored    string // status stored before; "" for none
		wantAfter string
		published bool
	}{
		{"pending", "", "ABORTED", true},
		{"started", "STARTED", "ABORTED", true},
		{"retrying", "RETRY", "ABORTED", true},
		{"succeeded is kept", "SUCCESS", "SUCCESS", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, rdb := resultFixture(t)
			if tt.stored != "" {
				if err := store(t.Context(), rdb, id, doc(id, tt.stored, "1"), false); err != nil {
					t.Fatal(err)
				}
			}
			// Listen like an AbortableTask's client would.
			ps := rdb.Subscribe(t.Context(), celery.ResultKey(id))
			defer ps.Close()
			if _, err := ps.Receive(t.Context()); err != nil {
				t.Fatal(err)
			}

			if err := b.Abort(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			r, err := b.Result(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tt.wantAfter {
				t.Errorf("status after Abort = %s, want %s", r.Status, tt.wantAfter)
			}
			if !tt.published {
				return
			}
			stored, err := rdb.Get(t.Context(), celery.ResultKey(id)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if want := string(celery.AbortedDocument(id)); stored != want {
				t.Errorf("stored %s, want %s", stored, want)
			}
			ttl, err := rdb.TTL(t.Context(), celery.ResultKey(id)).Result()
			if err != nil || ttl < 23*time.Hour || ttl > 24*time.Hour {
				t.Errorf("TTL = %v, %v; want one day", ttl, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			msg, err := ps.ReceiveMessage(ctx)
			if err != nil {
				t.Fatalf("no notification: %v", err)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(msg.Payload), &got); err != nil || got["status"] != "ABORTED" {
				t.Errorf("notification %s", msg.Payload)
			}
			if !strings.Contains(msg.Channel, id) {
				t.Errorf("notified on %s", msg.Channel)
			}
		})
	}
}

// TestResults: one MGET reads several documents in order, nil where there
// is none or one stamen cannot read.
func TestResults(t *testing.T) {
	b := newTestBroker(t)
	ok, rdb := resultFixture(t)
	failed, _ := resultFixture(t)
	pickled, _ := resultFixture(t)
	missing := uuid.NewString()
	ctx := t.Context()
	for _, d := range []struct{ id, doc string }{
		{ok, doc(ok, "SUCCESS", "3")},
		{failed, doc(failed, "FAILURE", `{"exc_type": "ValueError", "exc_message": ["x"]}`)},
		{pickled, "\x80\x04\x95"},
	} {
		if err := store(ctx, rdb, d.id, d.doc, false); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.Results(ctx, []string{ok, missing, failed, pickled})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0] == nil || got[0].Status != "SUCCESS" || string(got[0].Result) != "3" ||
		got[1] != nil || got[2] == nil || got[2].Status != "FAILURE" || got[3] != nil {
		t.Errorf("Results: %+v", got)
	}
	if got, err := b.Results(ctx, nil); err != nil || got != nil {
		t.Errorf("Results(nil) = %v, %v", got, err)
	}
}
