package taskrec

import (
	"encoding/binary"
	"errors"
	"math"
	"unsafe"
)

// The packed part of a record: the fields a slot does not hold, each
// written only when set (Task.Set says which), in a fixed order. Floats
// take 8 bytes, strings a length and their bytes, interned strings their
// symbol, integers a varint. A typical finished task packs into about 60
// bytes where the Task struct alone is 400.

// floatFields are the packed times, in order.
var floatFields = [...]Field{FieldSent, FieldStarted, FieldRejected, FieldSucceeded, FieldFailed, FieldRetried, FieldRevoked, FieldRuntime}

// FloatOf returns the field of t that holds the time (or runtime) f.
func FloatOf(t *Task, f Field) *float64 {
	switch f {
	case FieldReceived:
		return &t.Received
	case FieldSent:
		return &t.Sent
	case FieldStarted:
		return &t.Started
	case FieldRejected:
		return &t.Rejected
	case FieldSucceeded:
		return &t.Succeeded
	case FieldFailed:
		return &t.Failed
	case FieldRetried:
		return &t.Retried
	case FieldRevoked:
		return &t.Revoked
	default:
		return &t.Runtime
	}
}

// stringFields are the packed free-text strings, in order.
var stringFields = [...]Field{FieldArgs, FieldKwargs, FieldETA, FieldExpires, FieldResult, FieldException, FieldTraceback}

func stringOf(t *Task, f Field) *string {
	switch f {
	case FieldArgs:
		return &t.Args
	case FieldKwargs:
		return &t.Kwargs
	case FieldETA:
		return &t.ETA
	case FieldExpires:
		return &t.Expires
	case FieldResult:
		return &t.Result
	case FieldException:
		return &t.Exception
	default:
		return &t.Traceback
	}
}

// symbolFields are the packed interned strings, in order.
var symbolFields = [...]Field{FieldExchange, FieldRoutingKey, FieldClient}

func symbolOf(t *Task, f Field) *string {
	switch f {
	case FieldExchange:
		return &t.Exchange
	case FieldRoutingKey:
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

// Pack appends the packed fields of t to b, symbols as numbers of y, or
// as text when y is nil.
func Pack(b []byte, t *Task, y *Symbols) []byte {
	own := t.Has(FieldTimestamp) && math.IsNaN(t.Timestamp)
	if own {
		b = append(b, ownTimestamp)
	} else {
		b = append(b, 0)
	}
	// The received time comes first, where filters read it without
	// unpacking the rest.
	if t.Has(FieldReceived) {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(t.Received))
	}
	for _, f := range floatFields {
		if t.Has(f) {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(*FloatOf(t, f)))
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
			b = binary.AppendUvarint(b, uint64(y.ID(*symbolOf(t, f))))
		}
	}
	if t.Has(FieldRetries) {
		b = binary.AppendVarint(b, int64(t.Retries))
	}
	b = binary.AppendVarint(b, t.Clock)
	for _, id := range [2]struct {
		f Field
		v string
	}{{FieldRootID, t.RootID}, {FieldParentID, t.ParentID}} {
		if !t.Has(id.f) {
			continue
		}
		if id.v == t.UUID {
			b = append(b, idSelf)
			continue
		}
		if u, ok := ParseUUID(id.v); ok {
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

// EncodeRecord appends t as the state's Drain writes it and a store keeps
// it: the fields a slot holds, then the packed rest, every string written
// out (symbols are numbered per process).
func EncodeRecord(b []byte, t *Task) []byte {
	b = binary.AppendUvarint(b, uint64(t.Set))
	b = appendString(b, t.UUID)
	b = appendString(b, t.State)
	if t.Has(FieldName) {
		b = appendString(b, t.Name)
	}
	if t.Has(FieldWorker) {
		b = appendString(b, t.Worker)
	}
	if t.Has(FieldTimestamp) {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(t.Timestamp))
	}
	return Pack(b, t, nil)
}

// DecodeRecord reads a record EncodeRecord wrote.
func DecodeRecord(rec []byte) (Task, error) {
	u := unpacker{b: rec, text: CopyText}
	var t Task
	t.Set = Field(u.uvarint())
	t.UUID = u.str()
	t.State = u.str()
	if t.Has(FieldName) {
		t.Name = u.str()
	}
	if t.Has(FieldWorker) {
		t.Worker = u.str()
	}
	var key float64
	if t.Has(FieldTimestamp) {
		key = u.float()
	}
	if u.err {
		return Task{}, ErrCorrupt
	}
	if err := Unpack(u.b, key, &t, nil, CopyText, nil); err != nil {
		return Task{}, err
	}
	return t, nil
}

var ErrCorrupt = errors.New("taskrec: corrupt packed record")

// PackedReceived reads the received time of a packed record whose task
// has one.
func PackedReceived(rec []byte) float64 {
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

// Unpack fills t from rec; key is the slot's order key. y is the
// symbols pack used; ids, when not nil, has room for the root and parent
// ids a view formats (see formatID).
func Unpack(rec []byte, key float64, t *Task, y *Symbols, text func([]byte) string, ids *[]byte) error {
	if len(rec) == 0 {
		return ErrCorrupt
	}
	u := unpacker{b: rec[1:], text: text}
	if t.Has(FieldReceived) {
		t.Received = u.float()
	}
	for _, f := range floatFields {
		if t.Has(f) {
			*FloatOf(t, f) = u.float()
		}
	}
	if t.Has(FieldTimestamp) {
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
			if id >= uint64(len(y.Strs)) {
				return ErrCorrupt
			}
			*symbolOf(t, f) = y.Str(uint32(id))
		}
	}
	if t.Has(FieldRetries) {
		t.Retries = int(u.varint())
	}
	t.Clock = u.varint()
	for _, id := range [2]struct {
		f Field
		v *string
	}{{FieldRootID, &t.RootID}, {FieldParentID, &t.ParentID}} {
		if !t.Has(id.f) {
			continue
		}
		if len(u.b) == 0 {
			return ErrCorrupt
		}
		tag := u.b[0]
		u.b = u.b[1:]
		switch tag {
		case idSelf:
			*id.v = t.UUID
		case idUUID:
			if len(u.b) < 16 {
				return ErrCorrupt
			}
			*id.v = FormatID([16]byte(u.b), ids)
			u.b = u.b[16:]
		default:
			*id.v = u.str()
		}
	}
	if u.err {
		return ErrCorrupt
	}
	return nil
}

// ReleasePacked gives back the symbols a packed record holds; set is its
// task's fields. It skips to them without unpacking the rest.
func ReleasePacked(rec []byte, set Field, y *Symbols) {
	if set&(FieldExchange|FieldRoutingKey|FieldClient) == 0 {
		return
	}
	off := 1
	if set&FieldReceived != 0 {
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
			y.Release(uint32(id))
		}
	}
}

// ViewText is text that shares b's memory, for a view of a record that
// lives no longer than b does.
func ViewText(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// CopyText is text of its own.
func CopyText(b []byte) string { return string(b) }

// FormatID formats id into *buf and returns a view of it when buf has room
// for it, so that a view of a record allocates nothing; otherwise (buf is
// nil for copies) a new string.
func FormatID(id [16]byte, buf *[]byte) string {
	if buf == nil || cap(*buf)-len(*buf) < 36 {
		return FormatUUID(id)
	}
	start := len(*buf)
	*buf = AppendUUID(*buf, id)
	return ViewText((*buf)[start:])
}
