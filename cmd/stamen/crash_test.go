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
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

const crashDB = 7

// succeededTask is task i's received, started and succeeded events.
func succeededTask(i int) []byte {
	return testcluster.SucceededTaskEnvelope(fmt.Sprintf("00000000-0000-4000-9000-%012d", i), "crash.add", "crash@h", i)
}

func startStamen(t *testing.T, bin string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	return startStamenEnv(t, bin, nil, args...)
}

// startStamenEnv is startStamen with extra environment variables (KEY=VALUE).
func startStamenEnv(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(bin, append(args, "--port", fmt.Sprint(port))...)
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if resp, err := http.Get(base + "/healthcheck"); err == nil {
			resp.Body.Close()
			return cmd, base
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("stamen did not answer /healthcheck")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func taskIDs(t *testing.T, base string) map[string]bool {
	t.Helper()
	resp, err := http.Get(base + "/api/tasks?taskname=crash.add")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	ids := map[string]bool{}
	for id := range m {
		ids[id] = true
	}
	return ids
}

// TestKillDuringIngestion kills stamen with SIGKILL while events pour in:
// after a restart every task flushed before the kill is served, and the
// store opens cleanly.
func TestKillDuringIngestion(t *testing.T) {
	testcluster.RequireRedis(t)
	testcluster.FlushRedisDB(t, crashDB)
	bin := buildBinary(t)
	db := filepath.Join(t.TempDir(), "stamen.db")
	args := []string{"--broker", testcluster.RedisURL(crashDB), "--persistent", "--db", db, "--state_save_interval", "200"}
	rdb := goredis.NewClient(&goredis.Options{Addr: testcluster.RedisAddr(), DB: crashDB})
	defer rdb.Close()
	channel := fmt.Sprintf("/%d.celeryev/task.multi", crashDB)
	ctx := context.Background()

	cmd, base := startStamen(t, bin, args...)
	testcluster.PublishUntil(t, rdb, channel, succeededTask(0), func() bool {
		return taskIDs(t, base)["00000000-0000-4000-9000-000000000000"]
	})
	const flushed = 300
	for i := 1; i < flushed; i++ {
		if err := rdb.Publish(ctx, channel, succeededTask(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(taskIDs(t, base)) < flushed {
		if time.Now().After(deadline) {
			t.Fatalf("ingested %d of %d", len(taskIDs(t, base)), flushed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * 200 * time.Millisecond) // past two flush intervals

	// Keep publishing while the process is killed.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := flushed; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = rdb.Publish(ctx, channel, succeededTask(i)).Err()
		}
	}()
	time.Sleep(150 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	close(stop)
	<-done

	cmd2, base2 := startStamen(t, bin, args...)
	defer func() { _ = cmd2.Process.Signal(syscall.SIGTERM); _ = cmd2.Wait() }()
	ids := taskIDs(t, base2)
	for i := range flushed {
		if id := fmt.Sprintf("00000000-0000-4000-9000-%012d", i); !ids[id] {
			t.Fatalf("task %s, flushed before the kill, is missing after the restart (%d restored)", id, len(ids))
		}
	}
	t.Logf("%d tasks restored after SIGKILL (%d flushed before it)", len(ids), flushed)
}
