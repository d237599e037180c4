// Package pyfmt writes and reads the texts Python makes of values, as
// Celery and Flower make them: repr() and str() (a task's argsrepr and
// kwargsrepr, results and exceptions), Python literals read back from such
// reprs, and the JSON Flower answers with (json.dumps through Tornado).
// Flower's API shows these texts as they are, so each is written to
// Python's byte.
//
// Every repr goes through one Value and one writer: a Go value (Repr), a
// JSON document (ReprJSON) and a parsed literal (Parse) are each turned
// into a Value first.
//
// It also holds what reads such texts as Python would: str.casefold,
// str.strip and str.isspace (Fold, Strip, IsSpace), by which Flower
// compares them, and PlainRepr, which writes the reprs of kombu's typed
// values as the strings kombu 5.2 sent.
package pyfmt

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is the Python type of a Value.
type Kind uint8

// The kinds of Python literal a Value can be.
const (
	None Kind = iota
	Bool
	Int
	Float
	Str
	Bytes
	List
	Tuple
	Set
	Dict
)

// Value is a Python value of one of the literal kinds.
type Value struct {
	kind Kind
	// text is a str's contents, a bytes' contents (one rune per byte,
	// each < 256), or an int's decimal digits with their sign.
	text string
	num  float64 // a float's value; a bool's is 1 for True
	// items are a list's, tuple's or set's items; a dict's alternate key
	// and value.
	items []Value
}

// Kind is v's Python type.
func (v Value) Kind() Kind { return v.kind }

// Items are the items of a list, tuple or set, or, for a dict, its keys
// and values alternately (key, value, key, value...), in order.
func (v Value) Items() []Value { return v.items }

// Str is Python's str(v).
func (v Value) Str() string {
	if v.kind == Str {
		return v.text
	}
	return v.Repr()
}

// Repr is Python's repr(v). Sets keep the order they were written in, as
// Python's hash order cannot be reproduced.
func (v Value) Repr() string {
	return string(appendRepr(nil, v))
}

// QuoteStr is Python 3's repr of the str s.
func QuoteStr(s string) string {
	return string(appendStrRepr(nil, s))
}

func appendRepr(b []byte, v Value) []byte {
	switch v.kind {
	case None:
		return append(b, "None"...)
	case Bool:
		if v.num != 0 {
			return append(b, "True"...)
		}
		return append(b, "False"...)
	case Int:
		return append(b, v.text...)
	case Float:
		return appendFloatRepr(b, v.num)
	case Str:
		return appendStrRepr(b, v.text)
	case Bytes:
		return appendBytesRepr(append(b, 'b'), v.text)
	case List:
		return appendItems(b, '[', ']', v.items)
	case Tuple:
		if len(v.items) == 1 {
			b = appendRepr(append(b, '('), v.items[0])
			return append(b, ",)"...)
		}
		return appendItems(b, '(', ')', v.items)
	case Set:
		return appendItems(b, '{', '}', v.items)
	case Dict:
		b = append(b, '{')
		for i := 0; i+1 < len(v.items); i += 2 {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendRepr(b, v.items[i])
			b = append(b, ": "...)
			b = appendRepr(b, v.items[i+1])
		}
		return append(b, '}')
	}
	return b
}

func appendItems(b []byte, open, closer byte, items []Value) []byte {
	b = append(b, open)
	for i, it := range items {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendRepr(b, it)
	}
	return append(b, closer)
}

// appendFloatRepr appends Python's float.__repr__ of f.
func appendFloatRepr(b []byte, f float64) []byte {
	return appendFloatSpelt(b, f, &reprNonFinite)
}

// quoteChar picks repr's quote: ' unless the text has ' and no ".
func quoteChar(s string) byte {
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		return '"'
	}
	return '\''
}

// appendStrRepr quotes s as Python 3's str.__repr__ does: backslash
// escapes for the quote, the backslash and \t \n \r, \xNN / \uNNNN /
// \UNNNNNNNN for other characters that are not printable, and printable
// non-ASCII text as it is. Bytes that are not UTF-8 read as U+FFFD.
func appendStrRepr(b []byte, s string) []byte { return appendQuoted(b, s, false) }

// appendBytesRepr quotes bytes (one rune per byte) as bytes.__repr__ does,
// without the b prefix: as a str, but with \xNN for every byte outside
// printable ASCII.
func appendBytesRepr(b []byte, s string) []byte { return appendQuoted(b, s, true) }

func appendQuoted(b []byte, s string, isBytes bool) []byte {
	q := quoteChar(s)
	b = append(b, q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r < 0x20 || r == 0x7f || isBytes && r > 0x7f:
			b = appendHexEscape(b, 'x', uint32(r)&0xff, 2)
		case r < 0x7f || unicode.IsPrint(r):
			b = utf8.AppendRune(b, r)
		case r <= 0xff:
			b = appendHexEscape(b, 'x', uint32(r), 2)
		case r <= 0xffff:
			b = appendHexEscape(b, 'u', uint32(r), 4)
		default:
			b = appendHexEscape(b, 'U', uint32(r), 8)
		}
	}
	return append(b, q)
}

const hexDigits = "0123456789abcdef"

// appendHexEscape appends \<kind> and v in width lower-case hex digits.
func appendHexEscape(b []byte, kind byte, v uint32, width int) []byte {
	b = append(b, '\\', kind)
	for i := width - 1; i >= 0; i-- {
		b = append(b, hexDigits[v>>(4*uint(i))&0xf])
	}
	return b
}
