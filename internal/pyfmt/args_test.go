package pyfmt

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	long := "('" + strings.Repeat("x", 1100) + "',)"
	tests := []struct {
		repr string
		want string // JSON; "" for ErrIncompleteRepr
	}{
		{"()", `[]`},
		{"(5,)", `[5]`},
		{"[1, 'a']", `[1,"a"]`},
		{"(1, 'two', None, True, 2.5, [3, (4,)], {'k': 'v'})", `[1,"two",null,true,2.5,[3,[4]],{"k":"v"}]`},
		{"(123456789012345678901234567890,)", `[123456789012345678901234567890]`},
		{"(5)", ""},                                    // not a tuple
		{"('xxxx...', ...", ""},                        // cut by saferepr (Celery 5.2)
		{"(1, 2, 3, 226..., ...)", ""},                 // cut inside a number
		{"({'a': {'b': {...}}},)", ""},                 // saferepr's maxlevels
		{"('abc...',)", ""},                            // a string cut by a small cap
		{"(b'x',)", ""},                                // bytes: not JSON
		{"({1, 2},)", ""},                              // a set: not JSON
		{"({1: 2},)", ""},                              // a non-string key
		{"(float('nan'),)", ""},                        // not a literal
		{"(datetime.datetime(2024, 1, 2, 3, 4),)", ""}, // not a literal
		{long, ""},                                     // as long as the cap
	}
	for _, tt := range tests {
		got, err := ParseArgs(tt.repr)
		if tt.want == "" {
			if !errors.Is(err, ErrIncompleteRepr) {
				t.Errorf("ParseArgs(%.40q) = %v, %v; want ErrIncompleteRepr", tt.repr, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseArgs(%q): %v", tt.repr, err)
			continue
		}
		b, _ := json.Marshal(got)
		if string(b) != tt.want {
			t.Errorf("ParseArgs(%q) = %s, want %s", tt.repr, b, tt.want)
		}
	}
}

func TestParseKwargs(t *testing.T) {
	tests := []struct {
		repr string
		want string
	}{
		{"{}", `{}`},
		{"{'a': 1, 'b': [None, 'x']}", `{"a":1,"b":[null,"x"]}`},
		{"{'a': 'yyy...'}", ""},
		{"{'a': 'yyyy', ...", ""},
		{"[1]", ""},
	}
	for _, tt := range tests {
		got, err := ParseKwargs(tt.repr)
		if tt.want == "" {
			if !errors.Is(err, ErrIncompleteRepr) {
				t.Errorf("ParseKwargs(%q) = %v, %v; want ErrIncompleteRepr", tt.repr, got, err)
			}
			continue
		}
		b, _ := json.Marshal(got)
		if err != nil || string(b) != tt.want {
			t.Errorf("ParseKwargs(%q) = %s, %v; want %s", tt.repr, b, err, tt.want)
		}
	}
}
