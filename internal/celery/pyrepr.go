package celery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ReprMaxLen is the cap Celery puts on argsrepr and kwargsrepr
// (argsrepr_maxsize / kwargsrepr_maxsize): the reprs only feed logs and
// events, and an unbounded one would bloat every message header.
const ReprMaxLen = 1024

// PyRepr returns what Python's repr() prints for v as Python's json module
// would have decoded it: None, True/False, ints, floats, 'strings', [lists]
// and {'dicts': ...}. Workers only use the result for logs and events, but
// Flower's API shows it verbatim, so it should read like Python.
//
// Go maps have no order, so map[string]any keys are printed sorted; use
// PyReprJSON to keep the order of a JSON document. A float64 holding an
// integral value is printed as an int, because that is what a JSON number
// without a fraction decodes to in Python; pass a json.Number to keep the
// distinction.
func PyRepr(v any) string {
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

// PyReprJSON is PyRepr of a JSON document, keeping the order of its objects'
// keys as Python's json.loads does.
func PyReprJSON(data []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var b strings.Builder
	if err := writeJSONRepr(&b, dec); err != nil {
		return "", fmt.Errorf("python repr of JSON: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return "", fmt.Errorf("python repr of JSON: trailing data")
	}
	return b.String(), nil
}

// ArgsRepr is the repr of args as the tuple Celery passes around:
// "()", "(2,)", "(2, 3)".
func ArgsRepr(args []any) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		writeRepr(&b, a)
	}
	if len(args) == 1 {
		b.WriteByte(',')
	}
	b.WriteByte(')')
	return b.String()
}

// KwargsRepr is the repr of kwargs, "{}" when there are none.
func KwargsRepr(kwargs map[string]any) string {
	if kwargs == nil {
		return "{}"
	}
	return PyRepr(kwargs)
}

// truncateRepr caps a repr at ReprMaxLen characters, marking the cut with
// "..." the way Celery's saferepr does.
func truncateRepr(s string) string {
	if utf8.RuneCountInString(s) <= ReprMaxLen {
		return s
	}
	r := []rune(s)
	return string(r[:ReprMaxLen-3]) + "..."
}

// ExceptionRepr turns a serialized exception, as the result backend stores it
// ({"exc_type": "ValueError", "exc_message": ["kaput"], "exc_module":
// "builtins"}), into Python's repr of the exception: "ValueError('kaput')".
// That is what Flower shows as the result of a failed or revoked task.
// Anything else is shown as the repr of the value itself.
func ExceptionRepr(exc json.RawMessage) string {
	var e struct {
		Type    *string         `json:"exc_type"`
		Message json.RawMessage `json:"exc_message"`
	}
	trimmed := bytes.TrimSpace(exc)
	if len(trimmed) == 0 {
		return "None"
	}
	if trimmed[0] != '{' || json.Unmarshal(trimmed, &e) != nil || e.Type == nil {
		if s, err := PyReprJSON(trimmed); err == nil {
			return s
		}
		return "None"
	}
	// exc_type is the class's __qualname__; repr() prints only __name__.
	name := *e.Type
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	var args string
	msg := bytes.TrimSpace(e.Message)
	switch {
	case len(msg) == 0 || string(msg) == "null":
		args = ""
	case msg[0] == '[':
		// exc_message is exc.args; BaseException.__repr__ prints a single
		// argument without the tuple's trailing comma.
		s, err := PyReprJSON(msg)
		if err != nil {
			return name + "()"
		}
		args = s[1 : len(s)-1]
	default:
		// Celery before 4 stored str(exc) instead of the args list.
		s, err := PyReprJSON(msg)
		if err != nil {
			return name + "()"
		}
		args = s
	}
	return name + "(" + args + ")"
}

func writeRepr(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case string:
		writeStrRepr(b, x)
	case json.Number:
		writeNumberRepr(b, x)
	case float64:
		writeFloatRepr(b, x, true)
	case float32:
		writeFloatRepr(b, float64(x), true)
	case int:
		b.WriteString(strconv.Itoa(x))
	case int8, int16, int32, int64:
		b.WriteString(strconv.FormatInt(reflect.ValueOf(x).Int(), 10))
	case uint, uint8, uint16, uint32, uint64, uintptr:
		b.WriteString(strconv.FormatUint(reflect.ValueOf(x).Uint(), 10))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeStrRepr(b, k)
			b.WriteString(": ")
			writeRepr(b, x[k])
		}
		b.WriteByte('}')
	case json.RawMessage:
		s, err := PyReprJSON(x)
		if err != nil {
			b.WriteString("None")
			return
		}
		b.WriteString(s)
	default:
		// Anything else is shown as the JSON it would be sent as.
		data, err := json.Marshal(x)
		if err != nil {
			b.WriteString("None")
			return
		}
		writeRepr(b, json.RawMessage(data))
	}
}

// writeJSONRepr writes the repr of the next JSON value from dec.
func writeJSONRepr(b *strings.Builder, dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			b.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				if err := writeJSONRepr(b, dec); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			b.WriteByte(']')
		case '{':
			b.WriteByte('{')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key, ok := k.(string)
				if !ok {
					return fmt.Errorf("object key is %T", k)
				}
				writeStrRepr(b, key)
				b.WriteString(": ")
				if err := writeJSONRepr(b, dec); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			b.WriteByte('}')
		default:
			return fmt.Errorf("unexpected %v", t)
		}
	default:
		writeRepr(b, t)
	}
	return nil
}

// writeNumberRepr follows Python's json module: a number with a fraction or
// an exponent is a float, anything else an int of unlimited size.
func writeNumberRepr(b *strings.Builder, n json.Number) {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		s = strings.TrimPrefix(s, "+")
		neg := strings.HasPrefix(s, "-")
		digits := strings.TrimLeft(strings.TrimPrefix(s, "-"), "0")
		if digits == "" {
			b.WriteByte('0')
			return
		}
		if neg {
			b.WriteByte('-')
		}
		b.WriteString(digits)
		return
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		b.WriteString(s)
		return
	}
	writeFloatRepr(b, f, false)
}

// writeFloatRepr prints f as Python's float.__repr__ does: the shortest
// digits that round-trip, positional for exponents -4..15, scientific
// otherwise, and always recognisable as a float ("2.0", "1e+16"). With
// intLike an integral value is printed as an int instead.
func writeFloatRepr(b *strings.Builder, f float64, intLike bool) {
	switch {
	case math.IsNaN(f):
		b.WriteString("nan")
		return
	case math.IsInf(f, 1):
		b.WriteString("inf")
		return
	case math.IsInf(f, -1):
		b.WriteString("-inf")
		return
	}
	if intLike && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		b.WriteString(strconv.FormatInt(int64(f), 10))
		return
	}
	// 'e' with -1 precision gives the shortest round-tripping digits as
	// d.ddde±XX; Python lays the same digits out differently.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	neg := strings.HasPrefix(e, "-")
	e = strings.TrimPrefix(e, "-")
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	if neg {
		b.WriteByte('-')
	}
	if exp >= -4 && exp < 16 {
		// Python prints positionally for exponents -4..15.
		switch {
		case exp < 0:
			b.WriteString("0.")
			b.WriteString(strings.Repeat("0", -exp-1))
			b.WriteString(digits)
		case len(digits) <= exp+1:
			b.WriteString(digits)
			b.WriteString(strings.Repeat("0", exp+1-len(digits)))
			b.WriteString(".0")
		default:
			b.WriteString(digits[:exp+1])
			b.WriteByte('.')
			b.WriteString(digits[exp+1:])
		}
		return
	}
	b.WriteString(digits[:1])
	if len(digits) > 1 {
		b.WriteByte('.')
		b.WriteString(digits[1:])
	}
	b.WriteByte('e')
	if exp < 0 {
		b.WriteByte('-')
		exp = -exp
	} else {
		b.WriteByte('+')
	}
	if exp < 10 {
		b.WriteByte('0')
	}
	b.WriteString(strconv.Itoa(exp))
}

// writeStrRepr quotes s as Python 3's str.__repr__: single quotes unless the
// text holds a single quote and no double quote, backslash escapes for the
// quote, backslash and \t \n \r, \xNN / \uNNNN / \UNNNNNNNN for other
// unprintable characters, and printable non-ASCII text as it is.
func writeStrRepr(b *strings.Builder, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x7f && r >= 0x20:
			b.WriteRune(r)
		case r >= 0x80 && unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteByte(quote)
}
