package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Celery releases workers and clients can run. Celery52 is Debian
// bookworm's python3-celery (5.2.6, kombu 5.2.4), installed for
// /usr/bin/python3. Celery55 (trixie: 5.5.2, kombu 5.5.3) and Celery56 (sid:
// 5.6.3, kombu 5.6.2) are Debian's newer packages, unpacked by
// scripts/celery-versions.sh (which scripts/services.sh runs) under
// CeleryCache and run by the same /usr/bin/python3 through PYTHONPATH.
const (
	Celery52 = "5.2"
	Celery55 = "5.5"
	Celery56 = "5.6"
)

// CeleryVersions are the releases the tests run against, oldest first.
var CeleryVersions = []string{Celery52, Celery55, Celery56}

// CeleryCache is where scripts/celery-versions.sh unpacks Celery 5.5 and 5.6,
// unless STAMEN_CELERY_CACHE names another directory (the script reads the
// same variable).
func CeleryCache() string {
	if d := os.Getenv("STAMEN_CELERY_CACHE"); d != "" {
		return d
	}
	return "/var/cache/stamen-celery"
}

// celeryEnv is what /usr/bin/python3 needs in its environment to import
// Celery release version: nothing for the system's 5.2, else PYTHONPATH to
// the unpacked packages (pythonEnv drops any inherited PYTHONPATH first).
func celeryEnv(version string) ([]string, error) {
	switch version {
	case "", Celery52:
		return nil, nil
	case Celery55, Celery56:
		site := filepath.Join(CeleryCache(), version, "root", "usr", "lib", "python3", "dist-packages")
		if _, err := os.Stat(filepath.Join(site, "celery", "__init__.py")); err != nil {
			return nil, fmt.Errorf("Celery %s is not unpacked in %s (run `bash scripts/celery-versions.sh %s` as root, or scripts/services.sh): %w", version, site, version, err)
		}
		return []string{"PYTHONPATH=" + site}, nil
	}
	return nil, fmt.Errorf("unknown Celery version %q (known: %s)", version, strings.Join(CeleryVersions, ", "))
}

var (
	versionMu    sync.Mutex
	versionCache = map[string]string{}
)

// CeleryRelease is the exact Celery release (e.g. "5.6.3") /usr/bin/python3
// imports for version, as checked by importing it; it fails the test when
// that release cannot be imported or is not a version.x release.
func CeleryRelease(t testing.TB, version string) string {
	t.Helper()
	rel, err := celeryRelease(version)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	return rel
}

func celeryRelease(version string) (string, error) {
	if version == "" {
		version = Celery52
	}
	versionMu.Lock()
	defer versionMu.Unlock()
	if rel, ok := versionCache[version]; ok {
		return rel, nil
	}
	extra, err := celeryEnv(version)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Python, "-c", "import celery, kombu, redis, amqp; print(celery.__version__)")
	cmd.Env = pythonEnv(extra)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s cannot import Celery %s: %v: %s", Python, version, err, bytes.TrimSpace(lastLines(out, 5)))
	}
	rel := strings.TrimSpace(string(out))
	if !strings.HasPrefix(rel, version+".") {
		return "", fmt.Errorf("Celery %s: %s imports Celery %s", version, Python, rel)
	}
	versionCache[version] = rel
	return rel, nil
}

// RequireCelery is Require for a Celery release other than the system's: it
// skips the test (fails it when CI=true or STAMEN_INTEGRATION=1) unless that
// release is unpacked and importable.
func RequireCelery(t testing.TB, version string) {
	t.Helper()
	Require(t)
	if _, err := celeryRelease(version); err != nil {
		if strict() {
			t.Fatalf("testcluster: %v\n(failing instead of skipping because CI=true or STAMEN_INTEGRATION=1)", err)
		}
		t.Skipf("testcluster: %v", err)
	}
}

// bannerVersion finds the release in the banner a worker prints at start
// (" -------------- w1-ab12cd@host v5.6.3 (recovery)").
var bannerVersion = regexp.MustCompile(`@\S+ v(\d+\.\d+\.\d+\S*) \(`)

// checkBanner verifies from the worker's start-up banner (its stdout) that it
// runs the release it was asked for.
func (w *Worker) checkBanner() error {
	data, err := os.ReadFile(w.outPath)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, w.Name) {
			continue
		}
		if m := bannerVersion.FindStringSubmatch(line); m != nil {
			if m[1] != w.CeleryRelease {
				return fmt.Errorf("worker banner says Celery %s, want %s", m[1], w.CeleryRelease)
			}
			return nil
		}
	}
	return fmt.Errorf("no Celery version in the worker's banner (%s)", w.outPath)
}

// ClientOptions describe a Python Celery client run by RunClient.
type ClientOptions struct {
	// Celery is the release, as WorkerOptions.Celery; default Celery52.
	Celery string
	// Broker and Backend default as in WorkerOptions.
	Broker, Backend string
	// Timeout bounds the run; default 60s.
	Timeout time.Duration
}

// RunClient runs a Python snippet as a Celery client of the sample app, with
// the chosen Celery release: `from stamen_testapp import app` gives an app on
// opts.Broker and opts.Backend; sys.argv[1:] are args. It returns the
// snippet's standard output and fails the test, with its output, when it
// exits non-zero or runs out of time.
func RunClient(t testing.TB, opts ClientOptions, script string, args ...string) []byte {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("testcluster: find the repository root: %v", err)
	}
	extra, err := celeryEnv(opts.Celery)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	if opts.Broker == "" {
		opts.Broker = RedisURL(0)
	}
	if opts.Backend == "" {
		opts.Backend = defaultBackend(opts.Broker)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, Python, append([]string{"-c", script}, args...)...)
	cmd.Dir = filepath.Join(root, "testdata", "celeryapp")
	cmd.Env = pythonEnv(append(extra, "STAMEN_TEST_BROKER="+opts.Broker, "STAMEN_TEST_BACKEND="+opts.Backend))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("testcluster: Celery %s client: %v (timeout %s)\nstdout:\n%s\nstderr:\n%s", opts.Celery, err, opts.Timeout,
			lastLines(stdout.Bytes(), logTailLines), lastLines(stderr.Bytes(), logTailLines))
	}
	return stdout.Bytes()
}
