package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// imageDB is the Redis database of TestImageRunsAgainstRedis.
const imageDB = 4

// TestImageRunsAgainstRedis builds the image for this machine's
// architecture with this command (no container engine), checks its
// configuration and size, and runs it the way a cluster runs it: unpacked
// by umoci into an OCI bundle and started by runc, as the image's
// non-root user, with a read-only root filesystem, the volume /data bound
// to a directory of the host, configured by Flower's environment variables
// only (CELERY_BROKER_URL, FLOWER_BASIC_AUTH, FLOWER_PORT). Against the
// real Redis and a real Celery worker, /readyz turns 200, a task sent
// through the API shows in /api/tasks as succeeded, and after a restart
// of the container, with the worker gone, the task is still there: read
// from the store in the volume. Without runc or umoci the test fails: it
// has no other way to show the image works (scripts/services.sh installs
// both).
func TestImageRunsAgainstRedis(t *testing.T) {
	testcluster.RequireRedis(t)
	for _, tool := range []string{"runc", "umoci"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (scripts/services.sh installs it from Debian): the image cannot be run: %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("runc runs the image as root here (rootless runc needs user namespaces set up for it)")
	}
	testcluster.FlushRedisDB(t, imageDB)
	dir := t.TempDir()
	out := filepath.Join(dir, "layout")
	// The module root: go build runs there.
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	if err := build(out, []string{"linux/" + runtime.GOARCH}, map[string]string{"version": "v0.0.0-test"}, "stamen:test", "", "/etc/ssl/certs/ca-certificates.crt"); err != nil {
		t.Fatalf("build the image: %v", err)
	}
	checkImage(t, out)

	bundle := filepath.Join(dir, "bundle")
	if b, err := exec.Command("umoci", "unpack", "--image", out+":test-"+runtime.GOARCH, bundle).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack: %v\n%s", err, b)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, uid, gid); err != nil {
		t.Fatal(err)
	}
	port := testcluster.FreePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	configure(t, bundle, data, []string{
		"CELERY_BROKER_URL=" + testcluster.RedisURL(imageDB),
		"FLOWER_BASIC_AUTH=admin:s3cret",
		fmt.Sprintf("FLOWER_PORT=%d", port),
	})

	c := startContainer(t, bundle, "stamen-image-test-1")
	waitReady(t, base)
	if uidOf(t, c.pid()) != fmt.Sprint(uid) {
		t.Fatalf("the container's process runs as uid %s, want %d", uidOf(t, c.pid()), uid)
	}
	if code, body := call(t, "GET", base+"/metrics", ""); code != 200 || !strings.Contains(body, `version="v0.0.0-test"`) {
		t.Fatalf("the image's stamen_build_info does not carry the version stamped: %d", code)
	}
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "image", Broker: testcluster.RedisURL(imageDB)})
	code, body := call(t, "POST", base+"/api/task/async-apply/stamen.add", `{"args": [20, 22]}`)
	if code != 200 {
		t.Fatalf("async-apply: %d %s", code, body)
	}
	var sent struct {
		TaskID string `json:"task-id"`
	}
	if err := json.Unmarshal([]byte(body), &sent); err != nil || sent.TaskID == "" {
		t.Fatalf("async-apply answered %s", body)
	}
	succeeded := func() bool {
		code, body := call(t, "GET", base+"/api/tasks", "")
		var tasks map[string]struct {
			State  string `json:"state"`
			Result string `json:"result"`
		}
		return code == 200 && json.Unmarshal([]byte(body), &tasks) == nil &&
			tasks[sent.TaskID].State == "SUCCESS" && tasks[sent.TaskID].Result == "42"
	}
	testcluster.Eventually(t, 30*time.Second, "the task sent through the container shows as succeeded in /api/tasks", succeeded)
	w.Stop()

	c.stop(t)
	if _, err := os.Stat(filepath.Join(data, "stamen.db")); err != nil {
		t.Fatalf("no store in the volume: %v", err)
	}
	startContainer(t, bundle, "stamen-image-test-2")
	waitReady(t, base)
	if !succeeded() {
		t.Fatal("after a restart the task is not in /api/tasks: the store did not survive in the volume")
	}
}

// checkImage checks the layout's image: its configuration says what the
// Dockerfile says, and it is small.
func checkImage(t *testing.T, out string) {
	t.Helper()
	p, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, d := range m.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] != "test-"+runtime.GOARCH {
			continue
		}
		found = true
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != fmt.Sprintf("%d:%d", uid, gid) || cf.Architecture != runtime.GOARCH {
			t.Errorf("user %q, architecture %q", cf.Config.User, cf.Architecture)
		}
		if _, ok := cf.Config.ExposedPorts["5555/tcp"]; !ok {
			t.Errorf("5555 not exposed: %v", cf.Config.ExposedPorts)
		}
		if _, ok := cf.Config.Volumes["/data"]; !ok {
			t.Errorf("no /data volume: %v", cf.Config.Volumes)
		}
		size, err := img.Size()
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		var compressed int64
		for _, l := range layers {
			n, err := l.Size()
			if err != nil {
				t.Fatal(err)
			}
			compressed += n
		}
		t.Logf("image: %d layer bytes compressed (manifest %d bytes)", compressed, size)
		if compressed >= 25<<20 {
			t.Errorf("image is %d bytes compressed, want under 25 MiB", compressed)
		}
	}
	if !found {
		t.Fatalf("no image tagged test-%s in the layout", runtime.GOARCH)
	}
}

// configure makes umoci's runtime configuration the one a cluster gives:
// the host's network (the test reaches the port, the container reaches
// Redis on loopback), a read-only root, the volume bound to data, env
// added, no terminal.
func configure(t *testing.T, bundle, data string, env []string) {
	t.Helper()
	path := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	proc := c["process"].(map[string]any)
	proc["terminal"] = false
	for _, e := range env {
		proc["env"] = append(proc["env"].([]any), e)
	}
	c["root"].(map[string]any)["readonly"] = true
	var mounts []any
	for _, m := range c["mounts"].([]any) {
		if m.(map[string]any)["destination"] != "/data" {
			mounts = append(mounts, m)
		}
	}
	c["mounts"] = append(mounts, map[string]any{"destination": "/data", "type": "bind", "source": data, "options": []string{"rbind", "rw"}})
	linux := c["linux"].(map[string]any)
	var ns []any
	for _, n := range linux["namespaces"].([]any) {
		if n.(map[string]any)["type"] != "network" {
			ns = append(ns, n)
		}
	}
	linux["namespaces"] = ns
	raw, err = json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

type container struct {
	id   string
	cmd  *exec.Cmd
	done chan struct{}
	log  *strings.Builder
}

// startContainer runs the bundle with runc in the foreground of a child
// process; a cleanup kills and deletes it.
func startContainer(t *testing.T, bundle, id string) *container {
	t.Helper()
	_ = exec.Command("runc", "delete", "--force", id).Run()
	c := &container{id: id, done: make(chan struct{}), log: &strings.Builder{}}
	c.cmd = exec.Command("runc", "run", "--bundle", bundle, id)
	lw := &lockedWriter{b: c.log}
	c.cmd.Stdout, c.cmd.Stderr = lw, lw
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("runc run: %v", err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.stop(t)
		if t.Failed() {
			t.Logf("container %s's output:\n%s", id, c.log.String())
		}
	})
	return c
}

// stop ends the container as a cluster does: SIGTERM, then after a grace
// period SIGKILL; the store is flushed on SIGTERM.
func (c *container) stop(t *testing.T) {
	select {
	case <-c.done:
	default:
		_ = exec.Command("runc", "kill", c.id, "TERM").Run()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = exec.Command("runc", "kill", c.id, "KILL").Run()
			<-c.done
		}
	}
	_ = exec.Command("runc", "delete", "--force", c.id).Run()
}

func (c *container) pid() int {
	out, err := exec.Command("runc", "state", c.id).Output()
	if err != nil {
		return 0
	}
	var s struct {
		Pid int `json:"pid"`
	}
	_ = json.Unmarshal(out, &s)
	return s.Pid
}

// uidOf is the real uid of a process, from /proc.
func uidOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return ""
}

func waitReady(t *testing.T, base string) {
	t.Helper()
	testcluster.Eventually(t, 30*time.Second, "the container's /readyz answers 200", func() bool {
		code, _ := call(t, "GET", base+"/readyz", "")
		return code == 200
	})
}

// call sends a request with the credentials FLOWER_BASIC_AUTH gave; a
// connection refused is status 0.
func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("admin", "s3cret")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// lockedWriter lets runc's stdout and stderr share one log.
type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
