package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// unsetFlowerOnlyEnv leaves only what a case sets of the variables of
// Flower's options that stamen ignores or refuses.
func unsetFlowerOnlyEnv(t *testing.T) {
	t.Helper()
	var names []string
	for _, o := range flowerIgnored {
		names = append(names, o.name)
	}
	for _, o := range flowerRefused {
		names = append(names, o.name)
	}
	names = append(names, "auth", "auth_provider", "oauth2_key", "oauth2_secret", "oauth2_redirect_uri", "cookie_secret",
		"oidc_issuer", "oidc_client_id", "oidc_client_secret", "github_oauth_domain", "gitlab_oauth_domain",
		"gitlab_auth_allowed_groups", "gitlab_min_access_level", "oauth2_okta_base_url")
	for _, n := range append(names, "debug", "logging") {
		for _, p := range []string{"STAMEN_", "FLOWER_"} {
			t.Setenv(p+strings.ToUpper(n), "")
			os.Unsetenv(p + strings.ToUpper(n))
		}
	}
}

// TestFlowerOnlyOptions: Flower's options that stamen has no use for are
// accepted, from the command line or the environment, and named (their
// values never kept); those it cannot honour stop it with what to do
// instead; --debug lowers the default level only.
func TestFlowerOnlyOptions(t *testing.T) {
	unsetFlowerOnlyEnv(t)
	for _, tc := range []struct {
		name        string
		args        []string
		env         map[string]string
		wantIgnored []string
		wantErr     []string
		wantLevel   string
	}{
		{name: "none", wantLevel: "info"},
		{name: "a Flower UI and RabbitMQ command line",
			args: []string{"--auto_refresh=False", "--natural_time", "--tasks-columns", "name,uuid,state",
				"--broker_api=http://guest:guest@rabbit:15672/api/"},
			wantIgnored: []string{"auto_refresh", "natural_time", "tasks_columns", "broker_api"}, wantLevel: "info"},
		{name: "from the environment", env: map[string]string{"FLOWER_BROKER_API": "http://u:p@h/api/"},
			wantIgnored: []string{"broker_api"}, wantLevel: "info"},
		{name: "a Flower configuration file", args: []string{"--conf=flowerconfig.py"},
			wantErr: []string{"--conf: stamen does not read Flower's Python configuration file"}},
		{name: "debug", args: []string{"--debug"}, wantLevel: "debug"},
		{name: "debug from the environment", env: map[string]string{"FLOWER_DEBUG": "yes"}, wantLevel: "debug"},
		{name: "debug does not override --logging", args: []string{"--debug", "--logging=warn"}, wantLevel: "warn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			o, err := parseFlags(tc.args, io.Discard)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatal("accepted")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(o.flowerIgnored) != fmt.Sprint(tc.wantIgnored) {
				t.Errorf("ignored %q, want %q", o.flowerIgnored, tc.wantIgnored)
			}
			if o.logLevel != tc.wantLevel {
				t.Errorf("level %q, want %q", o.logLevel, tc.wantLevel)
			}
		})
	}
}

// TestFlowerCommandLineRuns runs the binary with a Flower deployment's
// options: it serves, names each ignored option in its log without its
// value (broker_api's holds a password), and logs at debug level.
func TestFlowerCommandLineRuns(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	unsetFlowerOnlyEnv(t)
	bin := buildBinary(t)
	const apiPassword = "mgmt-S3cret-pw"
	_, logs, stop := runStamen(t, bin, "--broker_api=http://admin:"+apiPassword+"@rabbit:15672/api/",
		"--auto_refresh=False", "--natural_time", "--tasks_columns=name,uuid", "--debug")
	if err := stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, logs.String())
	}
	out := logs.String()
	for _, name := range []string{"broker_api", "auto_refresh", "natural_time", "tasks_columns"} {
		if !strings.Contains(out, `msg="Flower's option ignored" option=--`+name+" ") {
			t.Errorf("the log does not name --%s as ignored:\n%s", name, out)
		}
	}
	if strings.Contains(out, apiPassword) || strings.Contains(out, "rabbit:15672") {
		t.Errorf("the log shows --broker_api's value:\n%s", out)
	}
	if !strings.Contains(out, "level=DEBUG") {
		t.Errorf("--debug: no debug line in the log:\n%s", out)
	}
}
