package celery

import (
	"errors"
	"fmt"
)

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
	// ErrResultLost means a wait for a result ended without it after the
	// connection that receives results was lost and re-established
	// meanwhile (rpc://): a result sent while it was down is gone, so
	// the task may have finished although no result came.
	ErrResultLost = errors.New("no result within the wait, and it may never come")
)

// RefusedError means the broker or result backend refused an operation
// that the account stamen logs in as may not perform (a Redis ACL's
// NOPERM): a misconfiguration, not an outage, since the same call, here or
// on another replica, gets the same answer until the account's
// permissions change. Reply is the server's answer, which names the
// command, key or channel refused (never a password).
type RefusedError struct {
	Reply string
}

func (e *RefusedError) Error() string { return "the broker refused: " + e.Reply }

// UnreadableResultError means a result document (or an rpc:// result
// message) is not JSON: the workers store results with another serializer
// (result_serializer = pickle, msgpack or yaml) or compressed. The task did
// run; only its result cannot be shown. Serializer names what was found.
type UnreadableResultError struct {
	Serializer string
}

func (e *UnreadableResultError) Error() string {
	return fmt.Sprintf("the result is stored with serializer %q, which stamen cannot read (it reads JSON results only)", e.Serializer)
}

// ErrNoRoute means a message given an exchange (or routing key) would reach
// no queue: the exchange does not exist, or nothing is bound to it with that
// routing key. It is refused rather than dropped.
var ErrNoRoute = errors.New("no queue is bound to this exchange and routing key")

// ErrNoQueue means a message's queue does not exist on the broker and no
// worker says how it declares it, so stamen will not create it: a queue
// declared with other arguments than the workers' (x-max-priority,
// x-queue-type) makes their own declaration fail, which kills them.
var ErrNoQueue = errors.New("the queue does not exist and no worker declares it")

// ErrNotAQueue means a queue's name is, on Redis, the key of something that
// is not a queue's list (kombu's unacked hash, a binding set, any other
// key): it is neither pushed to nor deleted.
var ErrNotAQueue = errors.New("the name holds a Redis value that is not a queue's list")
