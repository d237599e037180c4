// Package tasksearch is the search language of GET /api/tasks?search=,
// as Flower 2.1.0 documents its task filter: parsing a query, matching a
// task record against it, and finding among a table's records the few
// that a term can match without looking at each.
package tasksearch

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/stamen-dev/stamen/internal/pyfmt"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// The search language of GET /api/tasks?search=, as Flower 2.1.0 documents
// its task filter: terms separated by white space are ANDed; AND
// and OR (upper case only) and parentheses combine them; double quotes
// group a phrase, with \" and \\ escapes. A term may be qualified with
// name:, state:, worker:, args:, kwargs: or result: (any case). state: is
// an exact match, kwargs:key=value matches one pair of the kwargs dict,
// everything else is a case-insensitive substring match; unqualified terms
// search uuid, name, state, worker, args, kwargs and result together.
const (
	maxQueryLength = 2048 // characters, after trimming
	maxQueryTokens = 128
	maxQueryDepth  = 5
	minSubstring   = 3
)

// Error is an invalid search query. Its message is Flower's, word
// for word, for the 400 answer {"error": "<message>"}.
type Error struct {
	Message string
	// Position is the 0-based character (not byte) offset in the trimmed
	// query, or -1 when the message has none.
	Position int
}

func (e *Error) Error() string {
	if e.Position < 0 {
		return e.Message + "."
	}
	return fmt.Sprintf("%s at position %d.", e.Message, e.Position)
}

func searchErr(pos int, format string, args ...any) *Error {
	return &Error{Message: fmt.Sprintf(format, args...), Position: pos}
}

type tokenKind uint8

const (
	tokTerm tokenKind = iota
	tokAnd
	tokOr
	tokLParen
	tokRParen
	tokEOF
)

type token struct {
	kind  tokenKind
	value string
	pos   int
}

// expr is a parsed query; a nil expr matches everything.
type expr interface {
	match(m *matcher) bool
}

type andExpr []expr
type orExpr []expr

func (a andExpr) match(m *matcher) bool {
	for _, e := range a {
		if !e.match(m) {
			return false
		}
	}
	return true
}

func (o orExpr) match(m *matcher) bool {
	for _, e := range o {
		if e.match(m) {
			return true
		}
	}
	return false
}

// term is one search term, its value already case-folded.
type term struct {
	field string // "" for all fields
	value string
	pair  string // for kwargs:key=value, "key=value" with both sides trimmed
}

// parseSearch compiles a search query; the empty query gives a nil expr,
// which matches everything.
// Errors are *Error.
func parseSearch(query string) (expr, error) {
	q := []rune(pyfmt.Strip(query))
	if len(q) > maxQueryLength {
		return nil, searchErr(-1, "Query exceeds %d characters", maxQueryLength)
	}
	tokens, err := tokenize(q)
	if err != nil {
		return nil, err
	}
	p := parser{tokens: tokens}
	if p.cur().kind == tokEOF {
		return nil, nil
	}
	e, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if t := p.cur(); t.kind != tokEOF {
		return nil, searchErr(t.pos, "Unexpected %s", pyfmt.QuoteStr(t.value))
	}
	return e, nil
}

func tokenize(q []rune) ([]token, error) {
	var tokens []token
	add := func(t token) error {
		tokens = append(tokens, t)
		if len(tokens) > maxQueryTokens {
			return searchErr(-1, "Query exceeds %d tokens", maxQueryTokens)
		}
		return nil
	}
	for i := 0; i < len(q); {
		if pyfmt.IsSpace(q[i]) {
			i++
			continue
		}
		pos := i
		switch q[i] {
		case '(', ')':
			kind := tokLParen
			if q[i] == ')' {
				kind = tokRParen
			}
			if err := add(token{kind: kind, value: string(q[i]), pos: pos}); err != nil {
				return nil, err
			}
			i++
			continue
		}
		var value []rune
		quoted, inQuote := false, false
		for i < len(q) {
			c := q[i]
			if c == '\\' && i+1 < len(q) && (q[i+1] == '"' || q[i+1] == '\\') {
				value = append(value, q[i+1])
				i += 2
				continue
			}
			if c == '"' {
				quoted, inQuote = true, !inQuote
				i++
				continue
			}
			if !inQuote && (pyfmt.IsSpace(c) || c == '(' || c == ')') {
				break
			}
			value = append(value, c)
			i++
		}
		if inQuote {
			return nil, searchErr(pos, "Unterminated quoted phrase")
		}
		if len(value) == 0 {
			return nil, searchErr(pos, "Empty search term")
		}
		t := token{kind: tokTerm, value: string(value), pos: pos}
		if !quoted {
			switch t.value {
			case "AND":
				t.kind = tokAnd
			case "OR":
				t.kind = tokOr
			case "NOT":
				return nil, searchErr(pos, "NOT is not supported")
			}
		}
		if err := add(t); err != nil {
			return nil, err
		}
	}
	return append(tokens, token{kind: tokEOF, pos: len(q)}), nil
}

type parser struct {
	tokens []token
	i      int
}

func (p *parser) cur() token { return p.tokens[p.i] }

func (p *parser) advance() token {
	t := p.tokens[p.i]
	if p.i < len(p.tokens)-1 {
		p.i++
	}
	return t
}

// operand reports whether the current token can start an operand of a
// binary operator.
func (p *parser) operand() bool {
	k := p.cur().kind
	return k == tokTerm || k == tokLParen
}

func (p *parser) or(depth int) (expr, error) {
	first, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	list := orExpr{first}
	for p.cur().kind == tokOr {
		op := p.advance()
		if !p.operand() {
			return nil, searchErr(op.pos, "OR must be followed by a search term")
		}
		e, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		list = append(list, e)
	}
	if len(list) == 1 {
		return first, nil
	}
	return list, nil
}

func (p *parser) and(depth int) (expr, error) {
	first, err := p.primary(depth)
	if err != nil {
		return nil, err
	}
	list := andExpr{first}
	for k := p.cur().kind; k != tokEOF && k != tokRParen && k != tokOr; k = p.cur().kind {
		if k == tokAnd {
			op := p.advance()
			if !p.operand() {
				return nil, searchErr(op.pos, "AND must be followed by a search term")
			}
		}
		e, err := p.primary(depth)
		if err != nil {
			return nil, err
		}
		list = append(list, e)
	}
	if len(list) == 1 {
		return first, nil
	}
	return list, nil
}

func (p *parser) primary(depth int) (expr, error) {
	t := p.cur()
	switch t.kind {
	case tokLParen:
		if depth >= maxQueryDepth {
			return nil, searchErr(t.pos, "Query nesting exceeds %d levels", maxQueryDepth)
		}
		p.advance()
		if p.cur().kind == tokRParen {
			return nil, searchErr(t.pos, "Empty group")
		}
		e, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.cur().kind != tokRParen {
			return nil, searchErr(t.pos, "Missing closing parenthesis")
		}
		p.advance()
		return e, nil
	case tokTerm:
		p.advance()
		return parseTerm(t)
	}
	return nil, searchErr(t.pos, "Expected a search term")
}

func parseTerm(t token) (expr, error) {
	field, value := "", t.value
	if qualifier, rest, ok := strings.Cut(value, ":"); ok {
		switch q := pyfmt.Fold(qualifier); q {
		case "name", "state", "worker", "args", "kwargs", "result":
			field, value = q, rest
		}
	}
	if field == "" && strings.HasPrefix(value, "-") {
		return nil, searchErr(t.pos, "Negation with '-' is not supported")
	}
	if value == "" {
		return nil, searchErr(t.pos, "Search qualifier requires a value")
	}
	exact := field == "state" || (field == "kwargs" && strings.Contains(value, "="))
	if !exact && utf8.RuneCountInString(pyfmt.Strip(value)) < minSubstring {
		return nil, searchErr(t.pos, "Substring search terms must contain at least %d characters", minSubstring)
	}
	tm := term{field: field, value: pyfmt.Fold(value)}
	if field == "kwargs" {
		if k, v, ok := strings.Cut(tm.value, "="); ok {
			tm.pair = pyfmt.Strip(k) + "=" + pyfmt.Strip(v)
		}
	}
	return tm, nil
}

// matcher evaluates terms against one task. Matching folds case on the
// fly for ASCII text, so scanning a hundred thousand tasks does not
// allocate; only kwargs pairs are parsed, once per task and query.
type matcher struct {
	t      *taskrec.Task
	pairs  []string
	parsed bool
}

func (m *matcher) reset(t *taskrec.Task) {
	m.t, m.pairs, m.parsed = t, m.pairs[:0], false
}

// field returns one of the fields unqualified terms search, in Flower's
// order (uuid, name, state, worker, args, kwargs, result); null is "".
func (m *matcher) field(i int) string {
	t := m.t
	switch i {
	case 0:
		return t.UUID
	case 1:
		return nullable(t, taskrec.FieldName, t.Name)
	case 2:
		return t.State
	case 3:
		return nullable(t, taskrec.FieldWorker, t.Worker)
	case 4:
		return nullable(t, taskrec.FieldArgs, t.Args)
	case 5:
		return nullable(t, taskrec.FieldKwargs, t.Kwargs)
	default:
		return nullable(t, taskrec.FieldResult, t.Result)
	}
}

const searchFields = 7

func nullable(t *taskrec.Task, f taskrec.Field, v string) string {
	if t.Has(f) {
		return v
	}
	return ""
}

func (tm term) match(m *matcher) bool {
	t := m.t
	switch tm.field {
	case "":
		if strings.Contains(tm.value, "\x00") {
			// Flower joins the fields with NUL; only such a term can span two.
			all := make([]string, searchFields)
			for i := range all {
				all[i] = pyfmt.Fold(m.field(i))
			}
			return strings.Contains(strings.Join(all, "\x00"), tm.value)
		}
		for i := range searchFields {
			if pyfmt.ContainsFold(m.field(i), tm.value) {
				return true
			}
		}
		return false
	case "state":
		return t.State != "" && pyfmt.FoldEqual(t.State, tm.value)
	case "name":
		return pyfmt.ContainsFold(nullable(t, taskrec.FieldName, t.Name), tm.value)
	case "worker":
		return pyfmt.ContainsFold(nullable(t, taskrec.FieldWorker, t.Worker), tm.value)
	case "args":
		return pyfmt.ContainsFold(nullable(t, taskrec.FieldArgs, t.Args), tm.value)
	case "result":
		return pyfmt.ContainsFold(nullable(t, taskrec.FieldResult, t.Result), tm.value)
	case "kwargs":
		kwargs := nullable(t, taskrec.FieldKwargs, t.Kwargs)
		if tm.pair == "" {
			return pyfmt.ContainsFold(kwargs, tm.value)
		}
		if !tm.possiblePair(kwargs) {
			return false
		}
		if !m.parsed {
			m.pairs = kwargsPairs(m.pairs, kwargs)
			m.parsed = true
		}
		for _, p := range m.pairs {
			if p == tm.pair {
				return true
			}
		}
	}
	return false
}

// possiblePair is a cheap test before parsing a kwargs repr: see pairWords.
func (tm term) possiblePair(kwargs string) bool {
	for _, w := range pairWords(tm.pair) {
		if w != "" && !pyfmt.ContainsFold(kwargs, w) {
			return false
		}
	}
	return true
}

// pairWords are the parts of a kwargs:key=value pair ("" for the others)
// that a kwargs repr holding the pair contains verbatim, up to case: a key
// or value made only of letters, digits and underscores is written as it
// is in the repr Celery sends.
func pairWords(pair string) [2]string {
	k, v, _ := strings.Cut(pair, "=")
	words := [2]string{k, v}
	for i, w := range words {
		if !isWord(w) {
			words[i] = ""
		}
	}
	return words
}

func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}
