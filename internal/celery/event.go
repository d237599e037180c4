package celery

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/stamen-dev/stamen/internal/pyfmt"
)

// EventField names one key of an event. Event.Present and Event.Null are
// sets of them, because Celery's state copies only the keys an event
// carries, and a key sent as null overwrites while a missing one does not.
type EventField uint64

// The keys of Celery's task and worker events (celery.events: the fields
// each event type carries, as celery/worker/consumer and celery/app/task
// send them).
const (
	FieldType EventField = 1 << iota
	FieldHostname
	FieldTimestamp
	FieldUTCOffset
	FieldPID
	FieldClock
	FieldUUID
	FieldName
	FieldArgs
	FieldKwargs
	FieldRootID
	FieldParentID
	FieldRetries
	FieldETA
	FieldExpires
	FieldResult
	FieldException
	FieldTraceback
	FieldRuntime
	FieldQueue
	FieldExchange
	FieldRoutingKey
	FieldTerminated
	FieldSignum
	FieldExpired
	FieldRequeue
	FieldFreq
	FieldActive
	FieldProcessed
	FieldLoadavg
	FieldSWIdent
	FieldSWVer
	FieldSWSys
)

// Event is one Celery event (a task-* or worker-* message).
//
// Fields hold their zero value when the key was missing or null; Present
// and Null tell those cases apart. Decoding is lenient about value types,
// as the Python receiver is: a string field given another JSON value keeps
// that value's JSON text (or the __value__ of kombu's {"__type__",
// "__value__"} wrapper), an integer field accepts an integral float, and a
// value that fits nowhere (say an object for timestamp) is treated as a
// missing key rather than failing the whole batch.
type Event struct {
	Type      string
	Hostname  string
	Timestamp float64
	UTCOffset int
	PID       int
	Clock     int64

	UUID       string
	Name       string
	Args       string
	Kwargs     string
	RootID     string
	ParentID   string
	Retries    int
	ETA        string
	Expires    string
	Result     string
	Exception  string
	Traceback  string
	Runtime    *float64
	Queue      string
	Exchange   string
	RoutingKey string
	Terminated bool
	// Signum is the raw JSON value: Celery sends an int, a signal name or null.
	Signum  json.RawMessage
	Expired bool
	Requeue bool

	Freq      float64
	Active    int
	Processed int
	Loadavg   []float64
	SWIdent   string
	SWVer     string
	SWSys     string

	// Present holds the keys the event carried, Null those sent as null.
	Present EventField
	Null    EventField

	// LocalReceived is the receiver's clock (epoch seconds) when the event
	// arrived; it is never on the wire.
	LocalReceived float64
	// Raw is the event's own JSON object as received.
	Raw json.RawMessage
	// Reconciled marks an event stamen made itself from a task's result
	// document (internal/reconcile), never on the wire: it moves the
	// task's record on, but its Hostname is not the worker's and says
	// nothing about any worker.
	Reconciled bool
}

// Has reports whether the event carried the key, null or not.
func (e *Event) Has(f EventField) bool { return e.Present&f != 0 }

// HasValue reports whether the event carried the key with a non-null value.
func (e *Event) HasValue(f EventField) bool { return e.Present&f != 0 && e.Null&f == 0 }

// DecodeEvents decodes an event body: one JSON object, or a list of them as
// in task.multi batches. List elements that are not objects are skipped;
// anything that is not valid JSON is an error. The result does not alias
// body.
func DecodeEvents(body []byte) ([]Event, error) {
	return decodeOwnedEvents(bytes.Clone(body))
}

// DecodeEventEnvelope decodes a Redis pub/sub payload on a celeryev channel:
// a kombu envelope whose body (usually base64) is the event JSON.
func DecodeEventEnvelope(payload []byte) ([]Event, error) {
	body, err := envelopeBody(payload, nil)
	if err != nil {
		return nil, err
	}
	return decodeOwnedEvents(body)
}

// An EventDecoder is DecodeEventEnvelope for a consumer that is done with a
// message's events before it decodes the next: it reuses its memory, which
// saves allocating and collecting a few kilobytes per message. The events
// of one Decode, with their Raw and Signum bytes, are overwritten by the
// next; their strings are never reused and may be kept.
type EventDecoder struct {
	events []Event
	body   []byte
}

// Decode decodes payload as DecodeEventEnvelope does, into d's memory. It
// neither keeps nor modifies payload.
func (d *EventDecoder) Decode(payload []byte) ([]Event, error) {
	if err := d.Unwrap(payload); err != nil {
		return nil, err
	}
	return d.Events()
}

// Unwrap is Decode's first half: it takes the event JSON out of payload's
// envelope, for Events to decode. The halves can run on two goroutines, one
// after the other, to spread a message's cost over two cores.
func (d *EventDecoder) Unwrap(payload []byte) error {
	body, err := envelopeBody(payload, d.body)
	if err != nil {
		return err
	}
	d.body = body
	return nil
}

// Events is Decode's second half: it decodes the event JSON that Unwrap
// took out last.
func (d *EventDecoder) Events() ([]Event, error) {
	events, err := decodeEvents(d.events[:0], d.body)
	if err != nil {
		return nil, err
	}
	d.events = events
	return events, nil
}

// decoderKeeps bounds the memory an EventDecoder keeps for the next
// message (see Trim): a consumer keeps hundreds of decoders, and a few
// huge messages must not leave each of them holding megabytes.
const (
	decoderKeepsBody   = 16 << 10
	decoderKeepsEvents = 64
)

// Trim lets go of what the last message grew past what a decoder keeps
// for the next one; a consumer calls it before reusing d.
func (d *EventDecoder) Trim() {
	if cap(d.body) > decoderKeepsBody {
		d.body = nil
	}
	if cap(d.events) > decoderKeepsEvents {
		d.events = nil
	}
}

// envelopeBody returns the event JSON of an envelope, in buf if it fits.
func envelopeBody(payload, buf []byte) ([]byte, error) {
	// Read only the three keys needed, with the event eventScanner: this runs
	// once per event and Envelope's headers map would cost more than the
	// event itself.
	d := eventScanner{data: payload}
	d.skipWS()
	if d.peek() != '{' {
		return nil, errors.New("decode event envelope: not a JSON object")
	}
	var body, ctype, encoding jsonSpan
	err := d.object(1, func(key []byte) error {
		if string(key) == "properties" && d.peek() == '{' {
			return d.object(2, func(key []byte) error {
				v, err := d.value(3)
				if string(key) == "body_encoding" {
					encoding = v
				}
				return err
			})
		}
		v, err := d.value(2)
		switch string(key) {
		case "body":
			body = v
		case "content-type":
			ctype = v
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("decode event envelope: %w", err)
	}
	if d.skipWS(); d.pos != len(payload) {
		return nil, errors.New("decode event envelope: data after the envelope")
	}
	if body.kind != jsonString {
		return nil, errors.New("decode event envelope: body is not a string")
	}
	if ct := d.bytesOf(ctype); len(ct) > 0 && !bytes.HasPrefix(ct, []byte("application/json")) {
		return nil, fmt.Errorf("decode event envelope: unsupported content type %q", ct)
	}
	text := d.bytesOf(body)
	if string(d.bytesOf(encoding)) != "base64" {
		return append(buf[:0], text...), nil
	}
	if n := base64.StdEncoding.DecodedLen(len(text)); cap(buf) < n {
		buf = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(buf[:cap(buf)], text)
	if err != nil {
		return nil, fmt.Errorf("decode event envelope body: %w", err)
	}
	return buf[:n], nil
}

// bytesOf returns the contents of a scanned string value, nil for anything
// else. Unlike decodeString it needs no copy for a string without escapes.
func (d *eventScanner) bytesOf(v jsonSpan) []byte {
	switch {
	case v.kind != jsonString:
		return nil
	case v.plain:
		return d.data[v.start:v.end]
	}
	return []byte(d.decodeString(v))
}

// decodeOwnedEvents decodes data, which it owns: Raw slices point into it.
func decodeOwnedEvents(data []byte) ([]Event, error) {
	// Decode into room on the stack and copy out what was used: one
	// allocation of the exact size for the usual batch, where growing a
	// slice took two or three.
	var room [4]Event
	events, err := decodeEvents(room[:0], data)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(events))
	copy(out, events)
	return out, nil
}

// decodeEvents appends the events of data to events; Raw slices point into
// data.
func decodeEvents(events []Event, data []byte) ([]Event, error) {
	d := eventScanner{data: data}
	d.skipWS()
	if d.pos >= len(d.data) {
		return nil, errors.New("decode events: empty body")
	}
	switch d.data[d.pos] {
	case '{':
		events = append(events, Event{})
		if err := d.event(&events[len(events)-1], 1); err != nil {
			return nil, err
		}
	case '[':
		d.pos++
		d.skipWS()
		if d.peek() == ']' {
			d.pos++
			break
		}
		for {
			if d.peek() == '{' {
				events = append(events, Event{})
				if err := d.event(&events[len(events)-1], 2); err != nil {
					return nil, err
				}
			} else if _, err := d.value(2); err != nil {
				return nil, err
			}
			d.skipWS()
			c := d.peek()
			d.pos++
			if c == ']' {
				break
			}
			if c != ',' {
				return nil, d.errorf("expected ',' or ']'")
			}
			d.skipWS()
		}
	default:
		if _, err := d.value(1); err != nil {
			return nil, err
		}
		return nil, errors.New("decode events: body is neither an object nor a list")
	}
	d.skipWS()
	if d.pos != len(d.data) {
		return nil, d.errorf("data after the top-level value")
	}
	return events, nil
}

// maxEventDepth matches encoding/json's nesting limit, so that what one rejects
// the other does too.
const maxEventDepth = 10000

// eventScanner is a validating JSON reader specialised for flat event objects.
// Events are small and uniform, and a generic decoder either allocates a
// map per event or cannot tell a missing key from a null one.
type eventScanner struct {
	data []byte
	pos  int
	// The last hostname, uuid and name decoded, which a repeat reuses.
	hostname, uuid, name string
	// plained is set when a field of the current event was rewritten by
	// pyfmt.PlainRepr or held a kombu typed value, so Raw must be rewritten too.
	plained bool
}

type jsonKind uint8

const (
	jsonNone jsonKind = iota // a jsonSpan never filled in
	jsonString
	jsonNumber
	jsonTrue
	jsonFalse
	jsonNull
	jsonObject
	jsonArray
)

// jsonSpan locates a scanned value. For strings, start/end bound the contents
// (the quotes are just outside) and plain says they need no unescaping.
type jsonSpan struct {
	kind       jsonKind
	plain      bool
	start, end int
}

func (d *eventScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("decode events: "+format+" at offset %d", append(args, d.pos)...)
}

func (d *eventScanner) peek() byte {
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

func (d *eventScanner) skipWS() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value scans any JSON value at d.pos (no leading white space).
func (d *eventScanner) value(depth int) (jsonSpan, error) {
	start := d.pos
	switch c := d.peek(); {
	case c == '"':
		return d.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == '{' || c == '[':
		if depth > maxEventDepth {
			return jsonSpan{}, d.errorf("nesting too deep")
		}
		var err error
		if c == '{' {
			err = d.skipObject(depth)
		} else {
			err = d.skipArray(depth)
		}
		kind := jsonObject
		if c == '[' {
			kind = jsonArray
		}
		return jsonSpan{kind: kind, start: start, end: d.pos}, err
	case c == 't':
		return d.literal("true", jsonTrue)
	case c == 'f':
		return d.literal("false", jsonFalse)
	case c == 'n':
		return d.literal("null", jsonNull)
	case d.pos >= len(d.data):
		return jsonSpan{}, d.errorf("unexpected end of data")
	default:
		return jsonSpan{}, d.errorf("unexpected character %q", c)
	}
}

func (d *eventScanner) literal(word string, kind jsonKind) (jsonSpan, error) {
	start := d.pos
	if !bytes.HasPrefix(d.data[d.pos:], []byte(word)) {
		return jsonSpan{}, d.errorf("invalid literal")
	}
	d.pos += len(word)
	return jsonSpan{kind: kind, start: start, end: d.pos}, nil
}

func (d *eventScanner) str() (jsonSpan, error) {
	start := d.pos + 1
	// Fastest path: a short string of printable ASCII. Longer ones go to
	// IndexByte, which is quicker on a kilobyte of base64.
	limit := min(start+shortString, len(d.data))
	if end := start + plainPrefix(d.data[start:limit]); end < limit {
		switch c := d.data[end]; {
		case c == '"':
			d.pos = end + 1
			return jsonSpan{kind: jsonString, start: start, end: end, plain: true}, nil
		case c < 0x20:
			d.pos = end
			return jsonSpan{}, d.errorf("control character in string")
		}
	}
	// Fast path: most other strings have no escapes either, so find the
	// closing quote with IndexByte and only check the bytes in between.
	if q := bytes.IndexByte(d.data[start:], '"'); q >= 0 {
		seg := d.data[start : start+q]
		if bytes.IndexByte(seg, '\\') < 0 {
			ctrl, high := scanPlain(seg)
			if ctrl >= 0 {
				d.pos = start + ctrl
				return jsonSpan{}, d.errorf("control character in string")
			}
			d.pos = start + q + 1
			// Invalid UTF-8 takes the slow path for encoding/json's U+FFFD.
			plain := !high || utf8.Valid(seg)
			return jsonSpan{kind: jsonString, start: start, end: start + q, plain: plain}, nil
		}
	}
	d.pos = start
	s := jsonSpan{kind: jsonString, start: start}
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			s.end = d.pos
			d.pos++
			return s, nil
		case c == '\\':
			d.pos++
			switch d.peek() {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.pos++
			case 'u':
				d.pos++
				for range 4 {
					if !isHexDigit(d.peek()) {
						return jsonSpan{}, d.errorf("invalid \\u escape")
					}
					d.pos++
				}
			default:
				return jsonSpan{}, d.errorf("invalid escape")
			}
		case c < 0x20:
			return jsonSpan{}, d.errorf("control character in string")
		default:
			d.pos++
		}
	}
	return jsonSpan{}, d.errorf("unterminated string")
}

// shortString is how far str looks with plainPrefix: the keys and most
// values of an event, uuids included, are shorter.
const shortString = 48

// plainPrefix returns the length of the run of bytes at the start of s that
// a JSON string holds as they are: printable ASCII but '"' and '\\'.
func plainPrefix(s []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := binary.LittleEndian.Uint64(s[i:])
		q, b := w^(ones*'"'), w^(ones*'\\')
		// Each term sets the high bit of the bytes it looks for (Hacker's
		// Delight's "has less than" and "has zero byte"): below 0x20,
		// non-ASCII, '"', '\\'. A borrow can only mark bytes after a real
		// one, so the lowest mark is exact.
		m := ((w - ones*0x20) | w | ((q - ones) &^ q) | ((b - ones) &^ b)) & highs
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			break
		}
	}
	return i
}

// scanPlain returns the offset of the first control character in s (-1 if
// none) and whether s has non-ASCII bytes, 32 then eight bytes at a time.
func scanPlain(s []byte) (ctrl int, high bool) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	var acc uint64
	i := 0
	for ; i+32 <= len(s); i += 32 {
		w0 := binary.LittleEndian.Uint64(s[i:])
		w1 := binary.LittleEndian.Uint64(s[i+8:])
		w2 := binary.LittleEndian.Uint64(s[i+16:])
		w3 := binary.LittleEndian.Uint64(s[i+24:])
		if ((w0-ones*0x20)&^w0|(w1-ones*0x20)&^w1|(w2-ones*0x20)&^w2|(w3-ones*0x20)&^w3)&highs != 0 {
			break // the loop below finds where
		}
		acc |= w0 | w1 | w2 | w3
	}
	for ; i+8 <= len(s); i += 8 {
		w := binary.LittleEndian.Uint64(s[i:])
		acc |= w
		// The high bit of each byte below 0x20 (Hacker's Delight's
		// "has less than"); a borrow can only mark bytes after a real one.
		if m := (w - ones*0x20) &^ w & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8, false
		}
	}
	for ; i < len(s); i++ {
		if s[i] < 0x20 {
			return i, false
		}
		acc |= uint64(s[i])
	}
	return -1, acc&highs != 0
}

func isHexDigit(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDecimalDigit(c byte) bool { return c >= '0' && c <= '9' }

func (d *eventScanner) number() (jsonSpan, error) {
	start := d.pos
	if d.peek() == '-' {
		d.pos++
	}
	switch c := d.peek(); {
	case c == '0':
		d.pos++
	case c >= '1' && c <= '9':
		for isDecimalDigit(d.peek()) {
			d.pos++
		}
	default:
		return jsonSpan{}, d.errorf("invalid number")
	}
	if d.peek() == '.' {
		d.pos++
		if !isDecimalDigit(d.peek()) {
			return jsonSpan{}, d.errorf("invalid number")
		}
		for isDecimalDigit(d.peek()) {
			d.pos++
		}
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.pos++
		if c := d.peek(); c == '+' || c == '-' {
			d.pos++
		}
		if !isDecimalDigit(d.peek()) {
			return jsonSpan{}, d.errorf("invalid number")
		}
		for isDecimalDigit(d.peek()) {
			d.pos++
		}
	}
	return jsonSpan{kind: jsonNumber, start: start, end: d.pos}, nil
}

// skipObject validates an object at d.pos and moves past it.
func (d *eventScanner) skipObject(depth int) error {
	return d.object(depth, func([]byte) error {
		_, err := d.value(depth + 1)
		return err
	})
}

// object walks the members of the object at d.pos: member is called with
// each key and d.pos at the value, which it scans, with depth+1.
func (d *eventScanner) object(depth int, member func(key []byte) error) error {
	d.pos++ // '{'
	d.skipWS()
	if d.peek() == '}' {
		d.pos++
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.errorf("expected object key")
		}
		k, err := d.str()
		if err != nil {
			return err
		}
		key := d.data[k.start:k.end]
		if !k.plain {
			key = []byte(d.decodeString(k))
		}
		d.skipWS()
		if d.peek() != ':' {
			return d.errorf("expected ':'")
		}
		d.pos++
		d.skipWS()
		if err := member(key); err != nil {
			return err
		}
		d.skipWS()
		c := d.peek()
		d.pos++
		switch c {
		case '}':
			return nil
		case ',':
			d.skipWS()
		default:
			d.pos--
			return d.errorf("expected ',' or '}'")
		}
	}
}

func (d *eventScanner) skipArray(depth int) error {
	d.pos++ // '['
	d.skipWS()
	if d.peek() == ']' {
		d.pos++
		return nil
	}
	for {
		if _, err := d.value(depth + 1); err != nil {
			return err
		}
		d.skipWS()
		c := d.peek()
		d.pos++
		switch c {
		case ']':
			return nil
		case ',':
			d.skipWS()
		default:
			d.pos--
			return d.errorf("expected ',' or ']'")
		}
	}
}

// raw returns the JSON text of a scanned value.
func (d *eventScanner) raw(v jsonSpan) []byte {
	start, end := v.start, v.end
	if v.kind == jsonString {
		start, end = start-1, end+1 // the quotes
	}
	return d.data[start:end:end]
}

// decodeString returns the contents of a scanned string.
func (d *eventScanner) decodeString(s jsonSpan) string {
	if s.plain {
		return string(d.data[s.start:s.end])
	}
	// Escapes and invalid UTF-8 are rare: let encoding/json handle them
	// so that surrogates and replacement characters come out identical.
	var out string
	if err := json.Unmarshal(d.data[s.start-1:s.end+1], &out); err != nil {
		return string(d.data[s.start:s.end])
	}
	return out
}

// event decodes the object at d.pos into e.
func (d *eventScanner) event(e *Event, depth int) error {
	start := d.pos
	d.plained = false
	err := d.object(depth, func(key []byte) error {
		v, err := d.value(depth + 1)
		if f := eventFieldOf(key); f != 0 && err == nil {
			d.assign(e, f, v)
		}
		return err
	})
	if err != nil {
		return err
	}
	e.Raw = d.data[start:d.pos:d.pos]
	if d.plained || bytes.Contains(e.Raw, typedMarker) {
		// What /api/events streams shows the values as the fields do.
		if raw, err := plainJSON(e.Raw, plainReprField); err == nil {
			e.Raw = raw
		}
	}
	return nil
}

// plainReprField applies pyfmt.PlainRepr to the event keys that hold Python reprs.
func plainReprField(key, value string) (string, bool) {
	switch key {
	case "args", "kwargs", "result", "exception":
		return pyfmt.PlainRepr(value), true
	}
	return "", false
}

// reprText is text for a field holding a Python repr, through pyfmt.PlainRepr.
func (d *eventScanner) reprText(v jsonSpan) (string, bool) {
	s, ok := d.text(v)
	if ok {
		if p := pyfmt.PlainRepr(s); p != s {
			s, d.plained = p, true
		}
	}
	return s, ok
}

func eventFieldOf(key []byte) EventField {
	switch string(key) {
	case "type":
		return FieldType
	case "hostname":
		return FieldHostname
	case "timestamp":
		return FieldTimestamp
	case "utcoffset":
		return FieldUTCOffset
	case "pid":
		return FieldPID
	case "clock":
		return FieldClock
	case "uuid":
		return FieldUUID
	case "name":
		return FieldName
	case "args":
		return FieldArgs
	case "kwargs":
		return FieldKwargs
	case "root_id":
		return FieldRootID
	case "parent_id":
		return FieldParentID
	case "retries":
		return FieldRetries
	case "eta":
		return FieldETA
	case "expires":
		return FieldExpires
	case "result":
		return FieldResult
	case "exception":
		return FieldException
	case "traceback":
		return FieldTraceback
	case "runtime":
		return FieldRuntime
	case "queue":
		return FieldQueue
	case "exchange":
		return FieldExchange
	case "routing_key":
		return FieldRoutingKey
	case "terminated":
		return FieldTerminated
	case "signum":
		return FieldSignum
	case "expired":
		return FieldExpired
	case "requeue":
		return FieldRequeue
	case "freq":
		return FieldFreq
	case "active":
		return FieldActive
	case "processed":
		return FieldProcessed
	case "loadavg":
		return FieldLoadavg
	case "sw_ident":
		return FieldSWIdent
	case "sw_ver":
		return FieldSWVer
	case "sw_sys":
		return FieldSWSys
	}
	return 0
}

// assign stores v in the field f of e, tracking presence and null.
func (d *eventScanner) assign(e *Event, f EventField, v jsonSpan) {
	if v.kind == jsonNull {
		e.Present |= f
		e.Null |= f
		clearEventField(e, f)
		return
	}
	ok := false
	switch f {
	case FieldType:
		e.Type, ok = d.eventType(v)
	case FieldHostname:
		e.Hostname, ok = d.textReusing(v, &d.hostname)
	case FieldTimestamp:
		e.Timestamp, ok = d.floatValue(v)
	case FieldUTCOffset:
		e.UTCOffset, ok = d.intValue(v)
	case FieldPID:
		e.PID, ok = d.intValue(v)
	case FieldClock:
		var c int64
		c, ok = d.int64Value(v)
		if ok {
			e.Clock = c
		}
	case FieldUUID:
		e.UUID, ok = d.textReusing(v, &d.uuid)
	case FieldName:
		e.Name, ok = d.textReusing(v, &d.name)
	case FieldArgs:
		e.Args, ok = d.reprText(v)
	case FieldKwargs:
		e.Kwargs, ok = d.reprText(v)
	case FieldRootID:
		e.RootID, ok = d.text(v)
	case FieldParentID:
		e.ParentID, ok = d.text(v)
	case FieldRetries:
		e.Retries, ok = d.intValue(v)
	case FieldETA:
		e.ETA, ok = d.text(v)
	case FieldExpires:
		e.Expires, ok = d.text(v)
	case FieldResult:
		e.Result, ok = d.reprText(v)
	case FieldException:
		e.Exception, ok = d.reprText(v)
	case FieldTraceback:
		e.Traceback, ok = d.text(v)
	case FieldRuntime:
		var r float64
		if r, ok = d.floatValue(v); ok {
			e.Runtime = &r
		}
	case FieldQueue:
		e.Queue, ok = d.text(v)
	case FieldExchange:
		e.Exchange, ok = d.text(v)
	case FieldRoutingKey:
		e.RoutingKey, ok = d.text(v)
	case FieldTerminated:
		e.Terminated, ok = spanBool(v)
	case FieldSignum:
		e.Signum, ok = d.raw(v), true
	case FieldExpired:
		e.Expired, ok = spanBool(v)
	case FieldRequeue:
		e.Requeue, ok = spanBool(v)
	case FieldFreq:
		e.Freq, ok = d.floatValue(v)
	case FieldActive:
		e.Active, ok = d.intValue(v)
	case FieldProcessed:
		e.Processed, ok = d.intValue(v)
	case FieldLoadavg:
		e.Loadavg, ok = d.floatsValue(v)
	case FieldSWIdent:
		e.SWIdent, ok = d.text(v)
	case FieldSWVer:
		e.SWVer, ok = d.text(v)
	case FieldSWSys:
		e.SWSys, ok = d.text(v)
	}
	if ok {
		e.Present |= f
		e.Null &^= f
		return
	}
	// The last occurrence of a key decides, even when it does not fit.
	clearEventField(e, f)
	e.Present &^= f
	e.Null &^= f
}

// clear zeroes a field sent as null (a duplicate key may have set it).
func clearEventField(e *Event, f EventField) {
	switch f {
	case FieldType:
		e.Type = ""
	case FieldHostname:
		e.Hostname = ""
	case FieldTimestamp:
		e.Timestamp = 0
	case FieldUTCOffset:
		e.UTCOffset = 0
	case FieldPID:
		e.PID = 0
	case FieldClock:
		e.Clock = 0
	case FieldUUID:
		e.UUID = ""
	case FieldName:
		e.Name = ""
	case FieldArgs:
		e.Args = ""
	case FieldKwargs:
		e.Kwargs = ""
	case FieldRootID:
		e.RootID = ""
	case FieldParentID:
		e.ParentID = ""
	case FieldRetries:
		e.Retries = 0
	case FieldETA:
		e.ETA = ""
	case FieldExpires:
		e.Expires = ""
	case FieldResult:
		e.Result = ""
	case FieldException:
		e.Exception = ""
	case FieldTraceback:
		e.Traceback = ""
	case FieldRuntime:
		e.Runtime = nil
	case FieldQueue:
		e.Queue = ""
	case FieldExchange:
		e.Exchange = ""
	case FieldRoutingKey:
		e.RoutingKey = ""
	case FieldTerminated:
		e.Terminated = false
	case FieldSignum:
		e.Signum = nil
	case FieldExpired:
		e.Expired = false
	case FieldRequeue:
		e.Requeue = false
	case FieldFreq:
		e.Freq = 0
	case FieldActive:
		e.Active = 0
	case FieldProcessed:
		e.Processed = 0
	case FieldLoadavg:
		e.Loadavg = nil
	case FieldSWIdent:
		e.SWIdent = ""
	case FieldSWVer:
		e.SWVer = ""
	case FieldSWSys:
		e.SWSys = ""
	}
}

// text reads a string field; other JSON values keep their JSON text.
func (d *eventScanner) text(v jsonSpan) (string, bool) {
	switch v.kind {
	case jsonString:
		return d.decodeString(v), true
	case jsonObject:
		if s, ok := kombuWrappedValue(d.data[v.start:v.end]); ok {
			d.plained = true
			return s, true
		}
		fallthrough
	case jsonArray:
		var b bytes.Buffer
		if err := json.Compact(&b, d.data[v.start:v.end]); err != nil {
			return "", false
		}
		return b.String(), true
	default:
		return string(d.data[v.start:v.end]), true
	}
}

// textReusing is text, but returns *last again when the value equals it
// and otherwise remembers the value there: the events of a batch mostly
// share their hostname and often their task, so each is copied once.
func (d *eventScanner) textReusing(v jsonSpan, last *string) (string, bool) {
	if v.kind == jsonString && v.plain && string(d.data[v.start:v.end]) == *last {
		return *last, true
	}
	s, ok := d.text(v)
	if ok {
		*last = s
	}
	return s, ok
}

// eventTypes are the types Celery sends, which decode without a copy.
var eventTypes = [...]string{
	"task-sent", "task-received", "task-started", "task-succeeded", "task-failed",
	"task-retried", "task-revoked", "task-rejected",
	"worker-online", "worker-heartbeat", "worker-offline",
}

func (d *eventScanner) eventType(v jsonSpan) (string, bool) {
	if v.kind == jsonString && v.plain {
		for _, t := range eventTypes {
			if string(d.data[v.start:v.end]) == t {
				return t, true
			}
		}
	}
	return d.text(v)
}

// kombuWrappedValue is the kombu 5.2 text of kombu ≥5.3's
// {"__type__": ..., "__value__": ...} (see typedText).
func kombuWrappedValue(obj []byte) (string, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil || len(m) != 2 || m["__type__"] == nil || m["__value__"] == nil {
		return "", false
	}
	var typ string
	if err := json.Unmarshal(m["__type__"], &typ); err != nil {
		return "", false
	}
	if s, ok := typedText(typ, m["__value__"]); ok {
		return s, true
	}
	// A type an application registered: its value, when that is text.
	var s string
	if err := json.Unmarshal(m["__value__"], &s); err != nil {
		return "", false
	}
	return s, true
}

func (d *eventScanner) floatValue(v jsonSpan) (float64, bool) {
	if v.kind != jsonNumber {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(d.data[v.start:v.end]), 64)
	return f, err == nil
}

func (d *eventScanner) int64Value(v jsonSpan) (int64, bool) {
	if v.kind != jsonNumber {
		return 0, false
	}
	num := d.data[v.start:v.end]
	if n, ok := shortInt(num); ok {
		return n, true
	}
	if n, err := strconv.ParseInt(string(num), 10, 64); err == nil {
		return n, true
	}
	// 2.0 or 1e3 from a producer that writes every number as a float.
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// shortInt parses a JSON integer of at most 18 digits, which cannot
// overflow: pid, clock and the like, ten of them a message, in a third of
// ParseInt's time.
func shortInt(num []byte) (int64, bool) {
	digits := num
	if len(num) > 0 && num[0] == '-' {
		digits = num[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if !isDecimalDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) < len(num) {
		n = -n
	}
	return n, true
}

func (d *eventScanner) intValue(v jsonSpan) (int, bool) {
	n, ok := d.int64Value(v)
	if !ok || n != int64(int(n)) {
		return 0, false
	}
	return int(n), true
}

func (d *eventScanner) floatsValue(v jsonSpan) ([]float64, bool) {
	if v.kind != jsonArray {
		return nil, false
	}
	sub := eventScanner{data: d.data[:v.end], pos: v.start + 1}
	out := make([]float64, 0, 3)
	ok := true
	sub.skipWS()
	for sub.pos < len(sub.data) && sub.peek() != ']' {
		el, err := sub.value(1)
		if err != nil {
			return nil, false
		}
		f, good := sub.floatValue(el)
		ok = ok && good
		out = append(out, f)
		sub.skipWS()
		switch sub.peek() {
		case ',':
			sub.pos++
			sub.skipWS()
		case ']':
		default:
			return nil, false
		}
	}
	if !ok {
		return nil, false
	}
	return out, true
}

func spanBool(v jsonSpan) (bool, bool) {
	switch v.kind {
	case jsonTrue:
		return true, true
	case jsonFalse:
		return false, true
	}
	return false, false
}
