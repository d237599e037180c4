package redis

import (
	"context"
	"fmt"
	"log/slog"
)

// LibraryLogger adapts a slog.Logger for go-redis's process-wide logger,
// which otherwise prints dial failures and pool trouble to stderr. Install
// it once, where the program is wired:
//
//	goredis.SetLogger(redis.LibraryLogger{Log: logger})
type LibraryLogger struct {
	Log *slog.Logger
}

// Printf logs at debug level: whatever go-redis reports also surfaces as
// the error of the call that ran into it.
func (l LibraryLogger) Printf(ctx context.Context, format string, v ...any) {
	l.Log.DebugContext(ctx, fmt.Sprintf(format, v...), slog.String("source", "go-redis"))
}
