package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stamen-dev/stamen/internal/audit"
)

// Audit is the audit.Store in stamen's bbolt file (its audit bucket),
// records encoded as JSON.
type Audit struct {
	S *Store
}

// Append stores r.
func (b Audit) Append(ctx context.Context, r audit.Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode audit record: %w", err)
	}
	if err := b.S.AppendAudit(ctx, r.Time, data); err != nil {
		return fmt.Errorf("store audit record: %w", err)
	}
	return nil
}

// List returns the matching records, newest first. Until is a seek; the
// other filters are applied to each record walked.
func (b Audit) List(ctx context.Context, q audit.Query) ([]audit.Record, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = audit.DefaultLimit
	}
	var out []audit.Record
	skip := q.Offset
	err := b.S.ScanAudit(ctx, q.Until, func(t time.Time, data []byte) bool {
		if !q.Since.IsZero() && t.Before(q.Since) {
			return false
		}
		var r audit.Record
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
func (b Audit) Prune(ctx context.Context, before time.Time, maxRecords int) (int, error) {
	n, err := b.S.PruneAudit(ctx, before, maxRecords)
	if err != nil {
		return n, fmt.Errorf("prune audit records: %w", err)
	}
	return n, nil
}

var _ audit.Store = Audit{}
