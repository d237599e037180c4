package state

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"unicode/utf8"
)

// ReprLimit is the length (in characters) from which an args or kwargs
// repr may have been cut: Celery writes them with saferepr capped at
// argsrepr_maxsize/kwargsrepr_maxsize (1024), and a cut repr is at least
// that long.
const ReprLimit = 1024

// ErrIncompleteRepr says a repr may not hold the whole value: it was cut,
// or it is not a literal that JSON can carry.
var ErrIncompleteRepr = errors.New("the repr is not a complete literal")

// ReprArgs reads a task's args repr ("(1, 'a')" or "[1, 'a']") back into
// the JSON values a task message carries. It refuses, with
// ErrIncompleteRepr, anything that may not be the whole value: a repr as
// long as Celery's cap, one that does not parse completely, one holding
// saferepr's "..." (an Ellipsis, for a level it did not descend into) or
// a string ending in "..." (how saferepr cuts a string when the cap is set
// lower than the default), bytes, sets, non-finite floats and dicts with
// keys other than strings. A refusal costs a 409; a wrong value would
// re-run a task with arguments nobody gave it.
func ReprArgs(repr string) ([]any, error) {
	v, err := completeLiteral(repr)
	if err != nil {
		return nil, err
	}
	if v.kind != pyTuple && v.kind != pyList {
		return nil, ErrIncompleteRepr
	}
	out := make([]any, 0, len(v.items))
	for _, it := range v.items {
		x, err := jsonValue(it)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// ReprKwargs is ReprArgs for a kwargs repr ("{'a': 1}").
func ReprKwargs(repr string) (map[string]any, error) {
	v, err := completeLiteral(repr)
	if err != nil {
		return nil, err
	}
	if v.kind != pyDict {
		return nil, ErrIncompleteRepr
	}
	x, err := jsonValue(v)
	if err != nil {
		return nil, err
	}
	return x.(map[string]any), nil
}

func completeLiteral(repr string) (pyValue, error) {
	if utf8.RuneCountInString(repr) >= ReprLimit {
		return pyValue{}, ErrIncompleteRepr
	}
	p := pyParser{s: strings.TrimLeft(repr, " \t")}
	v, err := p.expression(0)
	if err != nil {
		return pyValue{}, ErrIncompleteRepr
	}
	if p.skipSpace(); p.i != len(p.s) {
		return pyValue{}, ErrIncompleteRepr
	}
	return v, nil
}

// jsonValue converts a literal to what encoding/json writes back as the
// same JSON: ints stay exact as json.Number.
func jsonValue(v pyValue) (any, error) {
	switch v.kind {
	case pyNone:
		return nil, nil
	case pyBool:
		return v.num != 0, nil
	case pyInt:
		return json.Number(v.text), nil
	case pyFloat:
		if math.IsNaN(v.num) || math.IsInf(v.num, 0) {
			return nil, ErrIncompleteRepr
		}
		return v.num, nil
	case pyStr:
		if strings.HasSuffix(v.text, "...") {
			return nil, ErrIncompleteRepr
		}
		return v.text, nil
	case pyList, pyTuple:
		out := make([]any, 0, len(v.items))
		for _, it := range v.items {
			x, err := jsonValue(it)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case pyDict:
		out := make(map[string]any, len(v.items)/2)
		for i := 0; i+1 < len(v.items); i += 2 {
			if k := v.items[i]; k.kind != pyStr || strings.HasSuffix(k.text, "...") {
				return nil, ErrIncompleteRepr
			}
			x, err := jsonValue(v.items[i+1])
			if err != nil {
				return nil, err
			}
			out[v.items[i].text] = x
		}
		return out, nil
	}
	return nil, ErrIncompleteRepr
}
