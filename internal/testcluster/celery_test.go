package testcluster

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCeleryEnv(t *testing.T) {
	t.Setenv("STAMEN_CELERY_CACHE", "/nonexistent-cache")
	for _, v := range []string{"", Celery52} {
		if env, err := celeryEnv(v); err != nil || env != nil {
			t.Errorf("celeryEnv(%q) = %v, %v; want the system's Celery (no extra env)", v, env, err)
		}
	}
	if _, err := celeryEnv(Celery56); err == nil || !strings.Contains(err.Error(), "/nonexistent-cache/5.6/") || !strings.Contains(err.Error(), "celery-versions.sh") {
		t.Errorf("celeryEnv(5.6) on an empty cache: %v; want an error naming the directory and the script", err)
	}
	if _, err := celeryEnv("4.4"); err == nil {
		t.Error("celeryEnv(4.4): no error")
	}
}

func TestBannerVersion(t *testing.T) {
	for line, want := range map[string]string{
		" -------------- w1-0a1b2c@host v5.6.3 (recovery)":      "5.6.3",
		" -------------- w1-0a1b2c@host v5.2.6 (dawn-chorus)":   "5.2.6",
		"--- ***** ----- celery@my.host v5.5.2 (immunity)":      "5.5.2",
		" -------------- w1-0a1b2c@host v5.6.0rc1 (recovery)":   "5.6.0rc1",
		"[config] .> app:         stamen_testapp:0x7f0 (5.6.3)": "",
	} {
		got := ""
		if m := bannerVersion.FindStringSubmatch(line); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("%q: got %q, want %q", line, got, want)
		}
	}
}

// TestCeleryVersionWorkers starts a worker of each newer Celery release on a
// private Redis and checks, with a client of the same release, that it
// answers a ping, reports that release itself (inspect report) and runs a
// task.
func TestCeleryVersionWorkers(t *testing.T) {
	t.Parallel()
	for _, v := range []string{Celery55, Celery56} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			RequireCelery(t, v)
			r := StartRedis(t)
			w := StartWorker(t, WorkerOptions{Name: "tc-" + strings.ReplaceAll(v, ".", ""), Broker: r.URL(0), Backend: r.URL(1), Celery: v})
			if !strings.HasPrefix(w.CeleryRelease, v+".") {
				t.Fatalf("CeleryRelease %q, want %s.x", w.CeleryRelease, v)
			}
			out := RunClient(t, ClientOptions{Celery: v, Broker: w.Broker, Backend: w.Backend}, `
import json, sys, celery
from stamen_testapp import app
node = sys.argv[1]
ping = app.control.ping(destination=[node], timeout=5)
report = app.control.inspect([node], timeout=5).report() or {}
added = app.send_task("stamen.add", args=(2, 3)).get(timeout=20)
print(json.dumps({"client": celery.__version__, "ping": ping, "report": report.get(node, {}).get("ok", ""), "add": added}))
`, w.Name)
			var got struct {
				Client string                         `json:"client"`
				Ping   []map[string]map[string]string `json:"ping"`
				Report string                         `json:"report"`
				Add    int                            `json:"add"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("client output %q: %v", out, err)
			}
			if got.Client != w.CeleryRelease {
				t.Errorf("client runs Celery %s, want %s", got.Client, w.CeleryRelease)
			}
			if len(got.Ping) != 1 || got.Ping[0][w.Name]["ok"] != "pong" {
				t.Errorf("ping replies %v, want one pong from %s", got.Ping, w.Name)
			}
			if !strings.Contains(got.Report, "celery:"+w.CeleryRelease+" ") {
				t.Errorf("worker's report does not say celery:%s:\n%s", w.CeleryRelease, got.Report)
			}
			if got.Add != 5 {
				t.Errorf("stamen.add(2, 3) = %d", got.Add)
			}
		})
	}
}
