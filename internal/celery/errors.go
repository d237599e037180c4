package celery

import "errors"

// Errors that callers branch on. Brokers and result backends wrap them with
// %w so that the HTTP layer can map them to status codes without knowing
// which broker is in use.
var (
	// ErrUnavailable means the broker or result backend could not be
	// reached (connection refused, dropped, reconnecting).
	ErrUnavailable = errors.New("broker or result backend unavailable")
	// ErrUnsupported means the configured broker or result backend cannot
	// do what was asked (for example abort with the rpc:// backend).
	ErrUnsupported = errors.New("not supported by this broker or result backend")
	// ErrNoResultBackend means no result backend is configured.
	ErrNoResultBackend = errors.New("no result backend configured")
)
