package pyfmt

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"unicode/utf8"
)

// ErrIncompleteRepr says a repr may not hold the whole value: it was cut,
// or it is not a literal that JSON can carry.
var ErrIncompleteRepr = errors.New("the repr is not a complete literal")

// ParseArgs reads a task's args repr ("(1, 'a')" or "[1, 'a']") back into
// the JSON values a task message carries. It refuses, with
// ErrIncompleteRepr, anything that may not be the whole value: a repr as
// long as Celery's cap, one that does not parse completely, one holding
// saferepr's "..." (an Ellipsis, for a level it did not descend into) or
// a string ending in "..." (how saferepr cuts a string when the cap is set
// lower than the default), bytes, sets, non-finite floats and dicts with
// keys other than strings. A refusal costs a 409; a wrong value would
// re-run a task with arguments nobody gave it.
func ParseArgs(repr string) ([]any, error) {
	v, err := completeLiteral(repr)
	if err != nil {
		return nil, err
	}
	if v.kind != Tuple && v.kind != List {
		return nil, ErrIncompleteRepr
	}
	x, err := jsonable(v)
	if err != nil {
		return nil, err
	}
	return x.([]any), nil
}

// ParseKwargs is ParseArgs for a kwargs repr ("{'a': 1}").
func ParseKwargs(repr string) (map[string]any, error) {
	v, err := completeLiteral(repr)
	if err != nil {
		return nil, err
	}
	if v.kind != Dict {
		return nil, ErrIncompleteRepr
	}
	x, err := jsonable(v)
	if err != nil {
		return nil, err
	}
	return x.(map[string]any), nil
}

// completeLiteral parses a repr shorter than Celery's cap (ReprMaxLen): a
// repr that long may have been cut.
func completeLiteral(repr string) (Value, error) {
	if utf8.RuneCountInString(repr) >= ReprMaxLen {
		return Value{}, ErrIncompleteRepr
	}
	v, err := Parse(repr)
	if err != nil {
		return Value{}, ErrIncompleteRepr
	}
	return v, nil
}

// jsonable converts a literal to what encoding/json writes back as the
// same JSON: ints stay exact as json.Number.
func jsonable(v Value) (any, error) {
	switch v.kind {
	case None:
		return nil, nil
	case Bool:
		return v.num != 0, nil
	case Int:
		return json.Number(v.text), nil
	case Float:
		if math.IsNaN(v.num) || math.IsInf(v.num, 0) {
			return nil, ErrIncompleteRepr
		}
		return v.num, nil
	case Str:
		if strings.HasSuffix(v.text, "...") {
			return nil, ErrIncompleteRepr
		}
		return v.text, nil
	case List, Tuple:
		out := make([]any, 0, len(v.items))
		for _, it := range v.items {
			x, err := jsonable(it)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case Dict:
		out := make(map[string]any, len(v.items)/2)
		for i := 0; i+1 < len(v.items); i += 2 {
			if k := v.items[i]; k.kind != Str || strings.HasSuffix(k.text, "...") {
				return nil, ErrIncompleteRepr
			}
			x, err := jsonable(v.items[i+1])
			if err != nil {
				return nil, err
			}
			out[v.items[i].text] = x
		}
		return out, nil
	}
	return nil, ErrIncompleteRepr
}
