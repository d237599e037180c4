package audit_test

import (
	"testing"

	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/audit/audittest"
)

func TestMemoryStore(t *testing.T) {
	audittest.CheckStore(t, &audit.Memory{})
}
