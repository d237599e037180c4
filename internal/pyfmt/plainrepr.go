package pyfmt

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// PlainRepr rewrites, in the Python repr text a worker or client puts in an
// event (args, kwargs, result, exception), the reprs of the values kombu ≥5.3
// carries as typed JSON (datetime.datetime(...), datetime.date(...),
// datetime.time(...), UUID('...'), Decimal('...'), b'...') as the repr of
// the string kombu 5.2 turned them into: with a 5.2 worker a task receives
// and returns those strings, so its events say
// {'dt': '2024-01-02T03:04:05Z'} where a 5.6 worker says
// {'dt': datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)}.
// Rewritten, an event reads the same whatever the release and agrees with
// the task's result document. Text inside string literals is never touched;
// a repr it cannot read exactly (an unknown time zone, bytes that are not
// UTF-8) is left as it is.
func PlainRepr(s string) string {
	if !mayHoldTypedRepr(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c == '\'' || c == '"' {
			n := quotedLen(s[i:])
			if n < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		if identBefore(s, i) {
			b.WriteByte(c)
			i++
			continue
		}
		switch {
		case c == 'b' && i+1 < len(s) && (s[i+1] == '\'' || s[i+1] == '"'):
			n := quotedLen(s[i+1:])
			if n < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			if text, ok := bytesLiteralText(s[i+2 : i+n]); ok {
				b.WriteString(QuoteStr(text))
			} else {
				b.WriteString(s[i : i+1+n])
			}
			i += 1 + n
			continue
		}
		if text, n, ok := typedCall(s[i:]); ok {
			b.WriteString(QuoteStr(text))
			i += n
			continue
		} else if n > 0 {
			// A call it cannot read stays whole, inside too, so that
			// rewriting its arguments cannot make it readable next time.
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// mayHoldTypedRepr is PlainRepr's quick test, so that the common repr costs
// a few scans and no copy.
func mayHoldTypedRepr(s string) bool {
	return strings.Contains(s, "datetime.") || strings.Contains(s, "UUID(") ||
		strings.Contains(s, "Decimal(") || strings.Contains(s, "b'") || strings.Contains(s, `b"`)
}

// identBefore reports whether s[i] continues an identifier or attribute
// (xb'..', foo.UUID(...)), where no literal or call of interest starts.
func identBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	p := s[i-1]
	return p == '_' || p == '.' || p >= 'a' && p <= 'z' || p >= 'A' && p <= 'Z' || p >= '0' && p <= '9'
}

// quotedLen is the length of the Python string literal at the start of s
// (opening quote to closing quote), -1 when it does not end.
func quotedLen(s string) int {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case q:
			return i + 1
		}
	}
	return -1
}

// bytesLiteralText decodes the body of a bytes repr (between the quotes);
// ok only when the bytes are UTF-8 text.
func bytesLiteralText(body string) (string, bool) {
	var out []byte
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 >= len(body) {
			return "", false
		}
		i++
		switch body[i] {
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case '\\', '\'', '"':
			out = append(out, body[i])
		case 'x':
			if i+2 >= len(body) {
				return "", false
			}
			v, err := strconv.ParseUint(body[i+1:i+3], 16, 8)
			if err != nil {
				return "", false
			}
			out = append(out, byte(v))
			i += 2
		default:
			return "", false
		}
	}
	if !utf8.Valid(out) {
		return "", false
	}
	return string(out), true
}

// maxTypedRepr bounds the repr of one typed value (the longest,
// datetime.datetime with a named zoneinfo or timedelta offset, is about 120
// characters).
const maxTypedRepr = 256

// typedCall reads a datetime, date, time, UUID or Decimal repr at the start
// of s and returns the kombu 5.2 text of its value and the repr's length.
// When ok is false, n is the length of a complete call of one of those names
// that could not be read (0 when there is none).
func typedCall(s string) (string, int, bool) {
	for _, p := range []string{"datetime.datetime(", "datetime.date(", "datetime.time(", "UUID(", "Decimal("} {
		if !strings.HasPrefix(s, p) {
			continue
		}
		// The reprs are short; looking no further keeps a long text
		// full of unclosed calls linear.
		end := callEnd(s[:min(len(s), maxTypedRepr)], len(p))
		if end < 0 {
			return "", 0, false
		}
		args := splitArgs(s[len(p) : end-1])
		var text string
		var ok bool
		switch p {
		case "datetime.datetime(":
			text, ok = datetimeText(args)
		case "datetime.date(":
			text, ok = dateText(args)
		case "datetime.time(":
			text, ok = timeText(args)
		case "UUID(":
			if len(args) == 1 {
				if v, err := strconv.Unquote(pyToGoQuote(args[0])); err == nil {
					text, ok = CanonicalUUID(v)
				}
			}
		case "Decimal(":
			if len(args) == 1 {
				if v, err := strconv.Unquote(pyToGoQuote(args[0])); err == nil {
					text, ok = v, true
				}
			}
		}
		return text, end, ok
	}
	return "", 0, false
}

// pyToGoQuote turns a simple single-quoted Python literal into a Go one.
func pyToGoQuote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' && !strings.ContainsAny(s[1:len(s)-1], `"\`) {
		return `"` + s[1:len(s)-1] + `"`
	}
	return s
}

// callEnd is the index just past the ")" closing the call whose arguments
// start at s[open], -1 when it does not close.
func callEnd(s string, open int) int {
	depth := 1
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '\'', '"':
			n := quotedLen(s[i:])
			if n < 0 {
				return -1
			}
			i += n - 1
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// splitArgs splits call arguments at the top-level commas.
func splitArgs(s string) []string {
	var args []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'', '"':
			if n := quotedLen(s[i:]); n > 0 {
				i += n - 1
			}
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				args = append(args, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		args = append(args, rest)
	}
	return args
}

// callArgs separates positional integer arguments from keyword ones.
func callArgs(args []string) (pos []int, kw map[string]string, ok bool) {
	kw = map[string]string{}
	for _, a := range args {
		if k, v, isKw := strings.Cut(a, "="); isKw && !strings.ContainsAny(k, "('\"") {
			kw[strings.TrimSpace(k)] = strings.TrimSpace(v)
			continue
		}
		if len(kw) > 0 {
			return nil, nil, false
		}
		n, err := strconv.Atoi(a)
		if err != nil {
			return nil, nil, false
		}
		pos = append(pos, n)
	}
	for k := range kw {
		if k != "tzinfo" && k != "fold" {
			return nil, nil, false
		}
	}
	return pos, kw, true
}

func datetimeText(args []string) (string, bool) {
	pos, kw, ok := callArgs(args)
	if !ok || len(pos) < 3 || len(pos) > 7 {
		return "", false
	}
	for len(pos) < 7 {
		pos = append(pos, 0)
	}
	s := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d", pos[0], pos[1], pos[2], pos[3], pos[4], pos[5])
	if pos[6] != 0 {
		s += fmt.Sprintf(".%06d", pos[6])
	}
	tz, has := kw["tzinfo"]
	if !has {
		return s, true
	}
	at := time.Date(pos[0], time.Month(pos[1]), pos[2], pos[3], pos[4], pos[5], pos[6]*1000, time.UTC)
	off, ok := tzOffset(tz, at)
	if !ok {
		return "", false
	}
	if off == 0 {
		return s + "Z", true // kombu 5.2 wrote +00:00 as Z
	}
	return s + offsetText(off), true
}

func dateText(args []string) (string, bool) {
	pos, kw, ok := callArgs(args)
	if !ok || len(pos) != 3 || len(kw) != 0 {
		return "", false
	}
	return fmt.Sprintf("%04d-%02d-%02dT00:00:00", pos[0], pos[1], pos[2]), true
}

func timeText(args []string) (string, bool) {
	pos, kw, ok := callArgs(args)
	if !ok || len(pos) > 4 {
		return "", false
	}
	for len(pos) < 4 {
		pos = append(pos, 0)
	}
	s := fmt.Sprintf("%02d:%02d:%02d", pos[0], pos[1], pos[2])
	if pos[3] != 0 {
		s += fmt.Sprintf(".%06d", pos[3])
	}
	if tz, has := kw["tzinfo"]; has {
		off, ok := tzOffset(tz, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
		if !ok {
			return "", false
		}
		s += offsetText(off) // time.isoformat keeps +00:00
	}
	return s, true
}

// tzOffset reads the repr of a tzinfo: datetime.timezone.utc,
// datetime.timezone(datetime.timedelta(...)[, 'name']), zoneinfo.ZoneInfo(key='...')
// (its offset at the local time at), pytz's <UTC> and dateutil's tzutc().
func tzOffset(tz string, at time.Time) (time.Duration, bool) {
	switch tz {
	case "datetime.timezone.utc", "<UTC>", "tzutc()", "zoneinfo.ZoneInfo(key='UTC')":
		return 0, true
	}
	if rest, ok := strings.CutPrefix(tz, "datetime.timezone(datetime.timedelta("); ok {
		end := callEnd(rest, 0)
		if end < 0 {
			return 0, false
		}
		var d time.Duration
		if inner := rest[:end-1]; inner != "0" && inner != "" {
			for _, a := range splitArgs(inner) {
				k, v, _ := strings.Cut(a, "=")
				n, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					return 0, false
				}
				switch strings.TrimSpace(k) {
				case "days":
					d += time.Duration(n) * 24 * time.Hour
				case "seconds":
					d += time.Duration(n) * time.Second
				case "microseconds":
					d += time.Duration(n) * time.Microsecond
				default:
					return 0, false
				}
			}
		}
		return d, true
	}
	if key, ok := strings.CutPrefix(tz, "zoneinfo.ZoneInfo(key='"); ok {
		key, ok = strings.CutSuffix(key, "')")
		if !ok {
			return 0, false
		}
		loc, err := time.LoadLocation(key)
		if err != nil {
			return 0, false
		}
		local := time.Date(at.Year(), at.Month(), at.Day(), at.Hour(), at.Minute(), at.Second(), at.Nanosecond(), loc)
		_, off := local.Zone()
		return time.Duration(off) * time.Second, true
	}
	return 0, false
}

// offsetText is Python's isoformat of a UTC offset: ±HH:MM, with :SS and
// .ffffff when they are not zero.
func offsetText(d time.Duration) string {
	sign := '+'
	if d < 0 {
		sign, d = '-', -d
	}
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	s := fmt.Sprintf("%c%02d:%02d", sign, h, m)
	sec, us := int(d%time.Minute/time.Second), int(d%time.Second/time.Microsecond)
	if sec != 0 || us != 0 {
		s += fmt.Sprintf(":%02d", sec)
		if us != 0 {
			s += fmt.Sprintf(".%06d", us)
		}
	}
	return s
}

// CanonicalUUID writes 32 hex digits (any dashes and case) as Python's
// str(uuid.UUID(...)) does.
func CanonicalUUID(s string) (string, bool) {
	h := strings.ToLower(strings.ReplaceAll(s, "-", ""))
	if len(h) != 32 {
		return "", false
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", false
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], true
}
