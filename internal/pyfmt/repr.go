package pyfmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ReprMaxLen is the cap Celery puts on argsrepr and kwargsrepr
// (argsrepr_maxsize / kwargsrepr_maxsize): the reprs only feed logs and
// events, and an unbounded one would bloat every message header. A repr
// this long may have been cut.
const ReprMaxLen = 1024

// Repr returns what Python's repr() prints for v as Python's json module
// would have decoded it: None, True/False, ints, floats, 'strings', [lists]
// and {'dicts': ...}. Workers only use the result for logs and events, but
// Flower's API shows it verbatim, so it should read like Python.
//
// Go maps have no order, so map[string]any keys are printed sorted; use
// ReprJSON to keep the order of a JSON document. A float64 holding an
// integral value is printed as an int, because that is what a JSON number
// without a fraction decodes to in Python; pass a json.Number to keep the
// distinction.
func Repr(v any) string {
	return goValue(v).Repr()
}

// ReprJSON is Repr of a JSON document, keeping the order of its objects'
// keys as Python's json.loads does.
func ReprJSON(data []byte) (string, error) {
	v, err := jsonDocValue(data)
	if err != nil {
		return "", err
	}
	return v.Repr(), nil
}

// ArgsRepr is the repr of args as the tuple Celery passes around:
// "()", "(2,)", "(2, 3)".
func ArgsRepr(args []any) string {
	t := Value{kind: Tuple, items: make([]Value, len(args))}
	for i, a := range args {
		t.items[i] = goValue(a)
	}
	return t.Repr()
}

// KwargsRepr is the repr of kwargs, "{}" when there are none.
func KwargsRepr(kwargs map[string]any) string {
	return Repr(kwargs)
}

// Truncate caps a repr at ReprMaxLen characters, marking the cut with
// "..." the way Celery's saferepr does.
func Truncate(s string) string {
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
		if s, err := ReprJSON(trimmed); err == nil {
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
		s, err := ReprJSON(msg)
		if err != nil {
			return name + "()"
		}
		args = s[1 : len(s)-1]
	default:
		// Celery before 4 stored str(exc) instead of the args list.
		s, err := ReprJSON(msg)
		if err != nil {
			return name + "()"
		}
		args = s
	}
	return name + "(" + args + ")"
}

// goValue is the Python value v decodes to (see Repr); what has no such
// value is None.
func goValue(v any) Value {
	switch x := v.(type) {
	case nil:
		return Value{kind: None}
	case bool:
		if x {
			return Value{kind: Bool, num: 1}
		}
		return Value{kind: Bool}
	case string:
		return Value{kind: Str, text: x}
	case json.Number:
		return numberValue(x)
	case float64:
		return floatValue(x)
	case float32:
		return floatValue(float64(x))
	case int:
		return Value{kind: Int, text: strconv.Itoa(x)}
	case int8, int16, int32, int64:
		return Value{kind: Int, text: strconv.FormatInt(reflect.ValueOf(x).Int(), 10)}
	case uint, uint8, uint16, uint32, uint64, uintptr:
		return Value{kind: Int, text: strconv.FormatUint(reflect.ValueOf(x).Uint(), 10)}
	case []any:
		l := Value{kind: List, items: make([]Value, len(x))}
		for i, e := range x {
			l.items[i] = goValue(e)
		}
		return l
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		d := Value{kind: Dict, items: make([]Value, 0, 2*len(keys))}
		for _, k := range keys {
			d.items = append(d.items, Value{kind: Str, text: k}, goValue(x[k]))
		}
		return d
	case json.RawMessage:
		d, err := jsonDocValue(x)
		if err != nil {
			return Value{kind: None}
		}
		return d
	default:
		// Anything else is shown as the JSON it would be sent as.
		data, err := json.Marshal(x)
		if err != nil {
			return Value{kind: None}
		}
		return goValue(json.RawMessage(data))
	}
}

// floatValue is a Go float as Python sees it after a JSON round trip: an
// integral value (below 2^53) is an int.
func floatValue(f float64) Value {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return Value{kind: Int, text: strconv.FormatInt(int64(f), 10)}
	}
	return Value{kind: Float, num: f}
}

// numberValue follows Python's json module: a number with a fraction or an
// exponent is a float, anything else an int of unlimited size. A
// json.Number that is not a number is shown as written.
func numberValue(n json.Number) Value {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		s = strings.TrimPrefix(s, "+")
		neg := strings.HasPrefix(s, "-")
		digits := strings.TrimLeft(strings.TrimPrefix(s, "-"), "0")
		switch {
		case digits == "":
			digits = "0"
		case neg:
			digits = "-" + digits
		}
		return Value{kind: Int, text: digits}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return Value{kind: Int, text: s}
	}
	return Value{kind: Float, num: f}
}

// jsonDocValue is the value of one whole JSON document.
func jsonDocValue(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := jsonValue(dec)
	if err != nil {
		return Value{}, fmt.Errorf("python repr of JSON: %w", err)
	}
	// Anything after the value, even what is not a JSON token, makes the
	// document something else than one value.
	if _, err := dec.Token(); err != io.EOF {
		return Value{}, errors.New("python repr of JSON: trailing data")
	}
	return v, nil
}

// jsonValue reads the next JSON value from dec, keeping the order of an
// object's keys (and, as written, any key it repeats).
func jsonValue(dec *json.Decoder) (Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return Value{}, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return goValue(tok), nil
	}
	var v Value
	switch delim {
	case '[':
		v.kind = List
		for dec.More() {
			it, err := jsonValue(dec)
			if err != nil {
				return Value{}, err
			}
			v.items = append(v.items, it)
		}
	case '{':
		v.kind = Dict
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return Value{}, err
			}
			key, ok := k.(string)
			if !ok {
				return Value{}, fmt.Errorf("object key is %T", k)
			}
			it, err := jsonValue(dec)
			if err != nil {
				return Value{}, err
			}
			v.items = append(v.items, Value{kind: Str, text: key}, it)
		}
	default:
		return Value{}, fmt.Errorf("unexpected %v", delim)
	}
	if _, err := dec.Token(); err != nil {
		return Value{}, err
	}
	return v, nil
}
