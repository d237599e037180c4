package tasksearch

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stamen-dev/stamen/internal/pyfmt"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// fragment is a piece of s from a random offset.
func fragment(r *rand.Rand, s string) string {
	n := 3 + r.IntN(min(len(s)-2, 18))
	start := r.IntN(len(s) - n + 1)
	return s[start : start+n]
}

// TestAnchorBytesFoldOnlyFromThemselves: the scan of the arena looks for
// a term's digits and hyphens as they are, which holds only while no other
// character folds to text containing them.
func TestAnchorBytesFoldOnlyFromThemselves(t *testing.T) {
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		f := pyfmt.Fold(string(r))
		ascii := false
		for i := 0; i < len(f); i++ {
			if isAnchorByte(f[i]) || isLetterAnchor(f[i]) {
				t.Fatalf("%U folds to %q", r, f)
			}
			ascii = ascii || f[i] < utf8.RuneSelf
		}
		if ascii != foldsToASCII(r) {
			t.Fatalf("%U folds to %q: foldsToASCII = %v", r, f, !ascii)
		}
	}
}

func TestIDPatterns(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		var b [16]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		id := taskrec.FormatUUID(b)
		frag := fragment(r, id)
		if r.IntN(3) == 0 {
			frag = fragment(r, taskrec.FormatUUID([16]byte{byte(r.Uint32()), byte(r.Uint32())}))
		}
		want := strings.Contains(id, frag)
		got := false
		for _, p := range idPatterns(frag) {
			lo, hi := leUint64(b[:8]), leUint64(b[8:])
			got = got || lo&p.mask[0] == p.val[0] && hi&p.mask[1] == p.val[1]
		}
		if got != want {
			t.Fatalf("%q in %s: got %v, want %v", frag, id, got, want)
		}
	}
}

func leUint64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
