package celery

import (
	"bytes"
	"strconv"
)

// A worker's liveness is counted from when its heartbeats were received
// (Celery's local_received), never from when they were sent. The latest
// worker event a store keeps must therefore say when it was received:
// replayed without it, an event counts as received at the replay, so that
// a worker dead for an hour looks alive to every read that replays it.
// WithLocalReceived stamps the stored copy with Celery's own key for that
// time, and DecodeStoredEvents reads it back.

// localReceivedTail is what WithLocalReceived appends before the closing
// brace of the event object.
var localReceivedTail = []byte(`,"local_received":`)

// WithLocalReceived returns a copy of the event object raw that carries at
// (epoch seconds) as "local_received", appended as its last key so that a
// reader that takes the last of duplicate keys sees this one. raw that is
// not an object, and an at of zero (not known), are copied as they are.
func WithLocalReceived(raw []byte, at float64) []byte {
	trimmed := bytes.TrimRight(raw, " \t\r\n")
	if at <= 0 || len(trimmed) < 2 || trimmed[0] != '{' || trimmed[len(trimmed)-1] != '}' {
		return bytes.Clone(raw)
	}
	body := trimmed[:len(trimmed)-1]
	out := make([]byte, 0, len(trimmed)+len(localReceivedTail)+24)
	out = append(out, body...)
	if len(bytes.TrimSpace(body[1:])) == 0 { // {} : no comma before the key
		out = append(out, localReceivedTail[1:]...)
	} else {
		out = append(out, localReceivedTail...)
	}
	out = strconv.AppendFloat(out, at, 'f', -1, 64)
	return append(out, '}')
}

// DecodeStoredEvents decodes an event kept by a store, setting
// LocalReceived to the time WithLocalReceived stamped on it, or, for an
// event stored without one, to the event's own timestamp: the best guess
// at when it was received, where the time of the replay would make it
// look new.
func DecodeStoredEvents(raw []byte) ([]Event, error) {
	evs, err := DecodeEvents(raw)
	if err != nil {
		return nil, err
	}
	at, ok := storedLocalReceived(raw)
	for i := range evs {
		switch {
		case ok:
			evs[i].LocalReceived = at
		case evs[i].HasValue(FieldTimestamp):
			evs[i].LocalReceived = evs[i].Timestamp
		}
	}
	return evs, nil
}

// storedLocalReceived reads the time WithLocalReceived appended to raw.
func storedLocalReceived(raw []byte) (float64, bool) {
	trimmed := bytes.TrimRight(raw, " \t\r\n")
	if len(trimmed) == 0 || trimmed[len(trimmed)-1] != '}' {
		return 0, false
	}
	body := trimmed[:len(trimmed)-1]
	i := bytes.LastIndex(body, localReceivedTail[1:])
	if i < 0 {
		return 0, false
	}
	at, err := strconv.ParseFloat(string(body[i+len(localReceivedTail)-1:]), 64)
	if err != nil || at <= 0 {
		return 0, false
	}
	return at, true
}
