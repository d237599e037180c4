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
	ascii, upper := asciiUpper(s)
	if !ascii {
		return cases.Fold().String(s)
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
	// itself), and ASCII folding keeps lengths. A needle that is not
	// UTF-8 can match bytes inside one of s's characters, which folding
	// may change: that rare case takes the definition.
	if strings.Contains(s, folded) {
		return utf8.ValidString(folded) || strings.Contains(Fold(s), folded)
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
// task it looks at, most of them a few bytes long, so it reads eight bytes
// at a time and the rest as one overlapping word, without a loop over
// bytes: on a search of 100,000 tasks matching nothing, the byte-at-a-time
// loop it replaces was a third of the time spent matching
// (BenchmarkTasksSearch).
func asciiUpper(s string) (ascii, upper bool) {
	var seen, up uint64
	add := func(w uint64) {
		const ones = 0x0101010101010101
		seen |= w
		// For a byte c under 0x80, c+0x3F sets its high bit when c >= 'A'
		// and c+0x25 when c > 'Z', without a carry into the next byte; a
		// zero byte sets neither. A byte of 0x80 or more may carry, but
		// then s is not ASCII, and upper does not matter.
		up |= (w + 0x3F*ones) &^ (w + 0x25*ones)
	}
	n := len(s)
	switch {
	case n >= 8:
		for i := 0; i+8 <= n; i += 8 {
			add(word8(s[i:]))
		}
		if n%8 != 0 {
			// Bytes read twice change neither answer.
			add(word8(s[n-8:]))
		}
	case n >= 4:
		add(word4(s) | word4(s[n-4:])<<32)
	default:
		var w uint64
		for i := range n {
			w |= uint64(s[i]) << (8 * i)
		}
		add(w)
	}
	const highs = 0x8080808080808080
	return seen&highs == 0, up&highs != 0
}

// word8 and word4 are the first eight and four bytes of s, little-endian.
func word8(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func word4(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}
