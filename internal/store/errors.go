package store

import "errors"

// ErrUnavailable marks a read or write that failed because the store could
// not be reached in time (a PostgreSQL outage): the API answers 503 for it.
var ErrUnavailable = errors.New("the task store is unavailable")
