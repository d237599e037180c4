package taskstats

import (
	"encoding/binary"
	"errors"
)

// Cell is the counts and runtime histogram of one key in one minute, as a
// store that folds the activity itself (PostgreSQL) keeps it. Its values
// may be negative while a store folds changes out of order.
type Cell struct {
	N    [NumKinds]int64
	Hist [Bins]int64
}

// Add adds o to c.
func (c *Cell) Add(o *Cell) {
	for i := range c.N {
		c.N[i] += o.N[i]
	}
	for i := range c.Hist {
		c.Hist[i] += o.Hist[i]
	}
}

// AppendCell appends c's encoding to b: the six counts, then each
// non-zero bin as its distance from the previous one and its count, as
// signed varints.
func AppendCell(b []byte, c *Cell) []byte {
	for _, n := range c.N {
		b = binary.AppendVarint(b, n)
	}
	last := -1
	for bin, n := range c.Hist {
		if n != 0 {
			b = binary.AppendVarint(b, int64(bin-last))
			b = binary.AppendVarint(b, n)
			last = bin
		}
	}
	return b
}

var errCell = errors.New("taskstats: corrupt cell")

// AddEncoded adds the cell AppendCell encoded in b to c.
func (c *Cell) AddEncoded(b []byte) error {
	next := func() (int64, bool) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	for i := range c.N {
		v, ok := next()
		if !ok {
			return errCell
		}
		c.N[i] += v
	}
	bin := -1
	for len(b) > 0 {
		d, ok1 := next()
		v, ok2 := next()
		if !ok1 || !ok2 || d <= 0 || int64(bin)+d >= Bins {
			return errCell
		}
		bin += int(d)
		c.Hist[bin] += v
	}
	return nil
}
