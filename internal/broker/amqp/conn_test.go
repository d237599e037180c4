package amqp

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// The handlers' interfaces (handlers/deps.go), restated here because the
// handlers package pulls in most of the tree; internal/app checks the
// real ones when it wires a Broker in.
var (
	_ interface {
		Publish(ctx context.Context, msg *celery.TaskMessage) error
		Broadcast(ctx context.Context, cmd celery.ControlCommand) ([]celery.ControlReply, error)
		QueueLengths(ctx context.Context, queues []string) (map[string]int64, error)
	} = (*Broker)(nil)
	_ interface {
		Result(ctx context.Context, taskID string) (*celery.Result, error)
		WaitResult(ctx context.Context, taskID string) (*celery.Result, error)
		Abort(ctx context.Context, taskID string) error
	} = (*Broker)(nil)
)

// TestBounded: a call the broker never answers is given up after the op
// timeout, when the caller's context ends or when the connection dies, and
// whatever it produces later is discarded.
func TestBounded(t *testing.T) {
	const opTimeout = 50 * time.Millisecond
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		kill    bool
		wantErr error
	}{
		{"op timeout", func() (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) }, false, celery.ErrUnavailable},
		{"caller deadline", func() (context.Context, context.CancelFunc) { return context.WithTimeout(t.Context(), opTimeout/5) }, false, context.DeadlineExceeded},
		{"connection lost", func() (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) }, true, celery.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Broker{log: slog.New(slog.DiscardHandler), opTimeout: opTimeout}
			s := &session{done: make(chan struct{})}
			release := make(chan struct{})
			discarded := make(chan int, 1)
			if tt.kill {
				time.AfterFunc(opTimeout/5, func() { s.fail(errors.New("gone")) })
			}
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			_, err := bounded(ctx, b, s, "stuck call", func() (int, error) {
				<-release
				return 42, nil
			}, func(v int) { discarded <- v })
			if took := time.Since(start); took > 4*opTimeout {
				t.Errorf("took %s", took)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			close(release)
			if v := <-discarded; v != 42 {
				t.Errorf("discarded %d", v)
			}
			b.wg.Wait()
		})
	}

	t.Run("answers pass through", func(t *testing.T) {
		b := &Broker{log: slog.New(slog.DiscardHandler), opTimeout: time.Second}
		s := &session{done: make(chan struct{})}
		refusal := &amqp091.Error{Code: amqp091.PreconditionFailed, Reason: "PRECONDITION_FAILED", Server: true, Recover: true}
		_, err := bounded(t.Context(), b, s, "declare", func() (int, error) { return 0, refusal }, nil)
		if !errors.Is(err, refusal) || errors.Is(err, celery.ErrUnavailable) {
			t.Errorf("a refusal: %v", err)
		}
		_, err = bounded(t.Context(), b, s, "declare", func() (int, error) { return 0, amqp091.ErrClosed }, nil)
		if !errors.Is(err, celery.ErrUnavailable) {
			t.Errorf("a closed channel: %v", err)
		}
		v, err := bounded(t.Context(), b, s, "declare", func() (int, error) { return 7, nil }, nil)
		if v != 7 || err != nil {
			t.Errorf("got %d, %v", v, err)
		}
		b.wg.Wait()
	})
}
