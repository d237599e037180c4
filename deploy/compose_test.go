package deploy

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestComposeFiles: each Compose example has the services it promises,
// stamen in each is the repository's image, run read-only with the store
// in a volume (or PostgreSQL), and configured by Flower's variables, every
// one of which stamen reads; the fleet has two replicas on one PostgreSQL
// behind a load balancer that checks /readyz. Where `docker compose` is
// available, `docker compose config` accepts every file.
func TestComposeFiles(t *testing.T) {
	for _, c := range []struct {
		file     string
		services []string
		broker   string
		stamens  []string
	}{
		{"redis.yaml", []string{"redis", "worker", "stamen"}, "redis://redis:6379/0", []string{"stamen"}},
		{"rabbitmq.yaml", []string{"rabbitmq", "redis", "worker", "stamen"}, "amqp://guest:guest@rabbitmq:5672//", []string{"stamen"}},
		{"fleet.yaml", []string{"redis", "postgres", "worker", "stamen-1", "stamen-2", "lb"}, "redis://redis:6379/0", []string{"stamen-1", "stamen-2"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			raw, err := os.ReadFile("compose/" + c.file)
			if err != nil {
				t.Fatal(err)
			}
			var f struct {
				Services map[string]struct {
					Image       string            `yaml:"image"`
					Build       string            `yaml:"build"`
					Environment map[string]string `yaml:"environment"`
					ReadOnly    bool              `yaml:"read_only"`
					Volumes     []string          `yaml:"volumes"`
					Ports       []string          `yaml:"ports"`
				} `yaml:"services"`
			}
			if err := yaml.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			var names []string
			for n := range f.Services {
				names = append(names, n)
			}
			slices.Sort(names)
			want := slices.Clone(c.services)
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Fatalf("services %v, want %v", names, want)
			}
			w := f.Services["worker"]
			if w.Build != "./worker" || w.Environment["CELERY_BROKER_URL"] != c.broker {
				t.Errorf("worker: build %q, broker %q", w.Build, w.Environment["CELERY_BROKER_URL"])
			}
			for _, n := range c.stamens {
				s := f.Services[n]
				if s.Image != "stamen:latest" || s.Build != "../.." || !s.ReadOnly {
					t.Errorf("%s: image %q, build %q, read_only %v", n, s.Image, s.Build, s.ReadOnly)
				}
				if s.Environment["CELERY_BROKER_URL"] != c.broker || s.Environment["FLOWER_BASIC_AUTH"] == "" {
					t.Errorf("%s: environment %v", n, s.Environment)
				}
				fleet := len(c.stamens) > 1
				if db := s.Environment["FLOWER_DB"]; fleet != strings.HasPrefix(db, "postgres://") {
					t.Errorf("%s: FLOWER_DB=%q", n, db)
				}
				if !fleet && !slices.Contains(s.Volumes, "stamen-data:/data") {
					t.Errorf("%s: the store's volume is not mounted on /data: %v", n, s.Volumes)
				}
			}
			checkSettingNames(t, c.file, string(raw))
		})
	}
	cfg, err := os.ReadFile("compose/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"option httpchk GET /readyz", "server stamen-1 stamen-1:5555", "server stamen-2 stamen-2:5555"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("haproxy.cfg lacks %q", want)
		}
	}
	if out, err := exec.Command("docker", "compose", "version").CombinedOutput(); err != nil {
		t.Logf("docker compose is not available (%v: %s): the files were checked as YAML only", err, strings.TrimSpace(string(out)))
		return
	}
	for _, f := range []string{"redis.yaml", "rabbitmq.yaml", "fleet.yaml"} {
		if out, err := exec.Command("docker", "compose", "-f", "compose/"+f, "config", "--quiet").CombinedOutput(); err != nil {
			t.Errorf("docker compose config %s: %v\n%s", f, err, out)
		}
	}
}
