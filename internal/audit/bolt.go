package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stamen-dev/stamen/internal/store"
)

// Bolt is a Store in stamen's bbolt file (internal/store's audit bucket),
// records encoded as JSON.
type Bolt struct {
	DB *store.Store
}

// Append stores r.
func (b Bolt) Append(ctx context.Context, r Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode audit record: %w", err)
	}
	if err := b.DB.AppendAudit(ctx, r.Time, data); err != nil {
		return fmt.Errorf("store audit record: %w", err)
	}
	return nil
}

// List returns the matching records, newest first. Until is a seek; the
// other filters are applied to each record walked.
func (b Bolt) List(ctx context.Context, q Query) ([]Record, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	var out []Record
	skip := q.Offset
	err := b.DB.ScanAudit(ctx, q.Until, func(t time.Time, data []byte) bool {
		if !q.Since.IsZero() && t.Before(q.Since) {
			return false
		}
		var r Record
		if json.Unmarshal(data, &r) != nil || !q.Match(&r) {
			return true // a record this version cannot read is skipped
		}
		if skip > 0 {
			skip--
			return true
		}
		out = append(out, r)
		return len(out) < limit
	})
	if err != nil {
		return nil, fmt.Errorf("read audit records: %w", err)
	}
	return out, nil
}

// Prune drops records older than before and the oldest beyond maxRecords.
func (b Bolt) Prune(ctx context.Context, before time.Time, maxRecords int) (int, error) {
	n, err := b.DB.PruneAudit(ctx, before, maxRecords)
	if err != nil {
		return n, fmt.Errorf("prune audit records: %w", err)
	}
	return n, nil
}
