package app

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stamen-dev/stamen/internal/version"
)

// TestBuildInfoMetric: /metrics says which build runs, in
// stamen_build_info's labels, as `stamen --version` does.
func TestBuildInfoMetric(t *testing.T) {
	srv := newEmbedded(t, "")
	code, body, _ := get(t, srv.URL+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics answered %d", code)
	}
	v := version.Get()
	want := fmt.Sprintf(`stamen_build_info{build_date=%q,goversion=%q,revision=%q,version=%q} 1`, v.Date, v.GoVersion, v.Commit, v.Version)
	if !strings.Contains(body, want) {
		t.Fatalf("/metrics lacks %s", want)
	}
}
