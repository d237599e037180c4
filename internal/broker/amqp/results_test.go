package amqp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// sendResult sends a captured rpc:// result for taskID to replyTo, the way
// a worker does.
func sendResult(a *admin, replyTo, taskID string, capture wire) {
	a.t.Helper()
	var fixtureID struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal([]byte(capture.BodyRaw), &fixtureID); err != nil {
		a.t.Fatal(err)
	}
	a.publish("", replyTo, amqp091.Publishing{
		CorrelationId:   taskID,
		ContentType:     "application/json",
		ContentEncoding: "utf-8",
		DeliveryMode:    amqp091.Transient,
		Body:            []byte(strings.ReplaceAll(capture.BodyRaw, fixtureID.TaskID, taskID)),
	})
}

// publishAdd publishes a task to a new queue and returns its id and the
// reply_to a worker would answer to.
func publishAdd(t *testing.T, b *Broker, a *admin) (taskID, replyTo string) {
	t.Helper()
	queue := "stamen-test-" + uuid.NewString()
	a.deleteQueue(queue)
	taskID = uuid.NewString()
	if err := b.Publish(t.Context(), &celery.TaskMessage{ID: taskID, Name: "harness.add", Args: []any{2, 3}, Queue: queue, Declare: workerDecl(t, queue, 0)}); err != nil {
		t.Fatal(err)
	}
	return taskID, a.get(queue).ReplyTo
}

// waitSuccess waits for the task's result in the background, at most d, and
// reports nil there if it is SUCCESS with the result 5.
func waitSuccess(ctx context.Context, b *Broker, taskID string, d time.Duration) <-chan error {
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		r, err := b.WaitResult(ctx, taskID)
		if err == nil && (r.Status != celery.StateSuccess || string(r.Result) != "5") {
			err = fmt.Errorf("got %+v", r)
		}
		waited <- err
	}()
	return waited
}

func TestRPCResults(t *testing.T) {
	b := newTestBroker(t, "rpc://")
	a := newAdmin(t)
	// Answer the task like a worker: to its reply_to.
	taskID, replyTo := publishAdd(t, b, a)

	r, err := b.Result(t.Context(), taskID)
	if err != nil || r.Status != celery.StatePending || r.TaskID != taskID {
		t.Fatalf("before any result: %+v, %v", r, err)
	}

	sendResult(a, replyTo, taskID, readWire(t, "result-rpc-started-amqp.json"))
	eventually(t, 5*time.Second, "STARTED", func() bool {
		r, err := b.Result(t.Context(), taskID)
		return err == nil && r.Status == celery.StateStarted
	})

	waited := waitSuccess(t.Context(), b, taskID, 10*time.Second)
	// Let WaitResult get going, so that the result arrives while it waits.
	time.Sleep(100 * time.Millisecond)
	sendResult(a, replyTo, taskID, readWire(t, "result-rpc-success-amqp.json"))
	if err := <-waited; err != nil {
		t.Fatalf("WaitResult: %v", err)
	}

	// A late intermediate state does not undo the final one.
	sendResult(a, replyTo, taskID, readWire(t, "result-rpc-started-amqp.json"))
	failID := uuid.NewString()
	sendResult(a, replyTo, failID, readWire(t, "result-rpc-failure-amqp.json"))
	eventually(t, 5*time.Second, "FAILURE", func() bool {
		r, err := b.Result(t.Context(), failID)
		return err == nil && r.Status == celery.StateFailure && r.Traceback != nil
	})
	r, err = b.Result(t.Context(), taskID)
	if err != nil || r.Status != celery.StateSuccess {
		t.Errorf("after a late STARTED: %+v, %v", r, err)
	}
	// A ready result is returned at once.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if r, err := b.WaitResult(ctx, failID); err != nil || r.Status != celery.StateFailure {
		t.Errorf("WaitResult of a failed task: %+v, %v", r, err)
	}

	t.Run("wait times out", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err := b.WaitResult(ctx, uuid.NewString())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("abort", func(t *testing.T) {
		err := b.Abort(t.Context(), taskID)
		if !errors.Is(err, celery.ErrUnsupported) || !strings.Contains(err.Error(), "rpc://") {
			t.Errorf("err = %v, want ErrUnsupported", err)
		}
	})
}

func TestNoResultBackend(t *testing.T) {
	b := newTestBroker(t, "")
	if _, err := b.Result(t.Context(), "x"); !errors.Is(err, celery.ErrNoResultBackend) {
		t.Errorf("Result: %v", err)
	}
	if _, err := b.WaitResult(t.Context(), "x"); !errors.Is(err, celery.ErrNoResultBackend) {
		t.Errorf("WaitResult: %v", err)
	}
	if err := b.Abort(t.Context(), "x"); !errors.Is(err, celery.ErrNoResultBackend) {
		t.Errorf("Abort: %v", err)
	}
}

func TestResultStore(t *testing.T) {
	res := func(id, status string) *celery.Result {
		return &celery.Result{TaskID: id, Status: status, Result: json.RawMessage("null")}
	}
	type put struct{ id, status string }
	tests := []struct {
		name string
		max  int
		puts []put
		want map[string]string // id -> status; "" means evicted
	}{
		{"latest wins", 10, []put{{"a", "STARTED"}, {"a", "RETRY"}}, map[string]string{"a": "RETRY"}},
		{"ready is final", 10, []put{{"a", "SUCCESS"}, {"a", "STARTED"}}, map[string]string{"a": "SUCCESS"}},
		{"ready replaces ready", 10, []put{{"a", "FAILURE"}, {"a", "SUCCESS"}}, map[string]string{"a": "SUCCESS"}},
		{"oldest evicted", 2, []put{{"a", "STARTED"}, {"b", "STARTED"}, {"c", "STARTED"}}, map[string]string{"a": "", "b": "STARTED", "c": "STARTED"}},
		{"update refreshes", 2, []put{{"a", "STARTED"}, {"b", "STARTED"}, {"a", "SUCCESS"}, {"c", "STARTED"}}, map[string]string{"a": "SUCCESS", "b": "", "c": "STARTED"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newResultStore(tt.max)
			for _, p := range tt.puts {
				st.put(p.id, res(p.id, p.status))
			}
			for id, want := range tt.want {
				got := ""
				if r := st.get(id); r != nil {
					got = r.Status
				}
				if got != want {
					t.Errorf("%s: status %q, want %q", id, got, want)
				}
			}
			if st.order.Len() != len(st.byID) || st.order.Len() > tt.max {
				t.Errorf("%d in list, %d in map, max %d", st.order.Len(), len(st.byID), tt.max)
			}
		})
	}

	t.Run("waiters", func(t *testing.T) {
		st := newResultStore(10)
		ch1, cancel1 := st.wait("a")
		ch2, cancel2 := st.wait("a")
		defer cancel1()
		cancel2() // gone before the result
		st.put("a", res("a", "STARTED"))
		select {
		case r := <-ch1:
			t.Fatalf("woken by %s", r.Status)
		default:
		}
		st.put("a", res("a", "SUCCESS"))
		if r := <-ch1; r.Status != "SUCCESS" {
			t.Errorf("got %s", r.Status)
		}
		select {
		case r := <-ch2:
			t.Errorf("cancelled waiter got %s", r.Status)
		default:
		}
		if len(st.waiters) != 0 {
			t.Errorf("%d waiters left", len(st.waiters))
		}
		// Known and ready: at once.
		ch3, cancel3 := st.wait("a")
		defer cancel3()
		if r := <-ch3; r.Status != "SUCCESS" {
			t.Errorf("got %s", r.Status)
		}
	})
}

// TestWaitResultOfAPublishedTaskAcrossACut cuts the connection between the
// publish of a task and the wait for its result, as an apply call can meet
// it: the wait does not fail at once, and the result the worker sends once
// the results queue is back is the answer. A wait for a task this Broker
// did not publish still fails at once while disconnected.
func TestWaitResultOfAPublishedTaskAcrossACut(t *testing.T) {
	needRabbit(t)
	proxy := testcluster.StartProxy(t, "127.0.0.1:5672")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := New(ctx, Config{
		BrokerURL:     fmt.Sprintf("amqp://guest:guest@%s/%s", proxy.Addr(), url.PathEscape(testVhost)),
		ResultBackend: "rpc://", Logger: testLogger(t), OpTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	a := newAdmin(t)
	taskID, replyTo := publishAdd(t, b, a)

	proxy.Cut()
	eventually(t, 10*time.Second, "the cut seen", func() bool { return !b.Connected() })
	if _, err := b.WaitResult(t.Context(), uuid.NewString()); !errors.Is(err, celery.ErrUnavailable) {
		t.Errorf("wait for a task not published here, while disconnected: %v, want ErrUnavailable at once", err)
	}
	waited := waitSuccess(t.Context(), b, taskID, 20*time.Second)
	proxy.Start()
	// The worker answers to reply_to; until the results queue is declared
	// again a result is dropped, so it answers until the wait ends.
	var werr error
	eventually(t, 15*time.Second, "the wait answered", func() bool {
		select {
		case werr = <-waited:
			return true
		default:
		}
		if b.Connected() {
			sendResult(a, replyTo, taskID, readWire(t, "result-rpc-success-amqp.json"))
		}
		return false
	})
	if werr != nil {
		t.Fatalf("WaitResult across a cut before it: %v", werr)
	}
}
