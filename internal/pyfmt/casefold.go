package pyfmt

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
)

// Fold is Python's str.casefold, which Flower applies to both sides of
// every filter and search comparison. ASCII text, nearly all of it, takes
// a fast path that does not allocate when there is nothing to lower.
func Fold(s string) string {
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return cases.Fold().String(s)
		}
		upper = upper || ('A' <= c && c <= 'Z')
	}
	if !upper {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// FoldEqual reports whether Fold(s) == folded, without allocating for ASCII.
func FoldEqual(s, folded string) bool {
	if len(s) != len(folded) {
		// Folding can change the length only outside ASCII.
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return Fold(s) == folded
			}
		}
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return Fold(s) == folded
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != folded[i] {
			return false
		}
	}
	return true
}

// ContainsFold reports whether Fold(s) contains folded, without
// allocating when s is ASCII.
func ContainsFold(s, folded string) bool {
	// Folding never turns a match into a non-match (folded text folds to
	// itself), and ASCII folding keeps lengths.
	if strings.Contains(s, folded) {
		return true
	}
	ascii, upper := asciiUpper(s)
	if !ascii {
		return strings.Contains(Fold(s), folded)
	}
	n := len(folded)
	if !upper || n > len(s) {
		return false
	}
	for i := 0; i+n <= len(s); i++ {
		j := 0
		for j < n {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != folded[j] {
				break
			}
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

// IsSpace is Python's str.isspace for one character: Go's white space
// plus the four ASCII information separators.
func IsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// Strip is Python's str.strip() without arguments.
func Strip(s string) string {
	return strings.TrimFunc(s, IsSpace)
}

// asciiUpper reports whether s is all ASCII and whether it holds an
// upper-case ASCII letter. A search runs this over every field of every
// task it looks at, so it reads eight bytes at a time: on a search of
// 100,000 tasks matching nothing, the byte-at-a-time loop it replaces was
// a third of the time spent matching (BenchmarkTasksSearch).
func asciiUpper(s string) (ascii, upper bool) {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	var seen, up uint64
	i := 0
	for ; i+8 <= len(s); i += 8 {
		b := s[i : i+8]
		w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		seen |= w
		// For a byte c under 0x80, c+0x3F sets its high bit when c >= 'A'
		// and c+0x25 when c > 'Z', without a carry into the next byte. A
		// byte of 0x80 or more may carry, but then s is not ASCII, and
		// upper does not matter.
		up |= (w + 0x3F*ones) &^ (w + 0x25*ones)
	}
	upper = up&highs != 0
	for ; i < len(s); i++ {
		c := s[i]
		seen |= uint64(c)
		upper = upper || ('A' <= c && c <= 'Z')
	}
	return seen&highs == 0, upper
}
