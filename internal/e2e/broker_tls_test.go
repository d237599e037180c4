package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/brokertls"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// tlsCerts are the certificates of one TLS test: the broker's and a
// client's, signed by one CA, and a client's signed by another (whose CA
// file is the one a misconfigured client would trust).
type tlsCerts struct {
	server, client, stranger testcluster.CertFiles
}

func newTLSCerts(t *testing.T) tlsCerts {
	t.Helper()
	ca := testcluster.NewCA(t, "stamen test broker CA")
	return tlsCerts{
		server:   ca.Issue(t, "broker"),
		client:   ca.Issue(t, "client"),
		stranger: testcluster.NewCA(t, "stranger CA").Issue(t, "stranger"),
	}
}

// useSSL is broker_use_ssl as the operator writes it, parsed as
// cmd/stamen parses --broker_use_ssl.
func useSSL(t *testing.T, kind brokertls.Kind, opts map[string]any) *brokertls.Settings {
	t.Helper()
	raw, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := brokertls.Parse(string(raw), kind)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// childProcesses counts the processes whose parent is pid: a prefork
// worker's pool, as the kernel sees it.
func childProcesses(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			n++
		}
	}
	return n
}

// checkTLSCluster asserts what stamen does for an operator over a TLS
// broker: it sees the worker through its events and inspection, a pool
// grow it sends reaches the worker (one more pool process, counted by the
// kernel), and a task it sends runs and its result is read back.
func checkTLSCluster(t *testing.T, c *api, w *testcluster.Worker, queue string) {
	t.Helper()
	c.awaitWorkerReady(w.Name)

	before := childProcesses(t, w.Pid())
	c.mustOK(c.post("/api/worker/pool/grow/"+pathEscape(w.Name), q("n", "1"), nil))
	eventually(t, 20*time.Second, "the worker's pool grown by one process", func() bool {
		return childProcesses(t, w.Pid()) == before+1
	})

	body := map[string]any{"args": []int{20, 22}}
	if queue != "" {
		body["queue"] = queue
	}
	id := fmt.Sprint(c.mustOK(c.post("/api/task/async-apply/stamen.add", nil, body))["task-id"])
	eventually(t, 30*time.Second, "the task's success event", func() bool { return c.taskState(id) == "SUCCESS" })
	if r := c.mustOK(c.get("/api/task/result/"+id, q("timeout", "10"))); r["result"] != float64(42) {
		t.Errorf("result of stamen.add(20, 22): %v", r)
	}
}

// refused checks that app.New fails at start, saying why in words an
// operator can act on, without a secret or a file's contents.
func refused(t *testing.T, cfg app.Config, want string, secrets ...string) {
	t.Helper()
	cfg.BrokerTimeout = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg)
	if err == nil {
		a.Close()
		t.Fatalf("stamen started; want a refusal saying %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want one saying %q", err, want)
	}
	for _, s := range append(secrets, "BEGIN") {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error shows %q: %v", s, err)
		}
	}
	t.Logf("refused: %v", err)
}

// TestRedisBrokerTLS runs a private Redis that speaks TLS only and
// requires client certificates (tls-auth-clients yes), a real Celery
// worker on it with Celery's rediss:// ssl_* parameters, and stamen with
// --broker_use_ssl's redis-py keys on a bare rediss:// URL, its result
// backend being the broker's URL. Then the refusals: a CA that did not
// sign Redis' certificate, and no client certificate.
func TestRedisBrokerTLS(t *testing.T) {
	testcluster.Require(t)
	certs := newTLSCerts(t)
	r := testcluster.StartRedisTLS(t, certs.server)
	workerURL := r.TLSURL(0, certs.client)
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "redis-tls", Broker: workerURL, Backend: workerURL})

	bare := fmt.Sprintf("rediss://127.0.0.1:%d/0", r.Port)
	_, c := serveApp(t, app.Config{
		BrokerURL: bare,
		BrokerUseSSL: useSSL(t, brokertls.Redis, map[string]any{
			"ssl_ca_certs": certs.client.CA, "ssl_certfile": certs.client.Cert, "ssl_keyfile": certs.client.Key,
			"ssl_cert_reqs": "CERT_REQUIRED",
		}),
		InspectTimeout: 2 * time.Second, BrokerTimeout: 3 * time.Second, ApplyTimeout: 10 * time.Second,
	})
	checkTLSCluster(t, c, w, "")

	t.Run("a CA that did not sign the server's certificate", func(t *testing.T) {
		// The URL's own parameters, as Celery users write them.
		refused(t, app.Config{BrokerURL: r.TLSURL(0, certs.stranger)}, "certificate signed by unknown authority")
	})
	t.Run("no client certificate", func(t *testing.T) {
		refused(t, app.Config{BrokerURL: bare,
			BrokerUseSSL: useSSL(t, brokertls.Redis, map[string]any{"ssl_ca_certs": certs.client.CA})},
			"certificate required")
	})
}

// TestAMQPBrokerTLS puts a TLS terminator requiring client certificates
// in front of the shared RabbitMQ (left as it is) and runs stamen through
// it with amqps:// and --broker_use_ssl's py-amqp keys, while a real
// Celery worker connects to RabbitMQ directly. Then the refusals, through
// the same terminator.
func TestAMQPBrokerTLS(t *testing.T) {
	testcluster.Require(t)
	certs := newTLSCerts(t)
	proxy := testcluster.StartTLSProxy(t, "127.0.0.1:5672", certs.server)

	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	queue := "tls-" + hex.EncodeToString(suffix)
	// Registered before the worker starts, so that it runs after the
	// worker has stopped.
	t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, amqpVhost, queue) })
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{
		Name: "amqp-tls", Broker: testcluster.AMQPURL(amqpVhost), Backend: "rpc://", Queues: []string{queue},
	})

	// guest's password is "guest": no error may hold "guest:guest".
	amqps := fmt.Sprintf("amqps://guest:guest@%s/%s", proxy.Addr(), amqpVhost)
	useClient := useSSL(t, brokertls.AMQP, map[string]any{
		"ca_certs": certs.client.CA, "certfile": certs.client.Cert, "keyfile": certs.client.Key,
		"cert_reqs": "CERT_REQUIRED",
	})
	_, c := serveApp(t, app.Config{
		BrokerURL: amqps, ResultBackend: "rpc://", BrokerUseSSL: useClient,
		InspectTimeout: 2 * time.Second, BrokerTimeout: 3 * time.Second, ApplyTimeout: 10 * time.Second,
	})
	checkTLSCluster(t, c, w, queue)

	t.Run("amqp:// with broker_use_ssl speaks TLS, as kombu does", func(t *testing.T) {
		a, err := app.New(context.Background(), app.Config{
			BrokerURL: strings.Replace(amqps, "amqps://", "amqp://", 1), ResultBackend: "rpc://",
			BrokerUseSSL: useClient, BrokerTimeout: 3 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if b, ok := a.Broker().(interface{ Connected() bool }); !ok || !b.Connected() {
			t.Errorf("not connected through the TLS terminator")
		}
	})
	t.Run("a CA that did not sign the server's certificate", func(t *testing.T) {
		refused(t, app.Config{BrokerURL: amqps, ResultBackend: "rpc://",
			BrokerUseSSL: useSSL(t, brokertls.AMQP, map[string]any{
				"ca_certs": certs.stranger.CA, "certfile": certs.client.Cert, "keyfile": certs.client.Key,
			})},
			"certificate signed by unknown authority", "guest:guest")
	})
	t.Run("no client certificate", func(t *testing.T) {
		refused(t, app.Config{BrokerURL: amqps, ResultBackend: "rpc://",
			BrokerUseSSL: useSSL(t, brokertls.AMQP, map[string]any{"ca_certs": certs.client.CA})},
			"certificate required", "guest:guest")
	})
}
