package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler wraps a slog.Handler so that no log line shows a URL's password:
// the message and every attribute (errors, strings, groups, and values
// logged with slog.Any) go through String first. It covers what stamen
// logs and what libraries log through it (go-redis's logger), whatever
// the call site remembered to redact.
func Handler(h slog.Handler) slog.Handler {
	return handler{h}
}

type handler struct{ next slog.Handler }

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	nr := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(attr(a))
		return true
	})
	return h.next.Handle(ctx, nr)
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = attr(a)
	}
	return handler{h.next.WithAttrs(out)}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.next.WithGroup(name)} }

// Disclosed is a value logged in clear on purpose: the handler passes it
// through unmasked. It exists for the one line whose job is to tell the
// operator a secret (the embedded broker's URL with its password), so that
// the exception is explicit at the call site instead of a hole in the rule.
type Disclosed string

func attr(a slog.Attr) slog.Attr {
	if d, ok := a.Value.Any().(Disclosed); ok {
		return slog.String(a.Key, string(d))
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, ga := range g {
			out[i] = attr(ga)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, String(err.Error()))
		}
		s := fmt.Sprint(v.Any())
		if r := String(s); r != s {
			return slog.String(a.Key, r)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
