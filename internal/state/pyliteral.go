package state

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// kwargs:key=value search terms match against the pairs of the task's
// kwargs, which the worker reports as a Python repr ("{'user': 42}").
// Flower reads it with ast.literal_eval and turns each item into
// "casefold(str(key))=casefold(str(value))", with None as the empty
// string. This file is the small Python literal reader and str()/repr()
// writer that takes.

type pyKind uint8

const (
	pyNone pyKind = iota
	pyBool
	pyInt
	pyFloat
	pyStr
	pyBytes
	pyList
	pyTuple
	pySet
	pyDict
)

// pyValue is a Python literal. Dict items alternate key, value.
type pyValue struct {
	kind  pyKind
	text  string // str and bytes contents, int digits (with sign)
	num   float64
	items []pyValue
}

// maxLiteralDepth keeps hostile kwargs reprs from exhausting the stack.
const maxLiteralDepth = 100

// errLiteral says the text is not a literal ast.literal_eval would take.
type errLiteral struct{}

func (errLiteral) Error() string { return "not a Python literal" }

// kwargsPairs appends the "key=value" pairs of a kwargs repr to dst; a
// repr that is not a dict literal (say, truncated by the worker) has none.
func kwargsPairs(dst []string, kwargs string) []string {
	p := pyParser{s: strings.TrimLeft(kwargs, " \t")}
	v, err := p.expression(0)
	if err != nil || v.kind != pyDict {
		return dst
	}
	if p.skipSpace(); p.i != len(p.s) {
		return dst
	}
	for i := 0; i+1 < len(v.items); i += 2 {
		dst = append(dst, fold(pyNormalize(v.items[i]))+"="+fold(pyNormalize(v.items[i+1])))
	}
	return dst
}

// pyNormalize is Flower's view of one value: str(value), None as "".
func pyNormalize(v pyValue) string {
	if v.kind == pyNone {
		return ""
	}
	return pyStrOf(v)
}

type pyParser struct {
	s string
	i int
}

func (p *pyParser) skipSpace() {
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

func (p *pyParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

// expression reads one literal, as ast.literal_eval accepts it (without
// complex numbers, which no kwargs repr is worth supporting for).
func (p *pyParser) expression(depth int) (pyValue, error) {
	if depth > maxLiteralDepth {
		return pyValue{}, errLiteral{}
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
		items, err := p.sequence(']', depth)
		return pyValue{kind: pyList, items: items}, err
	case c == '(':
		return p.tuple(depth)
	case c == '{':
		return p.braces(depth)
	case c == '\'' || c == '"':
		return p.stringLiterals()
	}
	word := p.word()
	switch word {
	case "None":
		return pyValue{kind: pyNone}, nil
	case "True":
		return pyValue{kind: pyBool, num: 1}, nil
	case "False":
		return pyValue{kind: pyBool}, nil
	}
	if isStringPrefix(word) && (p.peek() == '\'' || p.peek() == '"') {
		p.i -= len(word)
		return p.stringLiterals()
	}
	return pyValue{}, errLiteral{}
}

func (p *pyParser) word() string {
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

func negate(v pyValue) pyValue {
	switch v.kind {
	case pyInt:
		if v.text == "0" {
			return v
		}
		v.text = "-" + v.text
	case pyFloat:
		v.num = -v.num
	}
	return v
}

// number reads an int or float literal.
func (p *pyParser) number() (pyValue, error) {
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
		return pyValue{}, errLiteral{}
	}
	if isRadix(lit) {
		n, ok := new(big.Int).SetString(strings.ReplaceAll(lit[2:], "_", ""), radix(lit[1]))
		if !ok || strings.HasPrefix(lit[2:], "-") || strings.HasPrefix(lit[2:], "+") {
			return pyValue{}, errLiteral{}
		}
		return pyValue{kind: pyInt, text: n.String()}, nil
	}
	digits := strings.ReplaceAll(lit, "_", "")
	if strings.ContainsAny(digits, ".eE") {
		for _, c := range digits {
			if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
				return pyValue{}, errLiteral{}
			}
		}
		f, err := strconv.ParseFloat(digits, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return pyValue{}, errLiteral{}
		}
		return pyValue{kind: pyFloat, num: f}, nil
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return pyValue{}, errLiteral{}
		}
	}
	if trimmed := strings.TrimLeft(digits, "0"); trimmed != "" {
		if trimmed != digits {
			return pyValue{}, errLiteral{} // 012 is a syntax error in Python 3
		}
		return pyValue{kind: pyInt, text: digits}, nil
	}
	return pyValue{kind: pyInt, text: "0"}, nil
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

// sequence reads items up to the closing bracket, allowing a trailing comma.
func (p *pyParser) sequence(closer byte, depth int) ([]pyValue, error) {
	p.i++ // opening bracket
	var items []pyValue
	for {
		p.skipSpace()
		if p.peek() == closer {
			p.i++
			return items, nil
		}
		v, err := p.expression(depth + 1)
		if err != nil {
			return nil, err
		}
		items = append(items, v)
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.i++
		case closer:
		default:
			return nil, errLiteral{}
		}
	}
}

// tuple reads "()", "(x,)", "(x, y)" or a parenthesised "(x)".
func (p *pyParser) tuple(depth int) (pyValue, error) {
	p.i++ // '('
	p.skipSpace()
	if p.peek() == ')' {
		p.i++
		return pyValue{kind: pyTuple}, nil
	}
	first, err := p.expression(depth + 1)
	if err != nil {
		return first, err
	}
	p.skipSpace()
	if p.peek() == ')' {
		p.i++
		return first, nil
	}
	items, err := p.rest(first, ')', depth)
	return pyValue{kind: pyTuple, items: items}, err
}

// rest reads the items after the first of a tuple or set: (", " item)*,
// an optional trailing comma, then the closer.
func (p *pyParser) rest(first pyValue, closer byte, depth int) ([]pyValue, error) {
	items := []pyValue{first}
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
		return nil, errLiteral{}
	}
	p.i++
	return items, nil
}

// braces reads a dict or a set.
func (p *pyParser) braces(depth int) (pyValue, error) {
	p.i++ // '{'
	p.skipSpace()
	if p.peek() == '}' {
		p.i++
		return pyValue{kind: pyDict}, nil
	}
	first, err := p.expression(depth + 1)
	if err != nil {
		return first, err
	}
	p.skipSpace()
	if p.peek() != ':' {
		items, err := p.rest(first, '}', depth)
		return pyValue{kind: pySet, items: items}, err
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
			return pyValue{}, err
		}
		p.skipSpace()
		switch p.peek() {
		case '}':
			p.i++
			return pyValue{kind: pyDict, items: d.items}, nil
		case ',':
			p.i++
			p.skipSpace()
			if p.peek() == '}' {
				p.i++
				return pyValue{kind: pyDict, items: d.items}, nil
			}
		default:
			return pyValue{}, errLiteral{}
		}
		if key, err = p.expression(depth + 1); err != nil {
			return key, err
		}
		p.skipSpace()
		if p.peek() != ':' {
			return pyValue{}, errLiteral{}
		}
	}
}

// dict keeps Python's rule for repeated keys: the first key stays, in its
// place, with the last value.
type dict struct {
	items []pyValue
	index map[string]int
}

func (d *dict) set(k, v pyValue) error {
	id, ok := hashKey(k)
	if !ok {
		return errLiteral{} // unhashable
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
func hashKey(k pyValue) (string, bool) {
	switch k.kind {
	case pyList, pyDict, pySet:
		return "", false
	case pyBool:
		return "n" + strconv.Itoa(int(k.num)), true
	case pyFloat:
		if k.num == math.Trunc(k.num) && math.Abs(k.num) < 1<<53 {
			return "n" + strconv.FormatInt(int64(k.num), 10), true
		}
	case pyInt:
		return "n" + k.text, true
	case pyTuple:
		for _, it := range k.items {
			if _, ok := hashKey(it); !ok {
				return "", false
			}
		}
	}
	return strconv.Itoa(int(k.kind)) + pyReprOf(k), true
}

// stringLiterals reads one or more adjacent string literals of the same type.
func (p *pyParser) stringLiterals() (pyValue, error) {
	var out pyValue
	first := true
	for {
		p.skipSpace()
		start := p.i
		prefix := strings.ToLower(p.word())
		if (prefix != "" && !isStringPrefix(prefix)) || (p.peek() != '\'' && p.peek() != '"') {
			p.i = start
			break
		}
		kind := pyStr
		if strings.Contains(prefix, "b") {
			kind = pyBytes
		}
		text, err := p.quoted(strings.Contains(prefix, "r"), kind == pyBytes)
		if err != nil {
			return pyValue{}, err
		}
		if !first && kind != out.kind {
			return pyValue{}, errLiteral{} // cannot mix str and bytes
		}
		out.kind = kind
		out.text += text
		first = false
	}
	if first {
		return pyValue{}, errLiteral{}
	}
	return out, nil
}

// quoted reads one quoted literal at p.i and returns its value; for bytes
// each rune of the result is one byte (< 256).
func (p *pyParser) quoted(raw, bytesLit bool) (string, error) {
	q := p.s[p.i : p.i+1]
	if strings.HasPrefix(p.s[p.i:], q+q+q) {
		q = q + q + q
	}
	p.i += len(q)
	var b strings.Builder
	for {
		if p.i >= len(p.s) {
			return "", errLiteral{}
		}
		if strings.HasPrefix(p.s[p.i:], q) {
			p.i += len(q)
			return b.String(), nil
		}
		r, size := utf8.DecodeRuneInString(p.s[p.i:])
		switch {
		case r == '\n' && len(q) == 1:
			return "", errLiteral{}
		case bytesLit && r >= 0x80:
			return "", errLiteral{}
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
func (p *pyParser) escape(b *strings.Builder, bytesLit bool) error {
	p.i++ // backslash
	if p.i >= len(p.s) {
		return errLiteral{}
	}
	c := p.s[p.i]
	p.i++
	if v := simpleEscape(c); v != 0 {
		b.WriteByte(v)
		return nil
	}
	hexRune := func(n int) error {
		if p.i+n > len(p.s) {
			return errLiteral{}
		}
		v, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
		if err != nil || v > unicode.MaxRune {
			return errLiteral{}
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
		return errLiteral{} // named escapes: no Unicode name table here
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

// pyStrOf is Python's str(v).
func pyStrOf(v pyValue) string {
	if v.kind == pyStr {
		return v.text
	}
	return pyReprOf(v)
}

// pyReprOf is Python's repr(v). Sets keep their written order, as Python's
// hash order cannot be reproduced.
func pyReprOf(v pyValue) string {
	var b strings.Builder
	writePyRepr(&b, v)
	return b.String()
}

func writePyRepr(b *strings.Builder, v pyValue) {
	switch v.kind {
	case pyNone:
		b.WriteString("None")
	case pyBool:
		if v.num != 0 {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case pyInt:
		b.WriteString(v.text)
	case pyFloat:
		switch {
		case math.IsNaN(v.num):
			b.WriteString("nan")
		case math.IsInf(v.num, 1):
			b.WriteString("inf")
		case math.IsInf(v.num, -1):
			b.WriteString("-inf")
		default:
			b.Write(appendPyFloat(nil, v.num))
		}
	case pyStr:
		writePyStrRepr(b, v.text)
	case pyBytes:
		b.WriteByte('b')
		writePyBytesRepr(b, v.text)
	case pyList:
		writeItems(b, "[", "]", v.items)
	case pyTuple:
		if len(v.items) == 1 {
			b.WriteByte('(')
			writePyRepr(b, v.items[0])
			b.WriteString(",)")
			return
		}
		writeItems(b, "(", ")", v.items)
	case pySet:
		writeItems(b, "{", "}", v.items)
	case pyDict:
		b.WriteByte('{')
		for i := 0; i+1 < len(v.items); i += 2 {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyRepr(b, v.items[i])
			b.WriteString(": ")
			writePyRepr(b, v.items[i+1])
		}
		b.WriteByte('}')
	}
}

func writeItems(b *strings.Builder, open, closer string, items []pyValue) {
	b.WriteString(open)
	for i, it := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		writePyRepr(b, it)
	}
	b.WriteString(closer)
}

// pyQuoteChar picks repr's quote: ' unless the text has ' and no ".
func pyQuoteChar(s string) byte {
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		return '"'
	}
	return '\''
}

// writePyStrRepr quotes s as Python 3's str.__repr__ does.
func writePyStrRepr(b *strings.Builder, s string) {
	q := pyQuoteChar(s)
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			writeHexEscape(b, 'x', uint32(r), 2)
		case r < 0x7f || unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			writeHexEscape(b, 'x', uint32(r), 2)
		case r <= 0xffff:
			writeHexEscape(b, 'u', uint32(r), 4)
		default:
			writeHexEscape(b, 'U', uint32(r), 8)
		}
	}
	b.WriteByte(q)
}

// writePyBytesRepr quotes bytes (one rune per byte) as bytes.__repr__.
func writePyBytesRepr(b *strings.Builder, s string) {
	q := pyQuoteChar(s)
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r >= 0x7f:
			writeHexEscape(b, 'x', uint32(r)&0xff, 2)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
}

func writeHexEscape(b *strings.Builder, kind byte, v uint32, width int) {
	b.WriteByte('\\')
	b.WriteByte(kind)
	for i := width - 1; i >= 0; i-- {
		b.WriteByte(hexDigits[v>>(4*uint(i))&0xf])
	}
}
