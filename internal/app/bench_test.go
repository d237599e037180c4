package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// benchDB is the Redis database the benchmarks publish events on.
const benchDB = 9

// eventPayloads are tasks 0 to n-1's received, started and succeeded
// events, a message each.
func eventPayloads(n int) [][]byte {
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = testcluster.SucceededTaskEnvelope(fmt.Sprintf("00000000-0000-4000-8000-%012d", i), "bench.add", "bench@h", i)
	}
	return payloads
}

func benchRedis(b *testing.B) *goredis.Client {
	b.Helper()
	testcluster.RequireRedis(b)
	c := goredis.NewClient(&goredis.Options{Addr: testcluster.RedisAddr(), DB: benchDB})
	b.Cleanup(func() { c.Close() })
	return c
}

// publishAll publishes payloads with pipelining, as a busy cluster would,
// at most window messages ahead of consumed(): Redis disconnects a
// subscriber whose backlog passes its pub/sub output buffer limit, so an
// unthrottled publisher measures that limit, not a sustained rate.
func publishAll(b *testing.B, c *goredis.Client, channel string, payloads [][]byte, consumed func() int) {
	b.Helper()
	const batch, window = 500, 4000
	ctx := context.Background()
	for i := 0; i < len(payloads); i += batch {
		for i-consumed() > window {
			time.Sleep(50 * time.Microsecond)
		}
		pipe := c.Pipeline()
		for _, p := range payloads[i:min(i+batch, len(payloads))] {
			pipe.Publish(ctx, channel, p)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawPubSub measures what Redis pub/sub delivers to one plain
// go-redis subscriber on this machine: the ceiling for event ingestion.
func BenchmarkRawPubSub(b *testing.B) {
	c := benchRedis(b)
	channel := fmt.Sprintf("/%d.celeryev/task.multi", benchDB)
	payloads := eventPayloads(b.N)
	sub := c.Subscribe(context.Background(), channel)
	defer sub.Close()
	if _, err := sub.Receive(context.Background()); err != nil {
		b.Fatal(err)
	}
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		for range sub.Channel(goredis.WithChannelSize(100000)) {
			if got.Add(1) == int64(b.N) {
				close(done)
			}
		}
	}()
	cpu0 := processCPU(b)
	b.ResetTimer()
	publishAll(b, c, channel, payloads, func() int { return int(got.Load()) })
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		b.Fatalf("received %d of %d", got.Load(), b.N)
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/msg")
	b.ReportMetric(float64(b.N*3)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkIngest measures events published to Redis pub/sub until the
// state holds every task: decoding, the state machine, metrics.
func BenchmarkIngest(b *testing.B) {
	c := benchRedis(b)
	a := openApp(b, Config{BrokerURL: testcluster.RedisURL(benchDB), MaxTasks: b.N + 1})
	payloads := eventPayloads(b.N)
	channel := fmt.Sprintf("/%d.celeryev/task.multi", benchDB)
	// Subscribed before timing: the first task, until it is ingested (its
	// events, published again below, change nothing).
	testcluster.PublishUntil(b, c, channel, payloads[0], func() bool { return a.State.Len() > 0 })
	cpu0 := processCPU(b)
	b.ResetTimer()
	publishAll(b, c, channel, payloads, a.State.Len)
	deadline := time.Now().Add(60 * time.Second)
	for a.State.Len() < b.N {
		if time.Now().After(deadline) {
			b.Fatalf("state holds %d of %d tasks", a.State.Len(), b.N)
		}
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/msg")
	b.ReportMetric(float64(b.N*3)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkHTTP measures the read operations at 10,000 tasks through the
// whole HTTP stack (routing, validation, the handler, encoding).
func BenchmarkHTTP(b *testing.B) {
	c := benchRedis(b)
	a := openApp(b, Config{BrokerURL: testcluster.RedisURL(benchDB), MaxTasks: 20000})
	const n = 10000
	payloads := eventPayloads(n)
	channel := fmt.Sprintf("/%d.celeryev/task.multi", benchDB)
	testcluster.PublishUntil(b, c, channel, payloads[0], func() bool { return a.State.Len() > 0 })
	publishAll(b, c, channel, payloads, a.State.Len)
	for a.State.Len() < n {
		time.Sleep(10 * time.Millisecond)
	}
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()
	for _, path := range []string{
		"/api/tasks?limit=100",
		"/api/tasks?limit=100&state=SUCCESS",
		"/api/tasks?limit=100&taskname=bench.add",
		"/api/tasks?limit=100&workername=bench@h",
		"/api/task/info/00000000-0000-4000-8000-000000004242",
	} {
		b.Run(path, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := http.Get(srv.URL + path)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("%s: %d", path, resp.StatusCode)
					}
				}
			})
		})
	}
}

// processCPU is the CPU time this process has used, user and system, in ns.
// The ingestion benchmarks report it per message: the publisher runs in the
// process in both, so the difference between them is what stamen's consumer
// costs beyond a subscriber that only counts, a figure that moves less with
// the machine's other load than the rates do.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkConsume measures the CPU one event message costs once read from
// the broker, on one goroutine: unwrapping, decoding, the state machine and
// metrics, without Redis or the hand-off between the reading goroutine and
// the applying one.
func BenchmarkConsume(b *testing.B) {
	a := openApp(b, Config{EmbeddedAddr: "127.0.0.1:0", MaxTasks: b.N + 1})
	payloads := eventPayloads(b.N)
	var dec celery.EventDecoder
	ctx := context.Background()
	b.ResetTimer()
	for _, p := range payloads {
		evs, err := dec.Decode(p)
		if err != nil {
			b.Fatal(err)
		}
		a.State.Apply(evs...)
		for i := range evs {
			a.ingester.Observe(ctx, &evs[i], 0)
		}
	}
	b.ReportMetric(float64(b.N*3)/b.Elapsed().Seconds(), "events/s")
}
