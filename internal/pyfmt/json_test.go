package pyfmt

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestAppendJSONFloat(t *testing.T) {
	// Expected values are Python 3's json.dumps(float).
	tests := []struct {
		in   float64
		want string
	}{
		{0.0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1.0, "1.0"},
		{2.0, "2.0"},
		{100.0, "100.0"},
		{0.1, "0.1"},
		{0.30000000000000004, "0.30000000000000004"},
		{1e+16, "1e+16"},
		{1000000000000000.0, "1000000000000000.0"},
		{123456789012345.6, "123456789012345.6"},
		{1234567890123456.8, "1234567890123456.8"},
		{1.2345678901234568e+16, "1.2345678901234568e+16"},
		{0.0001, "0.0001"},
		{1e-05, "1e-05"},
		{0.00012345, "0.00012345"},
		{1.5e-05, "1.5e-05"},
		{5e-324, "5e-324"},
		{1.7976931348623157e+308, "1.7976931348623157e+308"},
		{1e+22, "1e+22"},
		{1795368848.3886538, "1795368848.3886538"},
		{0.003647343000920955, "0.003647343000920955"},
		{1795368848.394066, "1795368848.394066"},
		// Unix times, appendEpochFloat's range, and its edges.
		{1732420000.0, "1732420000.0"},
		{1732420000.5, "1732420000.5"},
		{1732420000.25, "1732420000.25"},
		{1732420000.1234567, "1732420000.1234567"},
		{1073741824.0000002, "1073741824.0000002"},
		{1073741824.5, "1073741824.5"},
		{8589934591.999999, "8589934591.999999"},
		{2147483648.0000005, "2147483648.0000005"},
		{1700000000.000001, "1700000000.000001"},
		{1700000000.0000002, "1700000000.0000002"},
		{1700000000.1, "1700000000.1"},
		{4294967295.9999995, "4294967295.9999995"},
		{-1.5, "-1.5"},
		{3e-07, "3e-07"},
		{9999999999999998.0, "9999999999999998.0"},
		{1.0 / 3, "0.3333333333333333"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
		{math.NaN(), "NaN"},
	}
	for _, tc := range tests {
		if got := string(AppendJSONFloat(nil, tc.in)); got != tc.want {
			t.Errorf("AppendJSONFloat(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	// Expected values are Python 3's json.dumps(str) after Tornado's
	// replace("</", "<\\/").
	tests := []struct {
		in, want string
	}{
		{"", `""`},
		{"harness.add", `"harness.add"`},
		{"é", `"\u00e9"`},
		{"😀", `"\ud83d\ude00"`},
		{"\x7f", `"\u007f"`},
		{"\x00\x1f", `"\u0000\u001f"`},
		{"\n\r\t\b\f", `"\n\r\t\b\f"`},
		{`\"`, `"\\\""`},
		{"</script>", `"<\/script>"`},
		{"a<b/c", `"a<b/c"`},
		{"<<//", `"<<\//"`},
		{"\u2028", `"\u2028"`},
		{"\xff", `"\ufffd"`},
		{"{'k': 'v'}", `"{'k': 'v'}"`},
	}
	for _, tc := range tests {
		if got := string(AppendJSONString(nil, tc.in)); got != tc.want {
			t.Errorf("AppendJSONString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// jsonFloatByStrconv is AppendJSONFloat as strconv alone writes it: the
// reference the fast paths must agree with.
func jsonFloatByStrconv(f float64) string {
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(sci[strings.IndexByte(sci, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// TestAppendJSONFloatAgreesWithStrconv compares AppendJSONFloat with the
// reference over random floats: any bits, and timestamps as Celery makes
// them (time.time(), and whole seconds plus micro- or milliseconds), where
// appendEpochFloat answers. It also checks that appendEpochFloat does answer
// nearly all timestamps, so that the fast path is the one tested.
func TestAppendJSONFloatAgreesWithStrconv(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	epoch := func() float64 { return epochMin + r.Float64()*(epochMax-epochMin) }
	tests := []struct {
		name string
		gen  func() float64
	}{
		{"any bits", func() float64 { return math.Float64frombits(r.Uint64()) }},
		{"epoch range", epoch},
		{"whole seconds and microseconds", func() float64 {
			return float64(r.IntN(epochMax-epochMin)+epochMin) + float64(r.IntN(1000000))/1e6
		}},
		{"whole seconds and milliseconds", func() float64 {
			return float64(r.IntN(epochMax-epochMin)+epochMin) + float64(r.IntN(1000))/1e3
		}},
		{"neighbours of powers of two", func() float64 {
			p := float64(int64(1) << (30 + r.IntN(4)))
			return math.Float64frombits(math.Float64bits(p) + uint64(r.IntN(5)) - 2)
		}},
		{"small runtimes", func() float64 { return r.Float64() * math.Pow(10, float64(r.IntN(12)-6)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 200000 {
				f := tc.gen()
				if math.IsNaN(f) || math.IsInf(f, 0) {
					continue
				}
				if got, want := string(AppendJSONFloat(nil, f)), jsonFloatByStrconv(f); got != want {
					t.Fatalf("AppendJSONFloat(%b) = %s, want %s", f, got, want)
				}
			}
		})
	}
	fast := 0
	for range 100000 {
		if _, ok := appendEpochFloat(nil, epoch()); ok {
			fast++
		}
	}
	if fast < 99000 {
		t.Errorf("appendEpochFloat answered %d of 100000 timestamps, want nearly all", fast)
	}
}

// BenchmarkAppendJSONFloat is the cost of one timestamp and one runtime, as a
// task list writes them.
func BenchmarkAppendJSONFloat(b *testing.B) {
	for _, tc := range []struct {
		name string
		f    float64
	}{{"timestamp", 1795368848.3886538}, {"runtime", 0.003647343000920955}} {
		b.Run(tc.name, func(b *testing.B) {
			buf := make([]byte, 0, 32)
			for b.Loop() {
				buf = AppendJSONFloat(buf[:0], tc.f)
			}
		})
	}
}
