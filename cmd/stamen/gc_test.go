package main

import "testing"

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 1000},
		{1 << 20, 1000},               // 1 MiB: capped
		{16 << 20, 200},               // 32 MiB of headroom is 200%
		{15 << 20, 220},               // 213.3% rounded up to a multiple of 10
		{160 << 20, defaultGCPercent}, // 20% of it is exactly the headroom
		{1 << 30, defaultGCPercent},   // a million tasks: Go's percent alone
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}
