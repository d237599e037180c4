package pyfmt

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxLiteralDepth keeps a hostile repr from exhausting the stack.
const maxLiteralDepth = 100

// ErrNotLiteral says a text is not a literal ast.literal_eval would take.
var ErrNotLiteral = errors.New("not a Python literal")

// Parse reads s, one Python literal (leading spaces and tabs, and white
// space after it, allowed), as ast.literal_eval does, without complex
// numbers and named \N{...} escapes, which no task's repr is worth
// supporting for, and nested no deeper than maxLiteralDepth. A dict keeps
// Python's rule for a repeated key: the first key stays, in its place,
// with the last value.
func Parse(s string) (Value, error) {
	p := parser{s: strings.TrimLeft(s, " \t")}
	v, err := p.expression(0)
	if err != nil {
		return Value{}, err
	}
	if p.skipSpace(); p.i != len(p.s) {
		return Value{}, ErrNotLiteral
	}
	return v, nil
}

type parser struct {
	s string
	i int
}

func (p *parser) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r', '\f':
			p.i++
		case '\\':
			if strings.HasPrefix(p.s[p.i:], "\\\n") {
				p.i += 2
				continue
			}
			return
		default:
			return
		}
	}
}

func (p *parser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

// expression reads one literal at depth levels of nesting.
func (p *parser) expression(depth int) (Value, error) {
	if depth > maxLiteralDepth {
		return Value{}, ErrNotLiteral
	}
	p.skipSpace()
	c := p.peek()
	switch {
	case c == '-' || c == '+':
		p.i++
		p.skipSpace()
		v, err := p.number()
		if err != nil {
			return v, err
		}
		if c == '-' {
			v = negate(v)
		}
		return v, nil
	case c >= '0' && c <= '9', c == '.' && p.i+1 < len(p.s) && p.s[p.i+1] >= '0' && p.s[p.i+1] <= '9':
		return p.number()
	case c == '[':
		return p.bracketed(List, ']', depth)
	case c == '(':
		return p.bracketed(Tuple, ')', depth)
	case c == '{':
		return p.braces(depth)
	case c == '\'' || c == '"':
		return p.stringLiterals()
	}
	word := p.word()
	switch word {
	case "None":
		return Value{kind: None}, nil
	case "True":
		return Value{kind: Bool, num: 1}, nil
	case "False":
		return Value{kind: Bool}, nil
	}
	if isStringPrefix(word) && (p.peek() == '\'' || p.peek() == '"') {
		p.i -= len(word)
		return p.stringLiterals()
	}
	return Value{}, ErrNotLiteral
}

func (p *parser) word() string {
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			break
		}
		p.i++
	}
	return p.s[start:p.i]
}

func isStringPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "u", "b", "br", "rb":
		return true
	}
	return false
}

func negate(v Value) Value {
	switch v.kind {
	case Int:
		if v.text == "0" {
			return v
		}
		v.text = "-" + v.text
	case Float:
		v.num = -v.num
	}
	return v
}

// number reads an int or float literal.
func (p *parser) number() (Value, error) {
	start := p.i
scan:
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			p.i++
		case (c == '+' || c == '-') && p.i > start && (p.s[p.i-1] == 'e' || p.s[p.i-1] == 'E') && !isRadix(p.s[start:p.i]):
			p.i++
		default:
			break scan
		}
	}
	lit := p.s[start:p.i]
	if lit == "" || strings.Contains(lit, "__") || strings.HasSuffix(lit, "_") {
		return Value{}, ErrNotLiteral
	}
	if isRadix(lit) {
		n, ok := new(big.Int).SetString(strings.ReplaceAll(lit[2:], "_", ""), radix(lit[1]))
		if !ok || strings.HasPrefix(lit[2:], "-") || strings.HasPrefix(lit[2:], "+") {
			return Value{}, ErrNotLiteral
		}
		return Value{kind: Int, text: n.String()}, nil
	}
	digits := strings.ReplaceAll(lit, "_", "")
	if strings.ContainsAny(digits, ".eE") {
		for _, c := range digits {
			if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
				return Value{}, ErrNotLiteral
			}
		}
		f, err := strconv.ParseFloat(digits, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return Value{}, ErrNotLiteral
		}
		return Value{kind: Float, num: f}, nil
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return Value{}, ErrNotLiteral
		}
	}
	if trimmed := strings.TrimLeft(digits, "0"); trimmed != "" {
		if trimmed != digits {
			return Value{}, ErrNotLiteral // 012 is a syntax error in Python 3
		}
		return Value{kind: Int, text: digits}, nil
	}
	return Value{kind: Int, text: "0"}, nil
}

func isRadix(lit string) bool {
	return len(lit) > 2 && lit[0] == '0' && strings.ContainsRune("xXoObB", rune(lit[1]))
}

func radix(c byte) int {
	switch c {
	case 'x', 'X':
		return 16
	case 'o', 'O':
		return 8
	}
	return 2
}

// bracketed reads a list "[...]" or a tuple "(...)": items up to the
// closer, with an optional trailing comma; "(x)", without a comma, is x.
func (p *parser) bracketed(kind Kind, closer byte, depth int) (Value, error) {
	p.i++ // opening bracket
	p.skipSpace()
	if p.peek() == closer {
		p.i++
		return Value{kind: kind}, nil
	}
	first, err := p.expression(depth + 1)
	if err != nil {
		return first, err
	}
	p.skipSpace()
	if kind == Tuple && p.peek() == closer {
		p.i++
		return first, nil
	}
	items, err := p.rest(first, closer, depth)
	return Value{kind: kind, items: items}, err
}

// rest reads the items after the first of a list, tuple or set: (", " item)*,
// an optional trailing comma, then the closer.
func (p *parser) rest(first Value, closer byte, depth int) ([]Value, error) {
	items := []Value{first}
	for p.peek() == ',' {
		p.i++
		p.skipSpace()
		if p.peek() == closer {
			break
		}
		v, err := p.expression(depth + 1)
		if err != nil {
			return nil, err
		}
		items = append(items, v)
		p.skipSpace()
	}
	if p.peek() != closer {
		return nil, ErrNotLiteral
	}
	p.i++
	return items, nil
}

// braces reads a dict or a set.
func (p *parser) braces(depth int) (Value, error) {
	p.i++ // '{'
	p.skipSpace()
	if p.peek() == '}' {
		p.i++
		return Value{kind: Dict}, nil
	}
	first, err := p.expression(depth + 1)
	if err != nil {
		return first, err
	}
	p.skipSpace()
	if p.peek() != ':' {
		items, err := p.rest(first, '}', depth)
		return Value{kind: Set, items: items}, err
	}
	d := dict{}
	key := first
	for {
		p.i++ // ':'
		v, err := p.expression(depth + 1)
		if err != nil {
			return v, err
		}
		if err := d.set(key, v); err != nil {
			return Value{}, err
		}
		p.skipSpace()
		switch p.peek() {
		case '}':
			p.i++
			return Value{kind: Dict, items: d.items}, nil
		case ',':
			p.i++
			p.skipSpace()
			if p.peek() == '}' {
				p.i++
				return Value{kind: Dict, items: d.items}, nil
			}
		default:
			return Value{}, ErrNotLiteral
		}
		if key, err = p.expression(depth + 1); err != nil {
			return key, err
		}
		p.skipSpace()
		if p.peek() != ':' {
			return Value{}, ErrNotLiteral
		}
	}
}

// dict keeps Python's rule for repeated keys: the first key stays, in its
// place, with the last value.
type dict struct {
	items []Value
	index map[string]int
}

func (d *dict) set(k, v Value) error {
	id, ok := hashKey(k)
	if !ok {
		return ErrNotLiteral // unhashable
	}
	if i, seen := d.index[id]; seen {
		d.items[i+1] = v
		return nil
	}
	if d.index == nil {
		d.index = make(map[string]int)
	}
	d.index[id] = len(d.items)
	d.items = append(d.items, k, v)
	return nil
}

// hashKey identifies equal keys: numbers compare by value across bool,
// int and float (1 == 1.0 == True), everything else by repr.
func hashKey(k Value) (string, bool) {
	switch k.kind {
	case List, Dict, Set:
		return "", false
	case Bool:
		return "n" + strconv.Itoa(int(k.num)), true
	case Float:
		if k.num == math.Trunc(k.num) && math.Abs(k.num) < 1<<53 {
			return "n" + strconv.FormatInt(int64(k.num), 10), true
		}
	case Int:
		return "n" + k.text, true
	case Tuple:
		for _, it := range k.items {
			if _, ok := hashKey(it); !ok {
				return "", false
			}
		}
	}
	return strconv.Itoa(int(k.kind)) + k.Repr(), true
}

// stringLiterals reads one or more adjacent string literals of the same type.
func (p *parser) stringLiterals() (Value, error) {
	var out Value
	first := true
	for {
		p.skipSpace()
		start := p.i
		prefix := strings.ToLower(p.word())
		if (prefix != "" && !isStringPrefix(prefix)) || (p.peek() != '\'' && p.peek() != '"') {
			p.i = start
			break
		}
		kind := Str
		if strings.Contains(prefix, "b") {
			kind = Bytes
		}
		text, err := p.quoted(strings.Contains(prefix, "r"), kind == Bytes)
		if err != nil {
			return Value{}, err
		}
		if !first && kind != out.kind {
			return Value{}, ErrNotLiteral // cannot mix str and bytes
		}
		out.kind = kind
		out.text += text
		first = false
	}
	if first {
		return Value{}, ErrNotLiteral
	}
	return out, nil
}

// quoted reads one quoted literal at p.i and returns its value; for bytes
// each rune of the result is one byte (< 256).
func (p *parser) quoted(raw, bytesLit bool) (string, error) {
	q := p.s[p.i : p.i+1]
	if strings.HasPrefix(p.s[p.i:], q+q+q) {
		q = q + q + q
	}
	p.i += len(q)
	var b strings.Builder
	for {
		if p.i >= len(p.s) {
			return "", ErrNotLiteral
		}
		if strings.HasPrefix(p.s[p.i:], q) {
			p.i += len(q)
			return b.String(), nil
		}
		r, size := utf8.DecodeRuneInString(p.s[p.i:])
		switch {
		case r == '\n' && len(q) == 1:
			return "", ErrNotLiteral
		case bytesLit && r >= 0x80:
			return "", ErrNotLiteral
		case r == '\\' && raw:
			// A raw literal keeps the backslash but it still escapes
			// the quote or backslash that follows.
			b.WriteByte('\\')
			if p.i+1 < len(p.s) {
				r2, size2 := utf8.DecodeRuneInString(p.s[p.i+1:])
				b.WriteRune(r2)
				p.i += 1 + size2
				continue
			}
			p.i++
			continue
		case r == '\\':
			if err := p.escape(&b, bytesLit); err != nil {
				return "", err
			}
			continue
		}
		b.WriteRune(r)
		p.i += size
	}
}

// escape decodes the backslash escape at p.i into b.
func (p *parser) escape(b *strings.Builder, bytesLit bool) error {
	p.i++ // backslash
	if p.i >= len(p.s) {
		return ErrNotLiteral
	}
	c := p.s[p.i]
	p.i++
	if v := simpleEscape(c); v != 0 {
		b.WriteByte(v)
		return nil
	}
	hexRune := func(n int) error {
		if p.i+n > len(p.s) {
			return ErrNotLiteral
		}
		v, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
		if err != nil || v > unicode.MaxRune {
			return ErrNotLiteral
		}
		p.i += n
		b.WriteRune(rune(v))
		return nil
	}
	switch {
	case c == '\n':
		return nil
	case c >= '0' && c <= '7':
		v := int(c - '0')
		for n := 1; n < 3 && p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '7'; n++ {
			v = v*8 + int(p.s[p.i]-'0')
			p.i++
		}
		if bytesLit {
			v &= 0xff
		}
		b.WriteRune(rune(v))
		return nil
	case c == 'x':
		return hexRune(2)
	case c == 'u' && !bytesLit:
		return hexRune(4)
	case c == 'U' && !bytesLit:
		return hexRune(8)
	case c == 'N' && !bytesLit:
		return ErrNotLiteral // named escapes: no Unicode name table here
	}
	// Unknown escapes stay as written.
	b.WriteByte('\\')
	p.i--
	r, size := utf8.DecodeRuneInString(p.s[p.i:])
	b.WriteRune(r)
	p.i += size
	return nil
}

// simpleEscape decodes the one-character escapes, 0 for the others.
func simpleEscape(c byte) byte {
	switch c {
	case '\\', '\'', '"':
		return c
	case 'a':
		return '\a'
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'v':
		return '\v'
	}
	return 0
}
