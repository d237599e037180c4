package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// unitKeys parses a unit file: section -> key -> values (a key may repeat).
func unitKeys(t *testing.T, text string) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	section := ""
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("not a unit line: %q", line)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	return out
}

// TestSystemdUnit: the unit has the usual hardening (DynamicUser,
// ProtectSystem=strict, no capabilities), keeps the store in its
// StateDirectory, and takes the secrets from an EnvironmentFile, whose
// example sets only settings stamen reads. Where systemd-analyze is
// present, `systemd-analyze verify` accepts the unit without a warning.
func TestSystemdUnit(t *testing.T) {
	raw, err := os.ReadFile("systemd/stamen.service")
	if err != nil {
		t.Fatal(err)
	}
	u := unitKeys(t, string(raw))
	s := u["Service"]
	for k, want := range map[string]string{
		"DynamicUser": "yes", "ProtectSystem": "strict", "StateDirectory": "stamen", "NoNewPrivileges": "yes",
		"PrivateTmp": "yes", "ProtectHome": "yes", "CapabilityBoundingSet": "", "EnvironmentFile": "/etc/stamen/stamen.env",
		"ExecStart": "/usr/local/bin/stamen", "WorkingDirectory": "/var/lib/stamen",
	} {
		if !slices.Contains(s[k], want) {
			t.Errorf("[Service] %s=%v, want %q", k, s[k], want)
		}
	}
	if !slices.Contains(s["Environment"], "FLOWER_DB=/var/lib/stamen/stamen.db") {
		t.Errorf("the store is not in the StateDirectory: Environment=%v", s["Environment"])
	}
	if !slices.Contains(u["Install"]["WantedBy"], "multi-user.target") {
		t.Error("no [Install] WantedBy=multi-user.target")
	}
	for k, vs := range s {
		if k == "Environment" {
			for _, v := range vs {
				if strings.Contains(v, "://") || strings.Contains(v, "AUTH") || strings.Contains(v, "BROKER") {
					t.Errorf("a secret in the unit, readable by every user: Environment=%s", v)
				}
			}
		}
	}
	env, err := os.ReadFile("systemd/stamen.env")
	if err != nil {
		t.Fatal(err)
	}
	checkSettingNames(t, "systemd/stamen.env", string(env)+string(raw))

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not found: the unit's keys were checked by hand only")
		return
	}
	// verify checks that ExecStart exists: point it at a binary that does.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := strings.ReplaceAll(string(raw), "ExecStart=/usr/local/bin/stamen", "ExecStart="+self)
	unit = strings.ReplaceAll(unit, "EnvironmentFile=/etc/", "EnvironmentFile=-/etc/")
	path := filepath.Join(t.TempDir(), "stamen.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	// verify exits 0 on unknown keys and bad values, only warning: any
	// line about the unit is a failure.
	if err != nil || strings.Contains(string(out), "stamen.service") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
