package state

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Flower answers with Tornado's json_encode: Python's json.dumps (", " and
// ": " separators, ASCII-only output, float repr) followed by replacing
// "</" with "<\/". These helpers write the same bytes.

const hexDigits = "0123456789abcdef"

// appendPyString appends s as json.dumps writes a str: \uXXXX (lower-case
// hex, surrogate pairs above the BMP) for everything outside printable
// ASCII, including DEL; invalid UTF-8 becomes U+FFFD.
func appendPyString(b []byte, s string) []byte {
	b = append(b, '"')
	var prev byte
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			if c == '/' && prev == '<' {
				b = append(b, '\\') // Tornado's "</" guard against </script>
			}
			b = append(b, c)
			prev = c
			i++
			continue
		}
		prev = 0
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			if c < utf8.RuneSelf {
				b = appendU(b, rune(c))
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r >= 0x10000 {
				hi, lo := utf16.EncodeRune(r)
				b = appendU(appendU(b, hi), lo)
			} else {
				b = appendU(b, r)
			}
			i += size
			continue
		}
		i++
	}
	return append(b, '"')
}

func appendU(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// appendPyFloat appends f as Python's float repr: the shortest digits that
// round-trip, positional for decimal exponents -4..15 (always with a
// fraction, "2.0"), scientific otherwise ("1e+16", "1.5e-05"). json.dumps
// writes the non-finite values as NaN and Infinity.
func appendPyFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	var scratch [32]byte
	sci := strconv.AppendFloat(scratch[:0], f, 'e', -1, 64)
	// AppendFloat's 'e' form always ends in e±dd or e±ddd.
	exp, i := 0, len(sci)-1
	for mul := 1; sci[i] >= '0' && sci[i] <= '9'; i-- {
		exp += int(sci[i]-'0') * mul
		mul *= 10
	}
	if sci[i] == '-' {
		exp = -exp
	}
	if exp < -4 || exp >= 16 {
		return append(b, sci...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'f', -1, 64)
	for _, c := range b[start:] {
		if c == '.' {
			return b
		}
	}
	return append(b, '.', '0')
}
