package tasksearch

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stamen-dev/stamen/internal/pyfmt"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

func TestSearchErrors(t *testing.T) {
	tests := []struct {
		query, want string
	}{
		{"ab", "Substring search terms must contain at least 3 characters at position 0."},
		{"result:5", "Substring search terms must contain at least 3 characters at position 0."},
		{"   ab  ", "Substring search terms must contain at least 3 characters at position 0."},
		{"foo ab", "Substring search terms must contain at least 3 characters at position 4."},
		{"ééé ab", "Substring search terms must contain at least 3 characters at position 4."},
		{`" ab "`, "Substring search terms must contain at least 3 characters at position 0."},
		{"kwargs:ab", "Substring search terms must contain at least 3 characters at position 0."},
		{"ab OR", "Substring search terms must contain at least 3 characters at position 0."},
		{"-foo", "Negation with '-' is not supported at position 0."},
		{"foo -bar", "Negation with '-' is not supported at position 4."},
		{"NOT foo", "NOT is not supported at position 0."},
		{"foo NOT", "NOT is not supported at position 4."},
		{"(foo", "Missing closing parenthesis at position 0."},
		{"foo (bar OR baz", "Missing closing parenthesis at position 4."},
		{"()", "Empty group at position 0."},
		{"foo ( )", "Empty group at position 4."},
		{`foo "bar`, "Unterminated quoted phrase at position 4."},
		{`""`, "Empty search term at position 0."},
		{`foo ""`, "Empty search term at position 4."},
		{"name:", "Search qualifier requires a value at position 0."},
		{"state:", "Search qualifier requires a value at position 0."},
		{"foo AND", "AND must be followed by a search term at position 4."},
		{"foo AND OR bar", "AND must be followed by a search term at position 4."},
		{"foo AND )", "AND must be followed by a search term at position 4."},
		{"foo OR", "OR must be followed by a search term at position 4."},
		{"foo OR AND bar", "OR must be followed by a search term at position 4."},
		{"foo)", "Unexpected ')' at position 3."},
		{"(foo) bar)", "Unexpected ')' at position 9."},
		{"AND foo", "Expected a search term at position 0."},
		{"OR foo", "Expected a search term at position 0."},
		{")", "Expected a search term at position 0."},
		{"foo (", "Expected a search term at position 5."},
		{"((((((foo))))))", "Query nesting exceeds 5 levels at position 5."},
		{strings.Repeat("a", 2049), "Query exceeds 2048 characters."},
		{strings.TrimSpace(strings.Repeat("abc ", 129)), "Query exceeds 128 tokens."},
		{strings.Repeat("(", 129), "Query exceeds 128 tokens."},
	}
	for _, tc := range tests {
		_, err := parseSearch(tc.query)
		var se *Error
		if !errors.As(err, &se) {
			t.Errorf("parseSearch(%.30q) = %v, want a Error", tc.query, err)
			continue
		}
		if se.Error() != tc.want {
			t.Errorf("parseSearch(%.30q) = %q, want %q", tc.query, se.Error(), tc.want)
		}
	}
}

func TestSearchValid(t *testing.T) {
	for _, q := range []string{
		"", "   ", "abc", "name:-foo", `"NOT" foo`, `"AND"`, "(((((foo)))))", "state:x", "kwargs:a=",
		"kwargs:=", "foo:ab", "NAME:foo", "a\\\"b", `kwargs:"connection refused"`,
		strings.Repeat("a", 2048), "  " + strings.Repeat("a", 2048) + "  ",
		strings.TrimSpace(strings.Repeat("abc ", 128)),
		"foo AND bar OR (baz qux) OR state:SUCCESS",
	} {
		if _, err := parseSearch(q); err != nil {
			t.Errorf("parseSearch(%.30q): %v", q, err)
		}
	}
}

// searchTasks are the records the matching tests search.
func searchTasks() []taskrec.Task {
	all := taskrec.FieldName | taskrec.FieldArgs | taskrec.FieldKwargs
	return []taskrec.Task{
		{
			UUID: "aaaa0001-0000-0000-0000-000000000000", Name: "proj.add", State: taskrec.Success,
			Worker: "w1@host", Args: "(2, 3)", Kwargs: "{'user': 'Bob', 'n': 5, 'flag': None}", Result: "5",
			Set: all | taskrec.FieldWorker | taskrec.FieldResult,
		},
		{
			UUID: "bbbb0002-0000-0000-0000-000000000000", Name: "proj.mail", State: taskrec.Failure,
			Worker: "w2@host", Args: "('x@y.z',)", Kwargs: "{'to': 'ALICE', 'retry': True}",
			Set: all | taskrec.FieldWorker,
		},
		{
			UUID: "cccc0003-0000-0000-0000-000000000000", Name: "proj.add", State: taskrec.Pending,
			Args: "(1, 1)", Kwargs: "{}", Set: all,
		},
	}
}

func TestSearchMatch(t *testing.T) {
	tests := []struct {
		query string
		want  []string // uuid prefixes
	}{
		{"", []string{"aaaa", "bbbb", "cccc"}},
		{"state:success", []string{"aaaa"}},
		{"STATE:Success", []string{"aaaa"}},
		{"state:succ", nil},
		{"state:SUCCESS OR state:failure", []string{"aaaa", "bbbb"}},
		{"name:add", []string{"aaaa", "cccc"}},
		{"add mail", nil},
		{"add AND proj", []string{"aaaa", "cccc"}},
		{"add OR mail", []string{"aaaa", "bbbb", "cccc"}},
		{"worker:w2@", []string{"bbbb"}},
		{"w1@host", []string{"aaaa"}},
		{"pending", []string{"cccc"}},
		{"bbbb0002", []string{"bbbb"}},
		{"kwargs:user=bob", []string{"aaaa"}},
		{`kwargs:"user = bob"`, []string{"aaaa"}},
		{"kwargs:user=bo", nil},
		{"kwargs:flag=", []string{"aaaa"}},
		{"kwargs:retry=true", []string{"bbbb"}},
		{"kwargs:n=5", []string{"aaaa"}},
		{"kwargs:alice", []string{"bbbb"}},
		{"args:x@y", []string{"bbbb"}},
		{"result:proj", nil},
		{"(name:add AND state:pending) OR worker:w2@host", []string{"bbbb", "cccc"}},
		{"(name:add state:pending) OR (name:mail)", []string{"bbbb", "cccc"}},
		{`"proj.add"`, []string{"aaaa", "cccc"}},
		{"add\x00success", []string{"aaaa"}},
		{"add\x00pending", []string{"cccc"}},
		{"add\x00failure", nil},
		{"0000\x00proj.add\x00success", []string{"aaaa"}},
	}
	tasks := searchTasks()
	for _, tc := range tests {
		e, err := parseSearch(tc.query)
		if err != nil {
			t.Errorf("parseSearch(%q): %v", tc.query, err)
			continue
		}
		var got []string
		var m matcher
		for i := range tasks {
			m.reset(&tasks[i])
			if e == nil || e.match(&m) {
				got = append(got, tasks[i].UUID[:4])
			}
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("search %q (-want +got):\n%s", tc.query, diff)
		}
	}
}

func TestKwargsPairs(t *testing.T) {
	tests := []struct {
		kwargs string
		want   []string
	}{
		{"{'user': 'Bob', 'n': 5}", []string{"user=bob", "n=5"}},
		{"{'a': None, 'b': True, 'c': 1.50, 'd': [1, 'x'], 'e': (1,), 'f': {'g': 'H'}, 'g': ()}",
			[]string{"a=", "b=true", "c=1.5", "d=[1, 'x']", "e=(1,)", "f={'g': 'h'}", "g=()"}},
		{"{1: 'x', 2.0: b'y\\n', None: 'z'}", []string{"1=x", "2.0=b'y\\n'", "=z"}},
		{"{'a': 1, 'a': 2}", []string{"a=2"}},
		{"{1: 'a', True: 'b', 1.0: 'c'}", []string{"1=c"}},
		{`{'k': 'it\'s', "q": "say \"hi\""}`, []string{"k=it's", `q=say "hi"`}},
		{"{'name': 'Zoë', 'e': '\\xe9', 'u': '\\u00c9', 'U': '\\U0001F600'}", []string{"name=zoë", "e=é", "u=é", "u=😀"}},
		{"{'k': -3, 'h': 0x10, 'o': 0o17, 'b': 0b11, 'big': 123456789012345678901234567890, 'u': 1_000}",
			[]string{"k=-3", "h=16", "o=15", "b=3", "big=123456789012345678901234567890", "u=1000"}},
		{"{'s': {1, 2}, 'l': [[]], 'n': [None, 'é\\n', '\\x00']}", []string{"s={1, 2}", "l=[[]]", `n=[none, 'é\n', '\x00']`}},
		{"{'e': 1e400, 'f': -2.5e-7, 'g': 1e16, 'h': 3.}", []string{"e=inf", "f=-2.5e-07", "g=1e+16", "h=3.0"}},
		{"{'a': 'x' 'y', 'r': r'a\\b', 'b': B'\\xff'}", []string{"a=xy", `r=a\b`, `b=b'\xff'`}},
		{"{'quote': \"it's\", 'both': 'a\"b\\'c'}", []string{"quote=it's", `both=a"b'c`}},
		{"  {'k': 'v',}  ", []string{"k=v"}},
		{"{'t': ('a', 'b'), 'p': (1)}", []string{"t=('a', 'b')", "p=1"}},
		{"{}", nil},
		{"", nil},
		{"not a dict", nil},
		{"['a']", nil},
		{"{'a': 1", nil},
		{"{'a': 1}x", nil},
		{"{'k': 'v...", nil},
		{"{'k': float}", nil},
		{"{'k': 1j}", nil},
		{"{'k': 012}", nil},
		{"{[1]: 2}", nil},
		{"{'k': f'x'}", nil},
		{"{'k': '\\N{BULLET}'}", nil},
		{strings.Repeat("[", 500), nil},
		{"{'k': " + strings.Repeat("[", 500) + strings.Repeat("]", 500) + "}", nil},
	}
	for _, tc := range tests {
		got := kwargsPairs(nil, tc.kwargs)
		want := slices.Clone(tc.want)
		for i := range want {
			want[i] = pyfmt.Fold(want[i])
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("kwargsPairs(%.60q) (-want +got):\n%s", tc.kwargs, diff)
		}
	}
}

func FuzzKwargsPairs(f *testing.F) {
	for _, s := range []string{"{'a': 1}", "{'k': [1, (2,), {3}], 'b': b'\\x00'}", `{"q": r'\'', 1.5: None}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = kwargsPairs(nil, s)
	})
}

func FuzzParseSearch(f *testing.F) {
	for _, s := range []string{"ab", "(foo OR bar) baz", `kwargs:"a = b"`, `"x\"y"`, "((((((a))))))"} {
		f.Add(s)
	}
	tasks := searchTasks()
	f.Fuzz(func(t *testing.T, q string) {
		e, err := parseSearch(q)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || !strings.HasSuffix(se.Error(), ".") {
				t.Fatalf("error %v", err)
			}
			return
		}
		var m matcher
		for i := range tasks {
			m.reset(&tasks[i])
			if e != nil {
				e.match(&m)
			}
		}
	})
}
