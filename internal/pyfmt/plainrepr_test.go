package pyfmt

import (
	"strings"
	"testing"
	"time"
)

func TestPlainRepr(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"(2, 3)", "(2, 3)"},
		{"datetime.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.timezone.utc)", "'2024-01-02T03:04:05.678901Z'"},
		{"datetime.datetime(2024, 1, 2, 3, 4)", "'2024-01-02T03:04:00'"},
		{"datetime.datetime(2024, 1, 2, 0, 0, fold=1)", "'2024-01-02T00:00:00'"},
		{"datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(seconds=7200)))", "'2024-01-02T03:04:05+02:00'"},
		{"datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(days=-1, seconds=68400), 'EST'))", "'2024-01-02T03:04:05-05:00'"},
		{"datetime.datetime(2024, 7, 2, 3, 4, 5, tzinfo=zoneinfo.ZoneInfo(key='Europe/Berlin'))", "'2024-07-02T03:04:05+02:00'"},
		{"datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=zoneinfo.ZoneInfo(key='Europe/Berlin'))", "'2024-01-02T03:04:05+01:00'"},
		{"datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=<UTC>)", "'2024-01-02T03:04:05Z'"},
		{"datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=tzfile('Nowhere'))", "datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=tzfile('Nowhere'))"},
		{"datetime.date(2024, 1, 2)", "'2024-01-02T00:00:00'"},
		{"datetime.time(3, 4)", "'03:04:00'"},
		{"datetime.time(3, 4, 5, 123000, tzinfo=datetime.timezone.utc)", "'03:04:05.123000+00:00'"},
		{"UUID('12345678-1234-5678-1234-567812345678')", "'12345678-1234-5678-1234-567812345678'"},
		{"Decimal('1.10')", "'1.10'"},
		{"[b'text', b'it\\'s', b'\\xc3\\xa9', b'\\xff\\x00']", "['text', \"it's\", 'é', b'\\xff\\x00']"},
		// Text inside strings and other names are never touched.
		{"'datetime.date(2024, 1, 2)'", "'datetime.date(2024, 1, 2)'"},
		{`"it's UUID('x')"`, `"it's UUID('x')"`},
		{"mymod.Decimal('1') xb'a' my_UUID('x')", "mymod.Decimal('1') xb'a' my_UUID('x')"},
		{"ValueError(datetime.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.timezone.utc))", "ValueError('2024-01-02T03:04:05.678901Z')"},
		// Reprs that cannot be read exactly stay.
		{"datetime.datetime(2024, 1", "datetime.datetime(2024, 1"},
		{"UUID('nope')", "UUID('nope')"},
		{"b'unterminated", "b'unterminated"},
		{"datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=zoneinfo.ZoneInfo(key='America/Argentina/ComodRivadavia'))", "'2024-01-02T03:04:05-03:00'"},
	} {
		if got := PlainRepr(c.in); got != c.want {
			t.Errorf("PlainRepr(%s)\n = %s\nwant %s", c.in, got, c.want)
		}
	}
}

// TestPlainReprLinear: a long text of unclosed calls costs a bounded look
// at each, not a scan to the end.
func TestPlainReprLinear(t *testing.T) {
	s := strings.Repeat("UUID(", 200000)
	start := time.Now()
	if got := PlainRepr(s); got != s {
		t.Fatal("unclosed calls rewritten")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("PlainRepr of %d bytes took %s", len(s), d)
	}
}
