package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// SentinelMaster is the service name the sentinels of StartSentinel
// monitor (Celery's master_name).
const SentinelMaster = "stamenmaster"

// Sentinel is a Redis Sentinel setup of its own: a master, a replica of it
// and one sentinel (quorum 1, a master is down after a second), each on a
// free loopback port with its files in a temporary directory. Master,
// replica and sentinel require Password.
type Sentinel struct {
	Master, Replica *Redis
	// Port is the sentinel's; DeadPort a port nothing listens on.
	Port, DeadPort int
	Password       string

	t       testing.TB
	dir     string
	cmd     *exec.Cmd
	clients map[int]*goredis.Client
}

// StartSentinel starts the setup and returns once the sentinel knows the
// replica (so that it can promote it); a cleanup registered on t stops it.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	if _, err := exec.LookPath("redis-sentinel"); err != nil {
		t.Fatalf("testcluster: redis-sentinel not found (scripts/services.sh installs Debian's redis-sentinel): %v", err)
	}
	s := &Sentinel{t: t, Password: "sentinel-" + randomHex(8), dir: t.TempDir(), clients: map[int]*goredis.Client{}}
	auth := []string{"--requirepass", s.Password, "--masterauth", s.Password}
	s.Master = &Redis{t: t, Port: FreePort(t), dir: t.TempDir(), args: auth}
	s.Master.Start()
	t.Cleanup(s.Master.Stop)
	s.Replica = &Redis{t: t, Port: FreePort(t), dir: t.TempDir(),
		args: append([]string{"--replicaof", "127.0.0.1", fmt.Sprint(s.Master.Port)}, auth...)}
	s.Replica.Start()
	t.Cleanup(s.Replica.Stop)
	s.DeadPort = FreePort(t)
	s.waitFor(20*time.Second, "the replica to sync", func(ctx context.Context) bool {
		info, err := s.client(s.Replica.Port).Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})

	s.Port = FreePort(t)
	conf := filepath.Join(s.dir, "sentinel.conf")
	body := strings.Join([]string{
		"port " + fmt.Sprint(s.Port),
		"bind 127.0.0.1",
		"daemonize no",
		"dir " + s.dir,
		"logfile " + filepath.Join(s.dir, "sentinel.log"),
		"requirepass " + s.Password,
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", SentinelMaster, s.Master.Port),
		fmt.Sprintf("sentinel auth-pass %s %s", SentinelMaster, s.Password),
		fmt.Sprintf("sentinel down-after-milliseconds %s 1000", SentinelMaster),
		fmt.Sprintf("sentinel failover-timeout %s 5000", SentinelMaster),
		fmt.Sprintf("sentinel parallel-syncs %s 1", SentinelMaster),
		"",
	}, "\n")
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command("redis-sentinel", conf)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("testcluster: start redis-sentinel: %v", err)
	}
	t.Cleanup(s.stop)
	s.waitFor(20*time.Second, "the sentinel to know the replica", func(ctx context.Context) bool {
		replicas, err := s.client(s.Port).Do(ctx, "SENTINEL", "REPLICAS", SentinelMaster).Slice()
		return err == nil && len(replicas) == 1
	})
	return s
}

// URL is the sentinel:// URL of database db, with the master's password,
// listing first a sentinel that is not there (as a client must skip it),
// then the live one.
func (s *Sentinel) URL(db int) string {
	return fmt.Sprintf("sentinel://:%s@127.0.0.1:%d/%d;sentinel://:%s@127.0.0.1:%d/%d",
		s.Password, s.DeadPort, db, s.Password, s.Port, db)
}

// TransportOptions is the JSON of the transport options a client needs:
// master_name, and the sentinels' password in sentinel_kwargs.
func (s *Sentinel) TransportOptions() string {
	return fmt.Sprintf(`{"master_name": %q, "sentinel_kwargs": {"password": %q}}`, SentinelMaster, s.Password)
}

// KillMaster kills the master (SIGKILL) and waits until the sentinel has
// promoted the replica (30 s at most).
func (s *Sentinel) KillMaster() {
	s.t.Helper()
	s.Master.Stop()
	s.waitFor(30*time.Second, "the sentinel to promote the replica", func(ctx context.Context) bool {
		addr, err := s.client(s.Port).Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster).StringSlice()
		if err != nil || len(addr) != 2 || addr[1] != fmt.Sprint(s.Replica.Port) {
			return false
		}
		role, err := s.client(s.Replica.Port).Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
}

// client is a one-connection client of the server on port, with the
// setup's password.
func (s *Sentinel) client(port int) *goredis.Client {
	if c, ok := s.clients[port]; ok {
		return c
	}
	c := goredis.NewClient(&goredis.Options{Addr: net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), Password: s.Password,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, PoolSize: 1, MaxRetries: -1})
	s.clients[port] = c
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitFor polls cond every 100 ms until it holds, failing the test after d.
func (s *Sentinel) waitFor(d time.Duration, what string, cond func(context.Context) bool) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ok := cond(ctx)
		cancel()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "sentinel.log"))
			s.t.Fatalf("testcluster: waited %s for %s; sentinel log:\n%s", d, what, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Sentinel) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}
