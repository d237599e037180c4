// Package version says which build of stamen is running: its version,
// the commit it was built from and when that commit was made, read from
// the build information the Go toolchain embeds (module version, vcs.*
// settings). A build without them (GOFLAGS=-buildvcs=false, a source tree
// without .git, as in a container build) can have them stamped with
// -ldflags "-X github.com/stamen-dev/stamen/internal/version.version=..."
// (and .commit, .date), as `make dist` does.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// Set by -ldflags -X; empty: taken from the build information.
var version, commit, date string

// Info describes the running build.
type Info struct {
	// Version is a release's tag (v1.2.3), the module's pseudo-version,
	// or "devel".
	Version string
	// Commit is the VCS revision, with "-dirty" when the tree had local
	// changes; "unknown" when nobody said.
	Commit string
	// Date is the build date: the commit's time (RFC 3339), which keeps
	// the build reproducible; "unknown" when nobody said.
	Date string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

var get = sync.OnceValue(func() Info {
	i := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		var rev, at string
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if i.Commit == "" && rev != "" {
			i.Commit = rev
			if dirty {
				i.Commit += "-dirty"
			}
		}
		if i.Date == "" {
			i.Date = at
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	if i.Date == "" {
		i.Date = "unknown"
	}
	return i
})

// Get returns the running build's Info.
func Get() Info { return get() }

// String is the line `stamen --version` prints.
func (i Info) String() string {
	return fmt.Sprintf("stamen %s (commit %s, built %s, %s %s/%s)",
		i.Version, i.Commit, i.Date, i.GoVersion, runtime.GOOS, runtime.GOARCH)
}
