package state

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
)

// fold is Python's str.casefold, which Flower applies to both sides of
// every filter and search comparison. ASCII text, nearly all of it, takes
// a fast path that does not allocate when there is nothing to lower.
func fold(s string) string {
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

// foldEqual reports whether fold(s) == folded, without allocating for ASCII.
func foldEqual(s, folded string) bool {
	if len(s) != len(folded) {
		// Folding can change the length only outside ASCII.
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return fold(s) == folded
			}
		}
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return fold(s) == folded
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

// containsFold reports whether fold(s) contains folded, without
// allocating when s is ASCII.
func containsFold(s, folded string) bool {
	// Folding never turns a match into a non-match (folded text folds to
	// itself), and ASCII folding keeps lengths.
	if strings.Contains(s, folded) {
		return true
	}
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return strings.Contains(fold(s), folded)
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

// isSpace is Python's str.isspace for one character: Go's white space
// plus the four ASCII information separators.
func isSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip is Python's str.strip() without arguments.
func pyStrip(s string) string {
	return strings.TrimFunc(s, isSpace)
}
