package taskrec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stamen-dev/stamen/internal/pyfmt"
)

// TestFoldsToHexIsComplete: a digest records the bytes it sees, so it holds
// only while every character whose folded form holds a hex digit or a
// hyphen marks the chunk as holding anything.
func TestFoldsToHexIsComplete(t *testing.T) {
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		f := pyfmt.Fold(string(r))
		hex := strings.ContainsFunc(f, func(c rune) bool { return c < utf8.RuneSelf && IsGramByte(byte(c)) })
		if hex != foldsToHexAt([]byte(string(r))) {
			t.Fatalf("%U folds to %q: in foldsToHex = %v", r, f, !hex)
		}
	}
}

// TestGramsNeverRuleOutWhatAChunkHolds: every run of hex digits and
// hyphens in a chunk's folded text passes its digest.
func TestGramsNeverRuleOutWhatAChunkHolds(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const alphabet = "0123456789abcdefABCDEF-xyz ,'(){}"
	for range 200 {
		data := make([]byte, 1+r.IntN(4096))
		for i := range data {
			data[i] = alphabet[r.IntN(len(alphabet))]
		}
		if r.IntN(4) == 0 {
			at := r.IntN(len(data))
			data = append(data[:at], append([]byte("ﬀ12-"), data[at:]...)...)
		}
		g := buildGrams(data)
		folded := pyfmt.Fold(string(data))
		for range 50 {
			start := r.IntN(len(folded))
			end := start
			for end < len(folded) && IsGramByte(folded[end]) {
				end++
			}
			if end-start < GramLen {
				continue
			}
			run := folded[start : start+GramLen+r.IntN(end-start-GramLen+1)]
			if !g.MayHold([]byte(run)) {
				t.Fatalf("%q holds %q, its digest rules it out", folded, run)
			}
		}
	}
}

// TestGramsRuleOutAbsentIDs: a chunk of records quoting small numbers
// rules out pieces of task ids, which is what spares a search its scan.
func TestGramsRuleOutAbsentIDs(t *testing.T) {
	var data []byte
	for i := 0; len(data) < ChunkSize; i++ {
		data = fmt.Appendf(data, "(%d, %d)\x00{'n': %d}\x00%d\x00", i%100, i%1000, i, i*3)
	}
	g := buildGrams(data)
	r := rand.New(rand.NewPCG(9, 10))
	passed := 0
	for range 1000 {
		var id [16]byte
		for i := range id {
			id[i] = byte(r.Uint32())
		}
		if g.MayHold([]byte(FormatUUID(id)[24:])) {
			passed++
		}
	}
	if passed > 20 {
		t.Fatalf("%d of 1000 id pieces pass the digest of a chunk that holds none", passed)
	}
	if !g.MayHold([]byte("12345")) || bytes.Contains(data, []byte("999999")) && !g.MayHold([]byte("999999")) {
		t.Fatal("the digest rules out what the chunk holds")
	}
}
