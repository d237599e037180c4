package taskrec

import "bytes"

// A search for a piece of an id scans the arena for the term's digits and
// hyphens: at a million tasks, tens of megabytes a search. A chunk that is
// no longer written to can be ruled out by a digest of what it holds: the
// 4-byte windows of its runs of hex digits and hyphens, case folded,
// hashed into a fixed bitmap. Digests are built by searches, a few at a
// time, never by the writer, and live and die with their chunks.

// GramLen is the window of the digest: a run shorter than that cannot be
// ruled out.
const GramLen = 4

// gramBits: 8 KB a chunk, 3% of ChunkSize. A chunk of small numbers and
// names fills a few percent of it; one packed with uuids fills most of it
// and is then scanned as if it had none.
const gramBits = 1 << 16

// Grams is the digest of one sealed chunk.
type Grams struct {
	// all: the chunk holds a character that folds to hex letters (a
	// ligature such as U+FB00, which folds to "ff"), so its folded text
	// has windows that its bytes do not show; it may hold anything.
	all  bool
	bits [gramBits / 64]uint64
}

// gramValue returns c's digit in base 17 (0-9, a-f in either case, the
// hyphen), or -1 for any other byte.
func gramValue(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	case c == '-':
		return 16
	}
	return -1
}

// IsGramByte reports whether the folded byte c is one the digest records.
func IsGramByte(c byte) bool { return gramValue(c) >= 0 && (c < 'A' || c > 'F') }

// gramMod keeps the last GramLen-1 digits of a window: 17^3.
const gramMod = 17 * 17 * 17

// gramHash maps a window, a number in base 17 below 17^4, to a bit.
func gramHash(v uint32) uint32 { return (v * 0x9e3779b1) >> (32 - 16) }

// foldsToHex are the UTF-8 encodings of the characters whose casefolded
// form holds a hex letter: U+1E9A (to "a" and a modifier) and the
// ligatures U+FB00 to U+FB04 (to "ff", "fi", "fl", "ffi", "ffl").
var foldsToHex = [...][]byte{{0xe1, 0xba, 0x9a}, {0xef, 0xac, 0x80}, {0xef, 0xac, 0x81}, {0xef, 0xac, 0x82}, {0xef, 0xac, 0x83}, {0xef, 0xac, 0x84}}

func buildGrams(data []byte) *Grams {
	g := new(Grams)
	var v uint32
	run := 0
	for i, c := range data {
		d := gramValue(c)
		if d < 0 {
			run = 0
			if c >= 0xe1 && foldsToHexAt(data[i:]) {
				g.all = true
				return g
			}
			continue
		}
		v = v%gramMod*17 + uint32(d)
		if run++; run >= GramLen {
			h := gramHash(v)
			g.bits[h/64] |= 1 << (h % 64)
		}
	}
	return g
}

func foldsToHexAt(b []byte) bool {
	for _, f := range foldsToHex {
		if bytes.HasPrefix(b, f) {
			return true
		}
	}
	return false
}

// MayHold reports whether the chunk's folded text may hold run, folded
// text of IsGramByte bytes at least GramLen long: false only when one of
// its windows is missing.
func (g *Grams) MayHold(run []byte) bool {
	if g.all {
		return true
	}
	var v uint32
	for i, c := range run {
		v = v%gramMod*17 + uint32(gramValue(c))
		if i+1 >= GramLen {
			h := gramHash(v)
			if g.bits[h/64]&(1<<(h%64)) == 0 {
				return false
			}
		}
	}
	return true
}

// Grams returns the digest of chunk ci if a search built it, else nil.
func (a *Arena) Grams(ci int) *Grams { return a.Chunks[ci].grams.Load() }

// BuildGrams returns the digest of chunk ci, building it if none did yet,
// or nil while the chunk is the one records are appended to. Readers call
// it under the owner's read lock, concurrently: two of them may build the
// same digest, and either is kept.
func (a *Arena) BuildGrams(ci int) *Grams {
	if !a.Sealed(ci) {
		return nil
	}
	ch := a.Chunks[ci]
	if g := ch.grams.Load(); g != nil {
		return g
	}
	g := buildGrams(ch.Data)
	ch.grams.Store(g)
	return g
}

// Sealed reports whether chunk ci is no longer appended to: its bytes
// stay as they are until it is freed.
func (a *Arena) Sealed(ci int) bool { return ci != a.cur }
