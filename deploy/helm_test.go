package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

const chart = "helm/stamen"

// render runs helm template on the chart with args and returns the
// manifests by kind.
func render(t *testing.T, args ...string) (map[string][]map[string]any, error) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out, err := goRun(t, helmModule, nil, append([]string{"template", "rel", dir + "/" + chart}, args...)...)
	if err != nil {
		return nil, errors.New(out)
	}
	byKind := map[string][]map[string]any{}
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template's output is not YAML: %v\n%s", err, out)
		}
		if doc == nil {
			continue
		}
		kind, _ := doc["kind"].(string)
		byKind[kind] = append(byKind[kind], doc)
	}
	return byKind, nil
}

// dig walks a parsed manifest by keys and list indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// TestHelmChart: helm lint passes, and helm template renders for the
// default values and for a fleet (two replicas on PostgreSQL, with the
// ServiceMonitor, the PrometheusRule, the dashboard, an Ingress under a
// URL prefix). The Deployment probes /healthcheck (liveness) and /readyz
// (readiness), runs non-root on a read-only root, takes the broker URL,
// the database URL and the credentials from Secrets only; the fleet has
// its PodDisruptionBudget; a fleet without a database, or without a
// broker Secret, is refused.
func TestHelmChart(t *testing.T) {
	testcluster.SkipIfShort(t, "helm runs as a Go module (minutes to build on a cold cache)")
	dir, _ := os.Getwd()
	if out, err := goRun(t, helmModule, nil, "lint", "--strict", dir+"/"+chart); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	def, err := render(t)
	if err != nil {
		t.Fatalf("helm template with the default values: %v", err)
	}
	checkDeployment(t, "defaults", def, "", 1)
	if len(def["PodDisruptionBudget"]) != 0 {
		t.Error("one replica has a PodDisruptionBudget: it would block every drain")
	}

	fleet, err := render(t, "--set", "replicaCount=2", "--set", "database.existingSecret=stamen-db",
		"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true",
		"--set", "grafanaDashboard.enabled=true", "--set", "ingress.enabled=true", "--set", "urlPrefix=flower")
	if err != nil {
		t.Fatalf("helm template for a fleet: %v", err)
	}
	d := checkDeployment(t, "fleet", fleet, "/flower", 2)
	if !hasSecretEnv(d, "FLOWER_DB", "stamen-db", "database-url") {
		t.Error("the fleet's database URL does not come from its Secret")
	}
	pdbs := fleet["PodDisruptionBudget"]
	if len(pdbs) != 1 || dig(pdbs[0], "spec", "minAvailable") != 1 ||
		!reflect.DeepEqual(dig(pdbs[0], "spec", "selector", "matchLabels"), dig(d, "spec", "selector", "matchLabels")) {
		t.Errorf("the fleet's PodDisruptionBudget: %v", pdbs)
	}
	if ing := fleet["Ingress"]; len(ing) != 1 || dig(ing[0], "spec", "rules", 0, "http", "paths", 0, "path") != "/flower" {
		t.Errorf("the Ingress does not route the URL prefix: %v", ing)
	}
	if sm := fleet["ServiceMonitor"]; len(sm) != 1 || dig(sm[0], "spec", "endpoints", 0, "path") != "/flower/metrics" {
		t.Errorf("the ServiceMonitor does not scrape /flower/metrics: %v", sm)
	}
	checkRule(t, fleet["PrometheusRule"])
	checkDashboardConfigMap(t, fleet["ConfigMap"])

	for _, bad := range [][]string{
		{"--set", "replicaCount=2"},
		{"--set", "broker.existingSecret="},
		{"--set", "auth.existingSecret="},
	} {
		if _, err := render(t, bad...); err == nil || !strings.Contains(err.Error(), "required") {
			t.Errorf("helm template %v: want a refusal saying what is required, got %v", bad, err)
		}
	}
}

func checkDeployment(t *testing.T, what string, m map[string][]map[string]any, prefix string, replicas int) map[string]any {
	t.Helper()
	if len(m["Secret"]) != 0 {
		t.Errorf("%s: the chart renders a Secret: its values would be in the values, in clear", what)
	}
	deps := m["Deployment"]
	if len(deps) != 1 {
		t.Fatalf("%s: %d Deployments", what, len(deps))
	}
	d := deps[0]
	if dig(d, "spec", "replicas") != replicas {
		t.Errorf("%s: replicas %v, want %d", what, dig(d, "spec", "replicas"), replicas)
	}
	c := dig(d, "spec", "template", "spec", "containers", 0)
	if p := dig(c, "livenessProbe", "httpGet", "path"); p != prefix+"/healthcheck" {
		t.Errorf("%s: liveness probe on %v, want %s/healthcheck", what, p, prefix)
	}
	if p := dig(c, "readinessProbe", "httpGet", "path"); p != prefix+"/readyz" {
		t.Errorf("%s: readiness probe on %v, want %s/readyz", what, p, prefix)
	}
	for _, sc := range []any{dig(d, "spec", "template", "spec", "securityContext"), dig(c, "securityContext")} {
		if dig(sc, "runAsNonRoot") != true {
			t.Errorf("%s: securityContext without runAsNonRoot: %v", what, sc)
		}
	}
	if dig(c, "securityContext", "readOnlyRootFilesystem") != true || dig(c, "securityContext", "allowPrivilegeEscalation") != false {
		t.Errorf("%s: container securityContext %v", what, dig(c, "securityContext"))
	}
	if !hasSecretEnv(d, "CELERY_BROKER_URL", "stamen", "broker-url") || !hasSecretEnv(d, "FLOWER_BASIC_AUTH", "stamen", "basic-auth") {
		t.Errorf("%s: the broker URL and the credentials do not come from the Secret: %v", what, dig(c, "env"))
	}
	env, _ := dig(c, "env").([]any)
	var names strings.Builder
	for _, e := range env {
		name, _ := dig(e, "name").(string)
		names.WriteString(name + " ")
		v, literal := dig(e, "value").(string)
		if !literal {
			continue
		}
		secretish := strings.Contains(name, "AUTH") && name != "FLOWER_UNAUTHENTICATED_API" ||
			strings.Contains(name, "BROKER") || strings.Contains(name, "BACKEND") || name == "FLOWER_DB"
		if secretish || strings.Contains(v, "://") || strings.Contains(v, "@") {
			t.Errorf("%s: %s=%q is a value in clear", what, name, v)
		}
	}
	checkSettingNames(t, what+"'s Deployment", names.String())
	return d
}

func hasSecretEnv(d map[string]any, name, secret, key string) bool {
	env, _ := dig(d, "spec", "template", "spec", "containers", 0, "env").([]any)
	for _, e := range env {
		if dig(e, "name") == name {
			return dig(e, "valueFrom", "secretKeyRef", "name") == secret && dig(e, "valueFrom", "secretKeyRef", "key") == key
		}
	}
	return false
}

// checkRule: the PrometheusRule holds examples/prometheus/alerts.yml's
// groups, and the chart's copy of the file is that file.
func checkRule(t *testing.T, rules []map[string]any) {
	t.Helper()
	src, err := os.ReadFile("../examples/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if cp, err := os.ReadFile(chart + "/files/alerts.yml"); err != nil || !bytes.Equal(cp, src) {
		t.Errorf("%s/files/alerts.yml differs from examples/prometheus/alerts.yml (cp the one to the other): %v", chart, err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(src, &want); err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 || !reflect.DeepEqual(dig(rules[0], "spec", "groups"), want["groups"]) {
		t.Errorf("the PrometheusRule's groups are not examples/prometheus/alerts.yml's")
	}
}

// checkDashboardConfigMap: the ConfigMap provisions deploy/grafana's
// dashboard, and the chart's copy is that file.
func checkDashboardConfigMap(t *testing.T, cms []map[string]any) {
	t.Helper()
	src, err := os.ReadFile("grafana/stamen.json")
	if err != nil {
		t.Fatal(err)
	}
	if cp, err := os.ReadFile(chart + "/files/stamen.json"); err != nil || !bytes.Equal(cp, src) {
		t.Errorf("%s/files/stamen.json differs from deploy/grafana/stamen.json (cp the one to the other): %v", chart, err)
	}
	for _, cm := range cms {
		if dig(cm, "metadata", "labels", "grafana_dashboard") != "1" {
			continue
		}
		got, _ := dig(cm, "data", "stamen.json").(string)
		var a, b any
		if json.Unmarshal([]byte(got), &a) != nil || json.Unmarshal(src, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Error("the dashboard ConfigMap does not hold deploy/grafana/stamen.json")
		}
		return
	}
	t.Error("no ConfigMap labelled grafana_dashboard=1")
}
