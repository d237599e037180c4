package pyfmt

import (
	"encoding/json"
	"math"
	"testing"
)

func TestRepr(t *testing.T) {
	type point struct {
		X int `json:"x"`
	}
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"None", nil, "None"},
		{"True", true, "True"},
		{"False", false, "False"},
		{"int", 42, "42"},
		{"int64", int64(-7), "-7"},
		{"uint8", uint8(200), "200"},
		{"integral float64 is an int", 2.0, "2"},
		{"float64", 2.5, "2.5"},
		{"negative float64", -0.1, "-0.1"},
		{"huge float64", 1e300, "1e+300"},
		{"float32", float32(0.5), "0.5"},
		{"json int", json.Number("12345678901234567890"), "12345678901234567890"},
		{"json minus zero", json.Number("-0"), "0"},
		{"json float keeps .0", json.Number("2.0"), "2.0"},
		{"json float exponent", json.Number("1E3"), "1000.0"},
		{"json 1e16", json.Number("1e16"), "1e+16"},
		{"json 1e15", json.Number("1e15"), "1000000000000000.0"},
		{"json 0.0001", json.Number("0.0001"), "0.0001"},
		{"json 0.00001", json.Number("0.00001"), "1e-05"},
		{"json 1.5e-7", json.Number("1.5e-7"), "1.5e-07"},
		{"json 123.456", json.Number("123.456"), "123.456"},
		{"json overflow", json.Number("1e400"), "inf"},
		{"NaN", math.NaN(), "nan"},
		{"-inf", math.Inf(-1), "-inf"},
		{"string", "héllo ☃", "'héllo ☃'"},
		{"empty string", "", "''"},
		{"single quote", "it's", `"it's"`},
		{"both quotes", `it's "x"`, `'it\'s "x"'`},
		{"double quote", `say "hi"`, `'say "hi"'`},
		{"backslash", `a\b`, `'a\\b'`},
		{"controls", "a\tb\nc\rd\x00\x1b\x7f", `'a\tb\nc\rd\x00\x1b\x7f'`},
		{"latin-1 unprintable", "\u0085\u00a0", `'\x85\xa0'`},
		{"BMP unprintable", "\u200b\u2028", `'\u200b\u2028'`},
		{"astral unprintable", "\U000e0001", `'\U000e0001'`},
		{"emoji", "😀", "'😀'"},
		{"list", []any{1.0, "a", nil, []any{}}, "[1, 'a', None, []]"},
		{"dict sorted", map[string]any{"b": 1.0, "a": true}, "{'a': True, 'b': 1}"},
		{"empty dict", map[string]any{}, "{}"},
		{"raw JSON keeps order", json.RawMessage(`{"z": 1, "a": [2.0]}`), "{'z': 1, 'a': [2.0]}"},
		{"struct via JSON", point{X: 3}, "{'x': 3}"},
		{"[]string via JSON", []string{"a", "b"}, "['a', 'b']"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Repr(tt.in); got != tt.want {
				t.Errorf("Repr(%#v) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestReprJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{`{"k": [1, 2.5, null, true]}`, "{'k': [1, 2.5, None, True]}", false},
		{`["h\u00e9llo \u2603"]`, "['héllo ☃']", false},
		{`{"b": {"c": []}, "a": "x"}`, "{'b': {'c': []}, 'a': 'x'}", false},
		{` 3 `, "3", false},
		{`{"a": 1`, "", true},
		{`[1] [2]`, "", true},
		{`0A0`, "", true},
		{`{"a": 1}x`, "", true},
		{``, "", true},
	}
	for _, tt := range tests {
		got, err := ReprJSON([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ReprJSON(%s) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestArgsRepr(t *testing.T) {
	tests := []struct {
		args []any
		want string
	}{
		{nil, "()"},
		{[]any{2.0}, "(2,)"},
		{[]any{2.0, 3.0}, "(2, 3)"},
		{[]any{"héllo ☃"}, "('héllo ☃',)"},
	}
	for _, tt := range tests {
		if got := ArgsRepr(tt.args); got != tt.want {
			t.Errorf("ArgsRepr(%v) = %s, want %s", tt.args, got, tt.want)
		}
	}
	if got := KwargsRepr(nil); got != "{}" {
		t.Errorf("KwargsRepr(nil) = %s, want {}", got)
	}
}

func TestExceptionRepr(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"one arg", `{"exc_type":"ValueError","exc_message":["kaput"],"exc_module":"builtins"}`, "ValueError('kaput')"},
		{"no args", `{"exc_type":"ValueError","exc_message":[],"exc_module":"builtins"}`, "ValueError()"},
		{"null message", `{"exc_type":"ValueError","exc_message":null}`, "ValueError()"},
		{"two args", `{"exc_type":"KeyError","exc_message":["a", 2],"exc_module":"builtins"}`, "KeyError('a', 2)"},
		{"qualname", `{"exc_type":"Outer.Inner","exc_message":["x"],"exc_module":"m"}`, "Inner('x')"},
		{"old string message", `{"exc_type":"Exception","exc_message":"boom"}`, "Exception('boom')"},
		{"quote in message", `{"exc_type":"E","exc_message":["it's"]}`, `E("it's")`},
		{"not an exception", `5`, "5"},
		{"plain object", `{"a": 1}`, "{'a': 1}"},
		{"null", `null`, "None"},
		{"empty", ``, "None"},
		{"garbage", `{`, "None"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExceptionRepr(json.RawMessage(tt.in)); got != tt.want {
				t.Errorf("ExceptionRepr(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}
