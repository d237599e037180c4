package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/stamen-dev/stamen/internal/audit/audittest"
	"github.com/stamen-dev/stamen/internal/store/bolt"
)

func TestAudit(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	audittest.CheckStore(t, bolt.Audit{S: db})
}
