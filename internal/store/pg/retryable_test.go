package pg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestRetryable: which read failures run the read again: the
// connection's, not the statement's, and never once rows were handed out
// or the read's time is up.
func TestRetryable(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	admin := &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"administrator's termination", context.Background(), admin, true},
		{"crash", context.Background(), &pgconn.PgError{Code: "57P02"}, true},
		{"server starting", context.Background(), fmt.Errorf("connect: %w", &pgconn.PgError{Code: "57P03"}), true},
		{"closed socket", context.Background(), fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"statement's error", context.Background(), &pgconn.PgError{Code: "42P01"}, false},
		{"query canceled", context.Background(), &pgconn.PgError{Code: "57014"}, false},
		{"rows handed out", context.Background(), handedOut(admin), false},
		{"deadline passed", done, admin, false},
		{"deadline", context.Background(), context.DeadlineExceeded, false},
		{"other", context.Background(), errors.New("scan: bad value"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryable(tc.ctx, tc.err); got != tc.want {
				t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestNotRun: a write that is not idempotent runs again only when its
// statement cannot have taken effect: the server ended the session, not
// a socket that failed after the statement may have gone through.
func TestNotRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"administrator's termination", &pgconn.PgError{Code: "57P01"}, true},
		{"crash", &pgconn.PgError{Code: "57P02"}, true},
		{"closed socket", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := notRun(tc.err); got != tc.want {
				t.Errorf("notRun(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
