package pyfmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/cases"
)

// The package's fuzz suite: what it writes, Python (and so Parse) reads
// back to the same value, and what it reads, it writes back the same.

// finite reports whether v holds no NaN or infinity, whose reprs (nan,
// inf) are names rather than literals.
func finite(v Value) bool {
	if v.kind == Float && (math.IsNaN(v.num) || math.IsInf(v.num, 0)) {
		return false
	}
	for _, it := range v.items {
		if !finite(it) {
			return false
		}
	}
	return true
}

// checkReprReadsBack checks that repr, the repr of v, is a literal that
// reads back to a value with the same repr.
func checkReprReadsBack(t *testing.T, v Value, repr string) {
	t.Helper()
	back, err := Parse(repr)
	if !finite(v) {
		if err == nil {
			t.Fatalf("Parse(%q) of a non-finite float succeeded", repr)
		}
		return
	}
	if err != nil {
		t.Fatalf("Parse(%q), a repr it wrote: %v", repr, err)
	}
	if again := back.Repr(); again != repr {
		t.Fatalf("repr %q read back as %q", repr, again)
	}
}

// FuzzParse: a literal Parse takes has a repr that reads back to itself,
// and its str is its repr but for a str's.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"{'user': 42, 'tags': ['a', \"b'c\"], 'n': None}",
		"(1, 2.5, -3e400, True, b'\\x00\\xff', {1, 2}, (), (1,), [])",
		"{1: 'a', True: 'b', 1.0: 'c', (1, 2): frozen}",
		"'\\u00e9\\U0001F600\\N{DASH}' r'\\'' u\"x\" 'y'",
		"0x_ff 0o17 0b101 1_000 012 .5 5. 1e-5 -0.0",
		"{'a': {'b': {'c': [[[[]]]]}}}",
		"[\n 1 , \\\n 2 ,]",
		"'''a\nb''' '\\x41\\101\\n\\q'",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			return
		}
		repr := v.Repr()
		checkReprReadsBack(t, v, repr)
		want := repr
		if v.kind == Str {
			want = v.text
		}
		if str := v.Str(); str != want {
			t.Fatalf("str of %q is %q, want %q", s, str, want)
		}
	})
}

// FuzzReprJSON: ReprJSON writes a literal that reads back to itself, and
// to the JSON document's value.
func FuzzReprJSON(f *testing.F) {
	for _, s := range []string{
		`{"k": [1, 2.5, null, true, false]}`,
		`["h\u00e9llo \u2603", "it's", "\"q\"", "a\\b", "\ud83d\ude00", "\ud800"]`,
		`{"z": 1, "a": {"b": []}, "z": 2}`,
		`[12345678901234567890, -0, 1E3, 1e16, 1e400, 1e-400, 0.0001, 0.00001]`,
		` 3 `,
		`[1] [2]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		repr, err := ReprJSON(data)
		if err != nil {
			if json.Valid(data) {
				t.Fatalf("ReprJSON(%q) of valid JSON: %v", data, err)
			}
			return
		}
		v, err := jsonDocValue(data)
		if err != nil {
			t.Fatal(err)
		}
		if !repeatsKey(v) {
			checkReprReadsBack(t, v, repr)
		}
		if !finite(v) {
			return
		}
		// What it reads back to is, as JSON, the document's value
		// (Python's json.loads, like Go's, keeps a repeated key's last
		// value).
		back, err := Parse(repr)
		if err != nil {
			t.Fatal(err)
		}
		x, err := jsonable(back)
		if err != nil {
			return // a string ending in "...", which jsonable refuses
		}
		want, err := decodeJSON(data)
		if err != nil {
			t.Fatalf("ReprJSON took %q, which is not JSON: %v", data, err)
		}
		if !sameJSON(t, x, want) {
			t.Fatalf("%q: repr %q reads back as %v", data, repr, x)
		}
	})
}

// sameJSON reports whether a and b are the same JSON value (-0 and 0 are).
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	var values [2]any
	for i, x := range []any{a, b} {
		data, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		if values[i], err = decodeJSON(data); err != nil {
			t.Fatal(err)
		}
	}
	return reflect.DeepEqual(values[0], values[1])
}

// decodeJSON decodes data as encoding/json does into an any, numbers as
// float64, but for an integer beyond float64's range, which Python's int
// holds exactly (and which encoding/json refuses): that one is kept as its
// digits.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return floatNumbers(v), nil
}

func floatNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			return f
		}
		if n, ok := new(big.Int).SetString(string(x), 10); ok {
			return "int " + n.String()
		}
		return "number " + string(x)
	case []any:
		for i := range x {
			x[i] = floatNumbers(x[i])
		}
	case map[string]any:
		for k, e := range x {
			x[k] = floatNumbers(e)
		}
	}
	return v
}

// repeatsKey reports whether a dict in v repeats a key. ReprJSON writes a
// JSON object's keys as they come, a repeated one too, where Python's dict
// would keep one: its repr then reads back shorter.
func repeatsKey(v Value) bool {
	if v.kind == Dict {
		var d dict
		for i := 0; i+1 < len(v.items); i += 2 {
			if d.set(v.items[i], v.items[i+1]) == nil && len(d.items) != i+2 {
				return true
			}
		}
	}
	for _, it := range v.items {
		if repeatsKey(it) {
			return true
		}
	}
	return false
}

// FuzzParseArgs: args ParseArgs reads have an ArgsRepr that it reads back
// to the same JSON, and likewise for kwargs.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"(1, 'two', None, True, 2.5, [3, (4,)], {'k': 'v'})",
		"[1.0, 1e16, 1e20, -0.0, 123456789012345678901234567890]",
		"{'a': 1, 'b': [None, 'x'], 'a': 2}",
		"('xxxx...', ...",
		"({1: 2},)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkArgsReadBack(t, s, "args",
			func(s string) (any, error) { return ParseArgs(s) },
			func(x any) string { return ArgsRepr(x.([]any)) })
		checkArgsReadBack(t, s, "kwargs",
			func(s string) (any, error) { return ParseKwargs(s) },
			func(x any) string { return KwargsRepr(x.(map[string]any)) })
	})
}

// checkArgsReadBack checks that what parse reads from s has a repr that
// parse reads back to the same JSON.
func checkArgsReadBack(t *testing.T, s, what string, parse func(string) (any, error), repr func(any) string) {
	t.Helper()
	x, err := parse(s)
	if err != nil {
		return
	}
	r := repr(x)
	if utf8.RuneCountInString(r) >= ReprMaxLen {
		return // too long to be read back whole
	}
	back, err := parse(r)
	if err != nil {
		t.Fatalf("%s of %q: their repr %q does not read back: %v", what, s, r, err)
	}
	if !sameJSON(t, back, x) {
		t.Fatalf("%s of %q: %v, their repr %q reads back as %v", what, s, x, r, back)
	}
}

// FuzzStr: a str's repr reads back to the str, a str's JSON (Flower's)
// decodes to it, is ASCII and never holds "</"; Truncate keeps a prefix
// of at most ReprMaxLen characters.
func FuzzStr(f *testing.F) {
	for _, s := range []string{"", "it's", `it's "x"`, "a\\b\t\n\r\x00\x7f", "\u0085\u00a0\u200b\U000e0001", "😀", "</script>", "\xff\xfe", strings.Repeat("é", 1100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Python sees what Go's range does: each byte that is not
		// UTF-8 is U+FFFD.
		text := string([]rune(s))
		repr := QuoteStr(s)
		v, err := Parse(repr)
		if err != nil || v.kind != Str || v.text != text {
			t.Fatalf("QuoteStr(%q) = %s, reads back as %+v, %v", s, repr, v, err)
		}
		js := AppendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(js, &back); err != nil || back != text {
			t.Fatalf("AppendJSONString(%q) = %s, decodes to %q, %v", s, js, back, err)
		}
		for _, c := range js {
			if c < 0x20 || c >= 0x7f {
				t.Fatalf("AppendJSONString(%q) = %s: not printable ASCII", s, js)
			}
		}
		if strings.Contains(string(js), "</") {
			t.Fatalf("AppendJSONString(%q) = %s holds </", s, js)
		}
		cut := Truncate(s)
		if n := utf8.RuneCountInString(cut); n > ReprMaxLen {
			t.Fatalf("Truncate left %d characters", n)
		}
		if cut != s && !strings.HasPrefix(text, strings.TrimSuffix(cut, "...")) {
			t.Fatalf("Truncate(%q) = %q, not a prefix", s, cut)
		}
	})
}

// FuzzFloat: a float's repr is strconv's shortest digits in Python's
// layout, and reads back to the same float.
func FuzzFloat(f *testing.F) {
	for _, x := range []float64{0, math.Copysign(0, -1), 1, 0.1, 1e16, 1e15, 1e-5, 1e-4, 5e-324, math.MaxFloat64, 1732420000.5, 1073741824, math.Inf(1), math.NaN()} {
		f.Add(math.Float64bits(x))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		x := math.Float64frombits(bits)
		repr := Value{kind: Float, num: x}.Repr()
		js := string(AppendJSONFloat(nil, x))
		if math.IsNaN(x) || math.IsInf(x, 0) {
			want := map[string]string{"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[repr]
			if want == "" || js != want {
				t.Fatalf("%v: repr %s, JSON %s", x, repr, js)
			}
			return
		}
		if want := jsonFloatByStrconv(x); repr != want || js != want {
			t.Fatalf("%b: repr %s, JSON %s, want %s", x, repr, js, want)
		}
		v, err := Parse(repr)
		if err != nil || v.kind != Float || math.Float64bits(v.num) != bits {
			t.Fatalf("%b: repr %s reads back as %+v, %v", x, repr, v, err)
		}
		// A Go float64 is shown as Python shows it after a JSON round
		// trip: an int where integral.
		goRepr := Repr(x)
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			if goRepr != strconv.FormatInt(int64(x), 10) {
				t.Fatalf("Repr(%v) = %s, want an int", x, goRepr)
			}
		} else if goRepr != repr {
			t.Fatalf("Repr(%v) = %s, want %s", x, goRepr, repr)
		}
	})
}

func FuzzPlainRepr(f *testing.F) {
	for _, s := range []string{
		"datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(seconds=7200)))",
		"[b'a\\xff', UUID('12345678-1234-5678-1234-567812345678'), Decimal('1')]", "'x' \"y\" b'", "datetime.time(",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := PlainRepr(s)
		if again := PlainRepr(p); again != p {
			t.Errorf("not idempotent: %q -> %q -> %q", s, p, again)
		}
	})
}

// FuzzContainsFold checks the ASCII fast paths of ContainsFold against
// its definition: Fold(s) contains the folded needle.
func FuzzContainsFold(f *testing.F) {
	for _, c := range [][2]string{
		{"SUCCESS", "succ"}, {"tasks.Add", "add"}, {"{'user': 'U7'}", "u7"}, {"ABCDEFGHIJKLMNOPQRSTUVWXYZ@[`{", "xyz@["},
		{"Straße", "ss"}, {"KELVIN \u212a", "k"}, {"0123456789abcdef", "9a"}, {"", ""}, {"\x7f\x80A", "a"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, s, sub string) {
		if got, want := Fold(s), cases.Fold().String(s); got != want {
			t.Fatalf("Fold(%q) = %q, want %q", s, got, want)
		}
		folded := Fold(sub)
		if got, want := ContainsFold(s, folded), strings.Contains(Fold(s), folded); got != want {
			t.Fatalf("ContainsFold(%q, %q) = %v, want %v", s, folded, got, want)
		}
	})
}

func TestAsciiUpper(t *testing.T) {
	for _, c := range []struct {
		s            string
		ascii, upper bool
	}{
		{"", true, false}, {"abcdefgh", true, false}, {"abcdefgH", true, true}, {"Habcdefg", true, true},
		{"@[`{@[`{@[`{", true, false}, {"abcdefghijklmnoZ", true, true}, {"abcdefghijklmnopZ", true, true},
		{"abcdefg\x80", false, false}, {"abcdefghi\xff", false, false}, {"ZZZZZZZZ\x80", false, true},
		{"a", true, false}, {"Q", true, true}, {"ab\x80", false, false}, {"abcD", true, true}, {"Dabc", true, true},
		{"abcdeF", true, true}, {"abcde\xc3", false, false}, {"abc@[`{", true, false}, {"abcdefghiJ", true, true},
	} {
		if a, u := asciiUpper(c.s); a != c.ascii || (c.ascii && u != c.upper) {
			t.Errorf("asciiUpper(%q) = %v, %v; want %v, %v", c.s, a, u, c.ascii, c.upper)
		}
	}
}
