package taskstats

import (
	"encoding/binary"
	"errors"
	"time"
)

// A store keeps the aggregate as one record per minute (Encode), written
// as minutes change (Drain) and read back at start (Restore), so that the
// counts survive a restart. A minute's record is its cells: for each, its
// key's three strings (or `other`), its six counts and its histogram's
// entries, as uvarints.

// Drain returns the minutes changed since the last Drain: each kept
// one's record, and the dropped ones' numbers (Unix minutes) to delete.
func (a *Aggregate) Drain() (put map[int64][]byte, del []int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	put = map[int64][]byte{}
	for m := range a.dirty {
		mi := &a.ring[floorMod(m, a.ringLen)]
		if mi.cells != nil && mi.m == m {
			put[m] = a.encode(mi)
		} else {
			del = append(del, m)
		}
	}
	clear(a.dirty)
	return put, del
}

// Redirty marks minutes changed again (their write failed).
func (a *Aggregate) Redirty(ms []int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range ms {
		a.dirty[m] = struct{}{}
	}
}

// Since is when counting began.
func (a *Aggregate) Since() time.Time {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return time.Unix(a.since*60, 0).UTC()
}

// SetSince says counting began at t (a store's first start), when earlier
// than now's beginning.
func (a *Aggregate) SetSince(t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m := floorDiv(t.Unix(), 60); m < a.since {
		a.since = m
	}
}

func (a *Aggregate) encode(mi *minute) []byte {
	b := make([]byte, 0, 16+len(mi.cells)*24)
	b = binary.AppendUvarint(b, uint64(len(mi.cells)))
	for i := range mi.cells {
		c := &mi.cells[i]
		if c.key == otherKey {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			e := &a.ents[c.key]
			for _, s := range [3]string{e.name, e.worker, e.queue} {
				b = binary.AppendUvarint(b, uint64(len(s)))
				b = append(b, s...)
			}
		}
		for _, n := range c.n {
			b = binary.AppendUvarint(b, uint64(n))
		}
		b = binary.AppendUvarint(b, uint64(len(c.hist)))
		for _, h := range c.hist {
			b = binary.AppendUvarint(b, uint64(h))
		}
	}
	return b
}

var errCorrupt = errors.New("taskstats: corrupt minute record")

// Restore adds a minute's record, as Drain gave it, to the aggregate. A
// minute outside the retention is skipped; the memory bound holds as for
// events.
func (a *Aggregate) Restore(m int64, rec []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.nowMinute()
	a.sweep(now)
	if m < now-a.retentionMinutes() || m > now+futureMinutes {
		return nil
	}
	d := decoder{b: rec}
	n := d.uvarint()
	if d.err || n > uint64(len(rec)) {
		return errCorrupt
	}
	mi := a.minuteAt(m)
	if mi == nil {
		return nil
	}
	for range n {
		var e Event
		k := uint32(otherKey)
		switch d.byte() {
		case 0:
		case 1:
			e.Name, e.Worker, e.Queue = d.str(), d.str(), d.str()
			if d.err {
				return errCorrupt
			}
			k = a.keyOf(&e)
		default:
			return errCorrupt
		}
		c := a.cellFor(mi, k)
		for i := range c.n {
			v := d.uvarint()
			was := c.n[i]
			c.n[i] = uint32(min(uint64(c.n[i])+v, 1<<32-1))
			mi.total.n[i] = uint32(min(uint64(mi.total.n[i])+uint64(c.n[i]-was), 1<<32-1))
		}
		hn := d.uvarint()
		if d.err || hn > uint64(len(rec)) {
			return errCorrupt
		}
		for range hn {
			h := d.uvarint()
			if h > 1<<32-1 || h>>24 >= Bins {
				return errCorrupt
			}
			a.addRuntime(c, int(h>>24), uint32(h&0xffffff))
			a.addRuntime(mi.total, int(h>>24), uint32(h&0xffffff))
		}
		if d.err {
			return errCorrupt
		}
	}
	a.enforce(now)
	return nil
}

type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.err = true
		return 0xff
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
