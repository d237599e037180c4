// Package deploy holds the tests of the deployment artifacts: the Helm
// chart, the Compose examples, the systemd unit, the alert rules and the
// Grafana dashboard. Helm and promtool run as Go modules at pinned
// versions, so nothing is downloaded beyond the module proxy.
package deploy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The tools' pinned module versions.
const (
	helmModule     = "helm.sh/helm/v3/cmd/helm@v3.22.0"
	promtoolModule = "github.com/prometheus/prometheus/cmd/promtool@v0.316.0"
)

// goRun runs a tool module (go run caches its build) and returns its
// output; stdin, when not nil, is its input.
func goRun(t *testing.T, module string, stdin []byte, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", module}, args...)...)
	// Outside this module: the tool's own go.mod decides its dependencies.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("go run %s %s: %s", module, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return out.String(), err
}

// flowerEnv matches the settings the artifacts give stamen by name.
var flowerEnv = regexp.MustCompile(`\b(?:FLOWER|STAMEN)_([A-Z0-9_]+)\b`)

// checkSettingNames fails for every FLOWER_X or STAMEN_X in text that
// stamen does not read: cmd/stamen reads each as env("X").
func checkSettingNames(t *testing.T, what, text string) {
	t.Helper()
	src, err := os.ReadFile("../cmd/stamen/main.go")
	if err != nil {
		t.Fatal(err)
	}
	flags, err := os.ReadFile("../cmd/stamen/flower.go")
	if err != nil {
		t.Fatal(err)
	}
	all := string(src) + string(flags)
	for _, m := range flowerEnv.FindAllStringSubmatch(text, -1) {
		if !strings.Contains(all, `"`+m[1]+`"`) {
			t.Errorf("%s sets %s, which stamen does not read", what, m[0])
		}
	}
}
