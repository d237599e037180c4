package state

import "testing"

func TestAppendPyFloat(t *testing.T) {
	// Expected values are Python 3's json.dumps(float).
	tests := []struct {
		in   float64
		want string
	}{
		{0.0, "0.0"},
		{negZero(), "-0.0"},
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
		{-1.5, "-1.5"},
		{3e-07, "3e-07"},
		{9999999999999998.0, "9999999999999998.0"},
		{1.0 / 3, "0.3333333333333333"},
		{inf(1), "Infinity"},
		{inf(-1), "-Infinity"},
		{nan(), "NaN"},
	}
	for _, tc := range tests {
		if got := string(appendPyFloat(nil, tc.in)); got != tc.want {
			t.Errorf("appendPyFloat(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestAppendPyString(t *testing.T) {
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
		if got := string(appendPyString(nil, tc.in)); got != tc.want {
			t.Errorf("appendPyString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
