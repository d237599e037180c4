package state

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// The packed part of a record: the fields a slot does not hold, each
// written only when set (Task.Set says which), in a fixed order. Floats
// take 8 bytes, strings a length and their bytes, interned strings their
// symbol, integers a varint. A typical finished task packs into about 60
// bytes where the Task struct alone is 400.

// floatFields are the packed times, in order.
var floatFields = [...]taskrec.Field{taskrec.FieldSent, taskrec.FieldStarted, taskrec.FieldRejected, taskrec.FieldSucceeded, taskrec.FieldFailed, taskrec.FieldRetried, taskrec.FieldRevoked, taskrec.FieldRuntime}

// floatOf returns the field of t that holds the time (or runtime) f.
func floatOf(t *taskrec.Task, f taskrec.Field) *float64 {
	switch f {
	case taskrec.FieldReceived:
		return &t.Received
	case taskrec.FieldSent:
		return &t.Sent
	case taskrec.FieldStarted:
		return &t.Started
	case taskrec.FieldRejected:
		return &t.Rejected
	case taskrec.FieldSucceeded:
		return &t.Succeeded
	case taskrec.FieldFailed:
		return &t.Failed
	case taskrec.FieldRetried:
		return &t.Retried
	case taskrec.FieldRevoked:
		return &t.Revoked
	default:
		return &t.Runtime
	}
}

// stringFields are the packed free-text strings, in order.
var stringFields = [...]taskrec.Field{taskrec.FieldArgs, taskrec.FieldKwargs, taskrec.FieldETA, taskrec.FieldExpires, taskrec.FieldResult, taskrec.FieldException, taskrec.FieldTraceback}

func stringOf(t *taskrec.Task, f taskrec.Field) *string {
	switch f {
	case taskrec.FieldArgs:
		return &t.Args
	case taskrec.FieldKwargs:
		return &t.Kwargs
	case taskrec.FieldETA:
		return &t.ETA
	case taskrec.FieldExpires:
		return &t.Expires
	case taskrec.FieldResult:
		return &t.Result
	case taskrec.FieldException:
		return &t.Exception
	default:
		return &t.Traceback
	}
}

// symbolFields are the packed interned strings, in order.
var symbolFields = [...]taskrec.Field{taskrec.FieldExchange, taskrec.FieldRoutingKey, taskrec.FieldClient}

func symbolOf(t *taskrec.Task, f taskrec.Field) *string {
	switch f {
	case taskrec.FieldExchange:
		return &t.Exchange
	case taskrec.FieldRoutingKey:
		return &t.RoutingKey
	default:
		return &t.Client
	}
}

// Tags of the root and parent ids: most tasks are their own root, and
// the others' ids are uuids too, 16 bytes instead of 36.
const (
	idSelf byte = iota
	idText
	idUUID
)

// ownTimestamp, in a record's first byte, says that the timestamp is
// packed. It is only when it is not the slot's order key: a NaN, which the
// key cannot hold.
const ownTimestamp byte = 1

// pack appends the packed fields of t to b, symbols as numbers of y, or
// as text when y is nil.
func pack(b []byte, t *taskrec.Task, y *symbols) []byte {
	own := t.Has(taskrec.FieldTimestamp) && math.IsNaN(t.Timestamp)
	if own {
		b = append(b, ownTimestamp)
	} else {
		b = append(b, 0)
	}
	// The received time comes first, where filters read it without
	// unpacking the rest.
	if t.Has(taskrec.FieldReceived) {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(t.Received))
	}
	for _, f := range floatFields {
		if t.Has(f) {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(*floatOf(t, f)))
		}
	}
	if own {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(t.Timestamp))
	}
	for _, f := range stringFields {
		if t.Has(f) {
			b = appendString(b, *stringOf(t, f))
		}
	}
	for _, f := range symbolFields {
		if !t.Has(f) {
			continue
		}
		if y == nil {
			b = appendString(b, *symbolOf(t, f))
		} else {
			b = binary.AppendUvarint(b, uint64(y.id(*symbolOf(t, f))))
		}
	}
	if t.Has(taskrec.FieldRetries) {
		b = binary.AppendVarint(b, int64(t.Retries))
	}
	b = binary.AppendVarint(b, t.Clock)
	for _, id := range [2]struct {
		f taskrec.Field
		v string
	}{{taskrec.FieldRootID, t.RootID}, {taskrec.FieldParentID, t.ParentID}} {
		if !t.Has(id.f) {
			continue
		}
		if id.v == t.UUID {
			b = append(b, idSelf)
			continue
		}
		if u, ok := parseUUID(id.v); ok {
			b = append(b, idUUID)
			b = append(b, u[:]...)
			continue
		}
		b = append(b, idText)
		b = appendString(b, id.v)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// The record of a task as the store keeps it: the fields a slot holds,
// then the packed rest, every string written out (symbols are numbered
// per process).
func encodeRecord(b []byte, t *taskrec.Task) []byte {
	b = binary.AppendUvarint(b, uint64(t.Set))
	b = appendString(b, t.UUID)
	b = appendString(b, t.State)
	if t.Has(taskrec.FieldName) {
		b = appendString(b, t.Name)
	}
	if t.Has(taskrec.FieldWorker) {
		b = appendString(b, t.Worker)
	}
	if t.Has(taskrec.FieldTimestamp) {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(t.Timestamp))
	}
	return pack(b, t, nil)
}

func decodeRecord(rec []byte) (taskrec.Task, error) {
	u := unpacker{b: rec, text: copyText}
	var t taskrec.Task
	t.Set = taskrec.Field(u.uvarint())
	t.UUID = u.str()
	t.State = u.str()
	if t.Has(taskrec.FieldName) {
		t.Name = u.str()
	}
	if t.Has(taskrec.FieldWorker) {
		t.Worker = u.str()
	}
	var key float64
	if t.Has(taskrec.FieldTimestamp) {
		key = u.float()
	}
	if u.err {
		return taskrec.Task{}, errCorrupt
	}
	if err := unpack(u.b, key, &t, nil, copyText, nil); err != nil {
		return taskrec.Task{}, err
	}
	return t, nil
}

var errCorrupt = errors.New("state: corrupt packed record")

// packedReceived reads the received time of a packed record whose task
// has one.
func packedReceived(rec []byte) float64 {
	return math.Float64frombits(binary.LittleEndian.Uint64(rec[1:9]))
}

// unpacker reads a packed record into a Task whose UUID and Set are
// already filled in. text turns bytes of the record into a string: a copy
// for records that leave the state, a view for a search that reads them
// under the lock.
type unpacker struct {
	b    []byte
	err  bool
	text func([]byte) string
}

func (u *unpacker) float() float64 {
	if len(u.b) < 8 {
		u.err = true
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(u.b))
	u.b = u.b[8:]
	return v
}

func (u *unpacker) uvarint() uint64 {
	v, n := binary.Uvarint(u.b)
	if n <= 0 {
		u.err = true
		return 0
	}
	u.b = u.b[n:]
	return v
}

func (u *unpacker) varint() int64 {
	v, n := binary.Varint(u.b)
	if n <= 0 {
		u.err = true
		return 0
	}
	u.b = u.b[n:]
	return v
}

func (u *unpacker) str() string {
	n := u.uvarint()
	if n > uint64(len(u.b)) {
		u.err = true
		return ""
	}
	s := u.text(u.b[:n])
	u.b = u.b[n:]
	return s
}

// unpack fills t from rec; key is the slot's order key. y is the
// symbols pack used; ids, when not nil, has room for the root and parent
// ids a view formats (see formatID).
func unpack(rec []byte, key float64, t *taskrec.Task, y *symbols, text func([]byte) string, ids *[]byte) error {
	if len(rec) == 0 {
		return errCorrupt
	}
	u := unpacker{b: rec[1:], text: text}
	if t.Has(taskrec.FieldReceived) {
		t.Received = u.float()
	}
	for _, f := range floatFields {
		if t.Has(f) {
			*floatOf(t, f) = u.float()
		}
	}
	if t.Has(taskrec.FieldTimestamp) {
		if rec[0]&ownTimestamp != 0 {
			t.Timestamp = u.float()
		} else {
			t.Timestamp = key
		}
	}
	for _, f := range stringFields {
		if t.Has(f) {
			*stringOf(t, f) = u.str()
		}
	}
	for _, f := range symbolFields {
		if t.Has(f) && y == nil {
			*symbolOf(t, f) = u.str()
		} else if t.Has(f) {
			id := u.uvarint()
			if id >= uint64(len(y.strs)) {
				return errCorrupt
			}
			*symbolOf(t, f) = y.str(uint32(id))
		}
	}
	if t.Has(taskrec.FieldRetries) {
		t.Retries = int(u.varint())
	}
	t.Clock = u.varint()
	for _, id := range [2]struct {
		f taskrec.Field
		v *string
	}{{taskrec.FieldRootID, &t.RootID}, {taskrec.FieldParentID, &t.ParentID}} {
		if !t.Has(id.f) {
			continue
		}
		if len(u.b) == 0 {
			return errCorrupt
		}
		tag := u.b[0]
		u.b = u.b[1:]
		switch tag {
		case idSelf:
			*id.v = t.UUID
		case idUUID:
			if len(u.b) < 16 {
				return errCorrupt
			}
			*id.v = formatID([16]byte(u.b), ids)
			u.b = u.b[16:]
		default:
			*id.v = u.str()
		}
	}
	if u.err {
		return errCorrupt
	}
	return nil
}

// releasePacked gives back the symbols a packed record holds; set is its
// task's fields. It skips to them without unpacking the rest.
func releasePacked(rec []byte, set taskrec.Field, y *symbols) {
	if set&(taskrec.FieldExchange|taskrec.FieldRoutingKey|taskrec.FieldClient) == 0 {
		return
	}
	off := 1
	if set&taskrec.FieldReceived != 0 {
		off += 8
	}
	for _, f := range floatFields {
		if set&f != 0 {
			off += 8
		}
	}
	if rec[0]&ownTimestamp != 0 {
		off += 8
	}
	b := rec[off:]
	for _, f := range stringFields {
		if set&f != 0 {
			n, w := binary.Uvarint(b)
			b = b[w+int(n):]
		}
	}
	for _, f := range symbolFields {
		if set&f != 0 {
			id, w := binary.Uvarint(b)
			b = b[w:]
			y.release(uint32(id))
		}
	}
}
