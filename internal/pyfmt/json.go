package pyfmt

import (
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Flower answers with Tornado's json_encode: Python's json.dumps (", " and
// ": " separators, ASCII-only output, float repr) followed by replacing
// "</" with "<\/". AppendJSONString and AppendJSONFloat write the same
// bytes for a str and a float.

// AppendJSONString appends s as json.dumps writes a str: \uXXXX (lower-case
// hex, surrogate pairs above the BMP) for everything outside printable
// ASCII, including DEL; invalid UTF-8 becomes U+FFFD.
func AppendJSONString(b []byte, s string) []byte {
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
		if c < utf8.RuneSelf {
			if int(c) < len(jsonShortEscapes) && jsonShortEscapes[c] != 0 {
				b = append(b, '\\', jsonShortEscapes[c])
			} else {
				b = appendHexEscape(b, 'u', uint32(c), 4)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			b = appendHexEscape(appendHexEscape(b, 'u', uint32(hi), 4), 'u', uint32(lo), 4)
		} else {
			b = appendHexEscape(b, 'u', uint32(r), 4)
		}
		i += size
	}
	return append(b, '"')
}

// jsonShortEscapes are the two-character escapes json.dumps writes, by the
// character they stand for (0: none, \uXXXX instead).
var jsonShortEscapes = [...]byte{'"': '"', '\\': '\\', '\n': 'n', '\r': 'r', '\t': 't', '\b': 'b', '\f': 'f'}

// AppendJSONFloat appends f as json.dumps writes a float: Python's float
// repr, with the non-finite values as NaN, Infinity and -Infinity.
func AppendJSONFloat(b []byte, f float64) []byte {
	return appendFloatSpelt(b, f, &jsonNonFinite)
}

// How Python's repr and json.dumps spell the non-finite floats: NaN,
// +infinity, -infinity.
var (
	reprNonFinite = [3]string{"nan", "inf", "-inf"}
	jsonNonFinite = [3]string{"NaN", "Infinity", "-Infinity"}
)

// appendFloatSpelt appends f as Python's float repr, its non-finite values
// spelt as nonFinite says.
func appendFloatSpelt(b []byte, f float64, nonFinite *[3]string) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, nonFinite[0]...)
	case math.IsInf(f, 1):
		return append(b, nonFinite[1]...)
	case math.IsInf(f, -1):
		return append(b, nonFinite[2]...)
	}
	return appendFloat(b, f)
}

// appendFloat appends the finite f as Python's float repr: the shortest
// digits that round-trip, positional for decimal exponents -4..15 (always
// with a fraction, "2.0"), scientific otherwise ("1e+16", "1.5e-05").
func appendFloat(b []byte, f float64) []byte {
	if out, ok := appendEpochFloat(b, f); ok {
		return out
	}
	var scratch [32]byte
	sci := strconv.AppendFloat(scratch[:0], f, 'e', -1, 64)
	// AppendFloat's 'e' form is [-]d[.ddd]e±dd or e±ddd.
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
	// Positional: the same shortest digits, the point moved. (Formatting
	// again with 'f' would run the shortest-digits search twice, and this
	// function was half the CPU of rendering a task list.)
	mant := sci[:i-1] // i is at the exponent's sign, after the 'e'
	if mant[0] == '-' {
		b = append(b, '-')
		mant = mant[1:]
	}
	var buf [24]byte
	digits := append(buf[:0], mant[0])
	if len(mant) > 2 {
		digits = append(digits, mant[2:]...)
	}
	switch point := exp + 1; {
	case point <= 0:
		b = append(b, '0', '.')
		for range -point {
			b = append(b, '0')
		}
		return append(b, digits...)
	case point >= len(digits):
		b = append(b, digits...)
		for range point - len(digits) {
			b = append(b, '0')
		}
		return append(b, '.', '0')
	default:
		b = append(b, digits[:point]...)
		b = append(b, '.')
		return append(b, digits[point:]...)
	}
}

// epochMin and epochMax bound the floats appendEpochFloat formats: Unix
// times from 2004 to 2242, which every Celery timestamp (time.time()) of a
// task list is. In that range a float64 is M/2^k with k from 20 to 22, so
// its rounding interval is narrower than 10^-6 and its shortest repr has at
// most 7 fraction digits.
const (
	epochMin = 1 << 30
	epochMax = 1 << 33
)

var pow10 = [...]uint64{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000}

// appendEpochFloat appends f's shortest repr, as appendFloat does, for f
// in [epochMin, epochMax), by exact integer arithmetic instead of a general
// shortest-digits search: of the d-digit decimals nearest f (d = 0 ... 7
// fraction digits), the one with the fewest digits that lies strictly inside
// f's rounding interval is the shortest, and the nearest of its length,
// which is what Python's repr and strconv print. It reports false, and
// appends nothing, where a tie or an interval's edge would need rounding
// rules (strconv decides those), and outside the range.
func appendEpochFloat(b []byte, f float64) ([]byte, bool) {
	if !(f >= epochMin && f < epochMax) {
		return b, false
	}
	fb := math.Float64bits(f)
	m := fb&(1<<52-1) | 1<<52 // f = m / 2^k
	k := uint(1075 - fb>>52&0x7ff)
	if m == 1<<52 {
		// A power of two: the interval below it is half as wide.
		return b, false
	}
	// Being within half a spacing of f only gets easier with more digits
	// (a d-digit decimal is also a (d+1)-digit one), so the fewest digits
	// are found by bisection. With 7 the nearest is always inside: its
	// distance, under 10^-7/2, is under 2^-(k+1).
	lo, hi := 0, len(pow10)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if _, twice, _ := nearestDecimal(m, k, mid); twice <= pow10[mid] {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	d := lo
	n, twice, tie := nearestDecimal(m, k, d)
	if tie || twice == pow10[d] {
		return b, false
	}
	b = strconv.AppendUint(b, n, 10)
	if d == 0 {
		return append(b, '.', '0'), true
	}
	// n = f·10^d has at least 10 + d digits: the point goes before its
	// last d.
	b = append(b, 0)
	point := len(b) - 1 - d
	copy(b[point+1:], b[point:len(b)-1])
	b[point] = '.'
	return b, true
}

// nearestDecimal is n, the nearest d-digit decimal n/10^d to f = m/2^k,
// and twice its distance from f in units of 10^-d·2^-k: n/10^d lies within
// half f's spacing, 2^-(k+1), when twice < 10^d, on its edge when equal.
// tie reports f halfway between two such decimals.
func nearestDecimal(m uint64, k uint, d int) (n, twice uint64, tie bool) {
	// m·10^d = q·2^k + rem: fits in 77 bits, so q in 57.
	hi, lo := bits.Mul64(m, pow10[d])
	q := hi<<(64-k) | lo>>k
	rem := lo & (1<<k - 1)
	half := uint64(1) << (k - 1)
	if rem > half {
		return q + 1, 2 * (1<<k - rem), false
	}
	return q, 2 * rem, rem == half
}
