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
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return strings.Contains(Fold(s), folded)
		}
		upper = upper || ('A' <= c && c <= 'Z')
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
