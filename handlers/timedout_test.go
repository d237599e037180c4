package handlers

import (
	"fmt"
	"strings"
	"testing"
)

func TestTimedOutHeader(t *testing.T) {
	many := make([]string, 150)
	for i := range many {
		many[i] = fmt.Sprintf("w%03d@h", i)
	}
	for _, tc := range []struct {
		name    string
		workers []string
		want    string
	}{
		{"none", nil, ""},
		{"one", []string{"w1@h"}, "w1@h"},
		{"several", []string{"w1@h", "w2@h"}, "w1@h,w2@h"},
		{"bounded", many, strings.Join(many[:maxTimedOutNames], ",")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := timedOutHeader(tc.workers)
			if got := h.Get(TimedOutHeader); got != tc.want {
				t.Errorf("header %q, want %q", got, tc.want)
			}
			if tc.want == "" && h != nil {
				t.Errorf("header %v, want none", h)
			}
		})
	}
}
