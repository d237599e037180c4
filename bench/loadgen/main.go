// Command loadgen benchmarks the built stamen binary as an operator runs
// it (make bench): cold start, ingestion of Celery events from Redis pub/sub
// into the state and the --persistent store, resident memory, store size on
// disk, restart from the store, and the read API under closed-loop readers, at a small
// number of tasks and then at a large one (on the restarted process).
//
// Figures go to stdout, one per line: "<name> <value>", and for each attack
// "http <label> <tasks> <req/s> <p50 ms> <p99 ms> <max ms> <tasks returned> <path>".
// Progress goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

const (
	// window bounds the tasks published but not yet ingested. Redis drops
	// a subscriber whose output buffer passes 32 MB, or stays above 8 MB
	// for 60 s (the default client-output-buffer-limit for pubsub), so
	// publishing further ahead of stamen would lose events, not measure
	// them. An envelope is about 1 KB.
	window = 4000
	batch  = 500
	// stall fails a phase whose ingestion makes no progress for that long.
	stall = 30 * time.Second
	// commitTimeout bounds the wait for stamen to commit to the store and
	// exit after the large phase; beyond it the store is reported
	// incomplete.
	commitTimeout = 2 * time.Minute
	// saveInterval is stamen's --state_save_interval, its default, given
	// so that STAMEN_STATE_SAVE_INTERVAL cannot change the figures.
	saveInterval = time.Second
	// pollEvery is how often the driver reads stamen's /metrics while it
	// feeds it: often enough that the window never runs dry at 100,000
	// tasks a second, and rarely enough that the reads of /metrics
	// (uncompressed) cost stamen little next to what is measured.
	pollEvery = 5 * time.Millisecond
	// paceTick is how often a paced feed publishes what has fallen due.
	paceTick = 2 * time.Millisecond
	// span is how far back the tasks' timestamps reach, evenly spread, so
	// that a 10-minute received window selects 1% of them.
	span = 1000 * time.Minute
)

var (
	taskNames = []string{"bench.add", "bench.mul", "bench.div"}
	workers   = []string{"bench@w0", "bench@w1", "bench@w2", "bench@w3"}
)

type config struct {
	stamen   string
	redis    string
	db       int
	tasks    int
	small    int
	mid      int
	duration time.Duration
	clients  int
	// readers, readFor and mixed measure reads under load: reads under that many
	// concurrent clients, for readFor each, and the ingestion of mixed
	// more tasks (evicting as many old ones) alone and then under reads.
	readers   int
	readFor   time.Duration
	mixed     int
	mixedRate int
	// mixedReaders are the reader counts the mixed phase ingests under,
	// one after the other; by default only readers.
	mixedReaders []int
	env          []string
	// noRestart skips the store's commit and the restart from it, for runs
	// that measure only the reads and the mixed phases.
	noRestart bool
}

func main() {
	var c config
	flag.StringVar(&c.stamen, "stamen", "bin/stamen", "the stamen binary")
	flag.StringVar(&c.redis, "redis", "127.0.0.1:6379", "Redis to publish on (loopback)")
	flag.IntVar(&c.db, "redis-db", 6, "Redis database number; flushed before and after")
	flag.IntVar(&c.tasks, "tasks", 1_000_000, "tasks of the large phase")
	flag.IntVar(&c.small, "small", 10_000, "tasks of the small phase")
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "length of each attack")
	flag.IntVar(&c.clients, "clients", 2, "concurrent requests of each attack (max rate, closed loop)")
	flag.IntVar(&c.mid, "mid", 100_000, "tasks of the middle phase (reads under -readers clients only)")
	flag.IntVar(&c.readers, "readers", 4, "concurrent requests of the attacks under several readers")
	flag.DurationVar(&c.readFor, "read-duration", 10*time.Second, "length of each attack under -readers clients")
	flag.IntVar(&c.mixed, "mixed", 300_000, "tasks ingested at -tasks tasks alone, then as many again under -readers readers of /api/tasks?limit=100")
	flag.IntVar(&c.mixedRate, "mixed-rate", 50_000, "events a second of the mixed phase's second, paced run (0: none)")
	flag.StringVar(&reader, "reader", "go", "what reads: go (net/http's client), vegeta (its attacker, as before 2026-11-24)")
	mixedReaders := flag.String("mixed-readers", "", "comma-separated reader counts (1,4,16) the mixed phase ingests under in turn, each reported as a share of the rate alone (default: -readers)")
	flag.BoolVar(&c.noRestart, "no-restart", false, "skip the store's commit and the restart from it (reads and mixed phases only)")
	env := flag.String("stamen-env", "", "space-separated NAME=VALUE pairs added to stamen's environment (GOGC=100 GOMEMLIMIT=...)")
	var pc pgConfig
	flag.StringVar(&pc.admin, "pg", "", "PostgreSQL URL of a database to create "+benchDB+" from: run the Postgres fleet benchmark instead")
	flag.IntVar(&pc.tasks, "pg-tasks", 10_000_000, "tasks in Postgres for the reads (-pg)")
	flag.IntVar(&pc.ingest, "pg-ingest", 100_000, "tasks published in each ingestion phase (-pg)")
	flag.IntVar(&pc.chunk, "pg-chunk", 1_000_000, "rows per INSERT of the bulk load (-pg)")
	flag.IntVar(&pc.maxTasks, "pg-max-tasks", 100_000, "the replicas' --max_tasks (-pg): half of it is the most tasks published and not yet written")
	flag.Float64Var(&pc.rate, "pg-rate", 0, "tasks a second to publish in each ingestion phase (-pg), 0: as fast as the replicas' bounds allow")
	flag.StringVar(&pc.lock, "lock", "", "flock this file around the measured phases (-pg)")
	flag.StringVar(&benchDB, "pg-db", benchDB, "the database the Postgres run creates and drops (-pg)")
	flag.BoolVar(&pc.keep, "pg-keep", false, "keep "+benchDB+" afterwards (-pg)")
	flag.BoolVar(&pc.reuse, "pg-reuse", false, "run on the database a run with -pg-keep left, without its bulk load (-pg, for trials)")
	flag.Parse()
	if reader != "go" && reader != "vegeta" {
		fmt.Fprintln(os.Stderr, "loadgen: -reader is go or vegeta")
		os.Exit(2)
	}
	if pc.admin != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := runPG(ctx, c, pc)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
		return
	}
	if c.small <= 0 || c.small >= c.mid || c.mid >= c.tasks {
		fmt.Fprintln(os.Stderr, "loadgen: need 0 < -small < -mid < -tasks")
		os.Exit(2)
	}
	c.env = strings.Fields(*env)
	c.mixedReaders = []int{c.readers}
	if *mixedReaders != "" {
		c.mixedReaders = nil
		for _, f := range strings.Split(*mixedReaders, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				fmt.Fprintf(os.Stderr, "loadgen: -mixed-readers: %q is not a reader count\n", f)
				os.Exit(2)
			}
			c.mixedReaders = append(c.mixedReaders, n)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[loadgen %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func figure(name string, value float64) { fmt.Printf("%s %.1f\n", name, value) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func run(ctx context.Context, c config) (err error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: c.redis, DB: c.db})
	defer rdb.Close()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("flush Redis db %d: %w", c.db, err)
	}
	defer rdb.FlushDB(context.WithoutCancel(ctx))
	dir, err := os.MkdirTemp("", "stamen-loadgen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dbPath, logPath := filepath.Join(dir, "stamen.db"), filepath.Join(dir, "stamen.log")
	defer func() {
		if err != nil {
			if b, rerr := os.ReadFile(logPath); rerr == nil {
				fmt.Fprintf(os.Stderr, "stamen's log:\n%s", b)
			}
		}
	}()

	progress("generating %d tasks' events", c.tasks)
	epoch := time.Now().Add(-span)
	payloads := generate(c.tasks+(1+len(c.mixedReaders))*c.mixed, c.tasks, epoch)
	// Generating leaves the driver's heap at its largest: collect now, not
	// while the first reads are measured.
	runtime.GC()
	fmt.Printf("# stamen %s, redis %s/%d, %d tasks, attacks of %s with %d clients, of %s with %d readers, env %q\n",
		c.stamen, c.redis, c.db, c.tasks, c.duration, c.clients, c.readFor, c.readers, c.env)

	s, cold, err := start(ctx, c, dbPath, logPath, 30*time.Second)
	if err != nil {
		return err
	}
	defer s.kill()
	figure("cold_start_ms", ms(cold))
	channel := fmt.Sprintf("/%d.celeryev/task.multi", c.db)
	if err := waitSubscribed(ctx, rdb, c.db); err != nil {
		return err
	}
	rss0, _, err := s.memory("start")
	if err != nil {
		return err
	}
	figure("rss_mb_start", rss0)

	progress("small phase: %d tasks", c.small)
	if _, err := feed(ctx, rdb, channel, s, payloads, 0, c.small); err != nil {
		return err
	}
	rss, _, err := s.memory("small")
	if err != nil {
		return err
	}
	fmt.Printf("tasks_small %d\n", c.small)
	figure("rss_mb_small", rss)
	figure("rss_bytes_per_task_small", (rss-rss0)*1e6/float64(c.small))
	for _, t := range targets(epoch, c.small, taskID)[:2] {
		if err := attack(ctx, c, s.base, t, c.small); err != nil {
			return err
		}
	}
	if err := readers(ctx, c, s, epoch, c.small); err != nil {
		return err
	}

	progress("middle phase: %d more tasks", c.mid-c.small)
	if _, err := feed(ctx, rdb, channel, s, payloads, c.small, c.mid); err != nil {
		return err
	}
	fmt.Printf("tasks_mid %d\n", c.mid)
	if err := readers(ctx, c, s, epoch, c.mid); err != nil {
		return err
	}

	progress("large phase: %d more tasks", c.tasks-c.mid)
	began := time.Now()
	took, err := feed(ctx, rdb, channel, s, payloads, c.mid, c.tasks)
	if err != nil {
		return err
	}
	events := float64(3 * (c.tasks - c.mid))
	figure("ingest_events_per_s", events/took.Seconds())
	rss, hwm, err := s.memory("large")
	if err != nil {
		return err
	}
	fmt.Printf("tasks_large %d\n", c.tasks)
	figure("rss_mb_large", rss)
	figure("hwm_mb_large", hwm)
	figure("rss_bytes_per_task_large", (rss-rss0)*1e6/float64(c.tasks))
	// What of it is the Go heap: live and free spans, and free spans the
	// runtime has not yet given back to the kernel.
	for _, m := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes"} {
		v, err := s.metric(m)
		if err != nil {
			return err
		}
		figure(strings.TrimPrefix(m, "go_memstats_")+"_mb_large", v/1e6)
	}
	if c.noRestart {
		return readsAndMixed(ctx, c, rdb, channel, s, payloads, epoch)
	}
	// stamen commits whatever it has not written yet before it exits, so
	// its exit is when every event ingested is in the store.
	progress("stopping stamen: it commits the rest to the store")
	ingested := time.Now()
	complete, err := s.stop(commitTimeout)
	if err != nil {
		return err
	}
	fmt.Printf("store_complete %t\n", complete)
	figure("store_commit_s", time.Since(ingested).Seconds())
	figure("store_events_per_s", events/time.Since(began).Seconds())
	fi, err := os.Stat(dbPath)
	if err != nil {
		return err
	}
	figure("store_mb", float64(fi.Size())/1e6)

	progress("restart from the store")
	s, cold, err = start(ctx, c, dbPath, logPath, 5*time.Minute)
	if err != nil {
		return err
	}
	defer s.kill()
	figure("restart_ms", ms(cold))
	restored, err := s.metric(`stamen_tasks_stored`)
	if err != nil {
		return err
	}
	fmt.Printf("restored_tasks %.0f\n", restored)
	figure("store_bytes_per_task", float64(fi.Size())/max(restored, 1))
	rss, _, err = s.memory("restored")
	if err != nil {
		return err
	}
	figure("rss_mb_restored", rss)
	if int(restored) < c.tasks {
		// The reads are measured at c.tasks tasks all the same: events of
		// the tasks it already holds change nothing.
		progress("the store gave back %d of %d tasks: publishing them all again", int(restored), c.tasks)
		if err := waitSubscribed(ctx, rdb, c.db); err != nil {
			return err
		}
		if _, err := feed(ctx, rdb, channel, s, payloads, 0, c.tasks); err != nil {
			return err
		}
	}
	return readsAndMixed(ctx, c, rdb, channel, s, payloads, epoch)
}

// readsAndMixed runs the reads at c.tasks tasks, then the mixed phases.
func readsAndMixed(ctx context.Context, c config, rdb *goredis.Client, channel string, s *stamen, payloads [][]byte, epoch time.Time) error {
	for _, t := range targets(epoch, c.tasks, taskID) {
		if err := attack(ctx, c, s.base, t, c.tasks); err != nil {
			return err
		}
	}
	return mixed(ctx, c, rdb, channel, s, payloads, epoch)
}

// readers runs the reads of targets at n tasks under c.readers concurrent
// clients, with no ingestion.
func readers(ctx context.Context, c config, s *stamen, epoch time.Time, n int) error {
	for _, t := range targets(epoch, n, taskID)[:2] {
		t.label += "_r" + strconv.Itoa(c.readers)
		if err := attackWith(ctx, s, t, n, c.readers, c.readFor); err != nil {
			return err
		}
	}
	return nil
}

// mixed ingests c.mixed new tasks at c.tasks tasks (stamen evicts as many
// of the oldest) with no reads, then c.mixed more under each count of
// c.mixedReaders closed-loop readers of /api/tasks?limit=100 in turn, which
// run until that ingestion is done, and reports the ingestion rates (under
// readers also as a share of the rate alone) and the reads' latencies. It does so at
// the highest rate, then at c.mixedRate events a second, on tasks evicted
// by then (the first ones, created again).
func mixed(ctx context.Context, c config, rdb *goredis.Client, channel string, s *stamen, payloads [][]byte, epoch time.Time) error {
	if c.mixed == 0 {
		return nil
	}
	fmt.Printf("mixed_tasks %d\n", c.mixed)
	if err := mixedAt(ctx, c, rdb, channel, s, payloads, epoch, c.tasks, 0, ""); err != nil {
		return err
	}
	if c.mixedRate == 0 {
		return nil
	}
	fmt.Printf("mixed_rate %d\n", c.mixedRate)
	return mixedAt(ctx, c, rdb, channel, s, payloads, epoch, 0, float64(c.mixedRate)/3, "_"+strconv.Itoa(c.mixedRate))
}

func mixedAt(ctx context.Context, c config, rdb *goredis.Client, channel string, s *stamen, payloads [][]byte, epoch time.Time, first int, rate float64, suffix string) error {
	n := c.mixed
	if rate > 0 {
		// As many tasks as ten seconds at that rate take.
		n = min(n, int(10*rate))
	}
	progress("mixed phase%s: %d tasks ingested alone", suffix, n)
	second := first + n
	alone, err := feedFrom(ctx, rdb, channel, s, payloads, first, second, rate)
	if err != nil {
		return err
	}
	figure("mixed_ingest_alone_events_per_s"+suffix, float64(3*n)/alone.Seconds())
	for k, readers := range c.mixedReaders {
		from := second + k*n
		progress("mixed phase%s: %d tasks ingested under %d readers", suffix, n, readers)
		during, err := ingestUnder(ctx, c, rdb, channel, s, payloads, epoch, from, from+n, rate, readers, suffix)
		if err != nil {
			return err
		}
		under := float64(3*n) / during.Seconds()
		if readers == c.readers {
			figure("mixed_ingest_read_events_per_s"+suffix, under)
		}
		r := "_r" + strconv.Itoa(readers)
		figure("mixed_ingest"+r+"_events_per_s"+suffix, under)
		figure("mixed_ingest"+r+"_share_pct"+suffix, 100*under/(float64(3*n)/alone.Seconds()))
	}
	return nil
}

// ingestUnder feeds tasks [from, to) at rate (0: at once) while readers
// closed-loop clients read /api/tasks?limit=100, and returns how long the
// feed took.
func ingestUnder(ctx context.Context, c config, rdb *goredis.Client, channel string, s *stamen, payloads [][]byte, epoch time.Time, from, to int, rate float64, readers int, suffix string) (time.Duration, error) {
	t := targets(epoch, c.tasks, taskID)[1]
	t.label += "_r" + strconv.Itoa(readers) + "_ingesting" + suffix
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var during time.Duration
	var ferr error
	started := make(chan struct{})
	go func() {
		defer cancel()
		<-started
		during, ferr = feedFrom(ctx, rdb, channel, s, payloads, from, to, rate)
	}()
	if err := attackUntil(actx, ctx, s, t, c.tasks, readers, started, 0); err != nil {
		return 0, err
	}
	return during, ferr
}

// generate builds every task's envelope up front, so that publishing
// takes no CPU from stamen while it is measured. Tasks cycle over the names
// and workers; every tenth block of 12 fails, so that each name and worker
// has failures.
// Tasks past the first spread ones (the mixed phase's) follow at the same
// step, after now.
func generate(n, spread int, epoch time.Time) [][]byte {
	out := make([][]byte, n)
	step := float64(span) / float64(time.Second) / float64(spread)
	start := float64(epoch.UnixMicro()) / 1e6
	var wg sync.WaitGroup
	parts := runtime.NumCPU()
	for p := range parts {
		wg.Go(func() {
			for i := p * n / parts; i < (p+1)*n/parts; i++ {
				out[i] = testcluster.TaskEnvelope(taskID(i), taskNames[i%len(taskNames)], workers[i%len(workers)],
					i, start+float64(i)*step, (i/12)%10 == 0)
			}
		})
	}
	wg.Wait()
	return out
}

var taskEnvelope = testcluster.TaskEnvelope

// taskID is task i's id in the in-memory runs: sequential, which costs an
// in-memory substring scan what a random one does (the PostgreSQL run,
// whose index of the ids' grams it would defeat, uses pgTaskID).
func taskID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

type target struct{ label, path string }

// targets are the reads measured at n tasks, whose ids id makes: the first
// two are one task's info and the newest page of the list, the rest the
// list's filters. Each filter matches a tenth to a third of the tasks
// except received (1%, half-way back) and search_id (one task by the last
// 12 characters of its id, the group an operator copies from a log line),
// which show what a scan of the tasks costs.
func targets(epoch time.Time, n int, id func(int) string) []target {
	from := epoch.Add(span / 2).Truncate(time.Minute)
	received := url.Values{
		"received_start": {from.Format("2006-01-02 15:04")},
		"received_end":   {from.Add(10 * time.Minute).Format("2006-01-02 15:04")},
	}
	return []target{
		{"info", "/api/task/info/" + id(n/2)},
		{"none", "/api/tasks?limit=100"},
		{"state", "/api/tasks?limit=100&state=FAILURE"},
		{"taskname", "/api/tasks?limit=100&taskname=" + taskNames[1]},
		{"workername", "/api/tasks?limit=100&workername=" + url.QueryEscape(workers[2])},
		{"received", "/api/tasks?limit=100&" + received.Encode()},
		{"search", "/api/tasks?limit=100&search=mul"},
		{"search_id", "/api/tasks?limit=100&search=" + id(n / 3)[24:]},
	}
}

// publish publishes payloads on channel in one pipeline.
func publish(ctx context.Context, rdb *goredis.Client, channel string, payloads [][]byte) error {
	pipe := rdb.Pipeline()
	for _, p := range payloads {
		pipe.Publish(ctx, channel, p)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// feed publishes payloads[from:to] in pipelined batches, at most window
// tasks ahead of what stamen has ingested, and returns once stamen has
// ingested them all, with how long that took.
func feed(ctx context.Context, rdb *goredis.Client, channel string, s *stamen, payloads [][]byte, from, to int) (time.Duration, error) {
	return feedBase(ctx, rdb, channel, s, payloads, from, to, 0, 0)
}

// feedFrom is feed for a process whose count of ingested events does not
// start at payloads[0] (a restarted one).
// rate, when not 0, is the tasks a second to publish at most.
func feedFrom(ctx context.Context, rdb *goredis.Client, channel string, s *stamen, payloads [][]byte, from, to int, rate float64) (time.Duration, error) {
	n, err := s.metric(`stamen_events_ingested_total{kind="task"}`)
	if err != nil {
		return 0, err
	}
	return feedBase(ctx, rdb, channel, s, payloads, from, to, n-float64(3*from), rate)
}

// feedBase is feed where the process's count of ingested events is base
// more than that of payloads[:i] once payloads[i] is ingested.
func feedBase(ctx context.Context, rdb *goredis.Client, channel string, s *stamen, payloads [][]byte, from, to int, base, rate float64) (time.Duration, error) {
	began := time.Now()
	want := float64(3 * to)
	var got float64
	moved := time.Now()
	poll := func() error {
		n, err := s.metric(`stamen_events_ingested_total{kind="task"}`)
		if err != nil {
			return err
		}
		n -= base
		if n > got {
			got, moved = n, time.Now()
		}
		if time.Since(moved) > stall {
			return fmt.Errorf("ingestion stalled at %.0f of %.0f events (did Redis drop the subscriber?)", got, want)
		}
		return ctx.Err()
	}
	for i := from; i < to; {
		if i-int(got/3) > window {
			if err := poll(); err != nil {
				return 0, err
			}
			time.Sleep(pollEvery)
			continue
		}
		step := batch
		if rate > 0 {
			// Paced: the tasks due by now, looked at every paceTick, so
			// that the events arrive as a stream, as from a cluster's
			// many workers. (Until 2026-11-24 a whole batch of 500 tasks
			// went as soon as one was due: bursts of 1,500 events every
			// 30 ms at 50,000 events/s.)
			due := from + int(rate*time.Since(began).Seconds())
			if i >= due {
				time.Sleep(paceTick)
				continue
			}
			step = min(batch, due-i)
		}
		j := min(i+step, to)
		if err := publish(ctx, rdb, channel, payloads[i:j]); err != nil {
			return 0, err
		}
		i = j
	}
	for got < want {
		if err := poll(); err != nil {
			return 0, err
		}
		time.Sleep(pollEvery)
	}
	return time.Since(began), nil
}

// waitSubscribed returns once stamen's pattern subscription receives
// messages: PUBLISH answers how many subscribers got one. stamen drops the
// probe as undecodable.
func waitSubscribed(ctx context.Context, rdb *goredis.Client, db int) error {
	for range 500 {
		n, err := rdb.Publish(ctx, fmt.Sprintf("/%d.celeryev/probe", db), "{}").Result()
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("stamen did not subscribe to the events within 10 s")
}

// attack reads one path at max rate, closed loop, with c.clients
// concurrent requests for c.duration and prints the figures.
func attack(ctx context.Context, c config, base string, t target, tasks int) error {
	return attackWith(ctx, &stamen{base: base}, t, tasks, c.clients, c.duration)
}

func attackWith(ctx context.Context, s *stamen, t target, tasks, clients int, d time.Duration) error {
	return attackUntil(ctx, ctx, s, t, tasks, clients, nil, d)
}

// attackUntil reads one path at max rate, closed loop, with clients
// concurrent requests for d, or until stop is done when d is 0, closes
// started (when not nil) once the reads are on, and prints the figures: an
// "http" line, and how many collections stamen ran a second meanwhile.
func attackUntil(stop, ctx context.Context, s *stamen, t target, tasks, clients int, started chan struct{}, d time.Duration) error {
	returned, err := count(s.base + t.path)
	if err != nil && !tolerateFailures {
		return fmt.Errorf("%s: %w", t.path, err)
	}
	if err != nil {
		returned = -1 // it did not answer 200
	}
	progress("attack %s at %d tasks, %d clients", t.label, tasks, clients)
	gc0, err := s.metric("go_gc_duration_seconds_count")
	if err != nil {
		return err
	}
	began, cpu0 := time.Now(), selfCPU()
	var r *reads
	switch reader {
	case "vegeta":
		r = vegetaRead(stop, s.base+t.path, t.label, clients, d, started)
	default:
		r = readClosedLoop(stop, s.base+t.path, clients, d, started)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	took, cpu := time.Since(began), selfCPU()-cpu0
	if r.failed > 0 && tolerateFailures {
		// The line is printed all the same, its figures those of every
		// request, and the failures on a line of their own.
		fmt.Printf("http_failed %s %.1f%% succeeded; status codes %v\n", t.label,
			100*(1-float64(r.failed)/float64(max(len(r.latencies), 1))), r.statuses)
	} else if r.failed > 0 {
		return fmt.Errorf("%s: %d of %d requests failed; status codes %v, first error: %v",
			t.path, r.failed, len(r.latencies), r.statuses, r.firstErr)
	}
	gc1, err := s.metric("go_gc_duration_seconds_count")
	if err != nil {
		return err
	}
	fmt.Printf("http %s %d %.1f %.2f %.2f %.2f %d %s\n", t.label, tasks, r.perSecond(),
		ms(r.quantile(0.50)), ms(r.quantile(0.99)), ms(r.quantile(1)), returned, t.path)
	fmt.Printf("gc_per_s %s %d %.1f\n", t.label, tasks, (gc1-gc0)/took.Seconds())
	// The driver shares the machine with stamen: the CPUs it used while
	// reading (and feeding, in the mixed phases) were not stamen's.
	fmt.Printf("driver_cpus %s %d %.2f\n", t.label, tasks, cpu.Seconds()/took.Seconds())
	return nil
}

// selfCPU is the CPU time the driver has used, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reader (-reader) is what the reads are made with: "go", readClosedLoop;
// "vegeta", vegeta's attacker, as every figure in bench/RESULTS.md before
// 2026-11-24 was.
var reader string

// vegetaRead is readClosedLoop by vegeta's attacker.
func vegetaRead(stop context.Context, url, label string, clients int, d time.Duration, started chan struct{}) *reads {
	a := vegeta.NewAttacker(vegeta.Workers(uint64(clients)), vegeta.MaxWorkers(uint64(clients)), vegeta.Timeout(30*time.Second))
	halt := context.AfterFunc(stop, func() { a.Stop() })
	defer halt()
	began := time.Now()
	results := a.Attack(vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: url}), vegeta.Rate{}, d, label)
	if started != nil {
		close(started)
	}
	r := &reads{statuses: map[int]int{}}
	for res := range results {
		r.latencies = append(r.latencies, res.Latency)
		r.statuses[int(res.Code)]++
		if res.Code != http.StatusOK {
			r.failed++
			r.firstErr = firstOf(r.firstErr, fmt.Errorf("GET %s: %d %s", url, res.Code, res.Error))
		}
	}
	r.took = time.Since(began)
	slices.Sort(r.latencies)
	return r
}

// tolerateFailures (the Postgres run) reports a read that does not always
// answer 200 instead of ending the run on it: a read past --db_timeout
// answers 503, and the other reads are still worth measuring.
var tolerateFailures bool

// count is the number of tasks a read answers, to show that each filter
// selects something: 1 for a task's info.
func count(u string) (int, error) {
	body, err := get(u)
	if err != nil {
		return 0, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return 0, err
	}
	if strings.Contains(u, "/api/task/info/") {
		return 1, nil
	}
	if strings.Contains(u, "/api/failures") {
		// The groups, not the tasks.
		var groups []json.RawMessage
		if err := json.Unmarshal(m["groups"], &groups); err != nil {
			return 0, err
		}
		return len(groups), nil
	}
	return len(m), nil
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true}}

func get(u string) ([]byte, error) {
	resp, err := client.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	return body, err
}

type stamen struct {
	cmd    *exec.Cmd
	base   string
	exited chan struct{}
	err    error
}

// start runs the binary on a free loopback port and returns once
// /healthcheck answers 200, with the time from exec to that answer.
func start(ctx context.Context, c config, dbPath, logPath string, timeout time.Duration) (*stamen, time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.Command(c.stamen,
		"--broker", fmt.Sprintf("redis://%s/%d", c.redis, c.db), "--port", strconv.Itoa(port),
		"--max_tasks", strconv.Itoa(c.tasks), "--persistent", "--db", dbPath,
		"--state_save_interval", strconv.Itoa(int(saveInterval/time.Millisecond)))
	cmd.Env = append(os.Environ(), c.env...)
	return launch(ctx, cmd, logf, port, timeout)
}

// launch starts cmd, its output to logf, and returns once it answers
// /healthcheck on port with 200, with the time from exec to that answer.
func launch(ctx context.Context, cmd *exec.Cmd, logf *os.File, port int, timeout time.Duration) (*stamen, time.Duration, error) {
	cmd.Stdout, cmd.Stderr = logf, logf
	// stamen must not outlive the driver, even a killed one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, 0, err
	}
	s := &stamen{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), exited: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	probe := &http.Client{Timeout: time.Second}
	for time.Since(began) < timeout {
		if resp, err := probe.Get(s.base + "/healthcheck"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, time.Since(began), nil
			}
		}
		select {
		case <-s.exited:
			return nil, 0, fmt.Errorf("stamen exited before answering: %v", s.err)
		case <-ctx.Done():
			s.kill()
			return nil, 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	s.kill()
	return nil, 0, fmt.Errorf("stamen did not answer /healthcheck within %s", timeout)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop shuts stamen down as an operator would, with SIGTERM (it commits
// to the store and exits 0), and reports whether it exited within timeout;
// if not, it is killed.
func (s *stamen) stop(timeout time.Duration) (bool, error) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return true, s.err
	case <-time.After(timeout):
		s.kill()
		return false, nil
	}
}

func (s *stamen) kill() {
	select {
	case <-s.exited:
	default:
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// memory returns the process's VmRSS and VmHWM in MB (10^6 bytes, the
// targets' unit), and prints how VmRSS splits into anonymous memory (the
// heap) and file pages (the store's memory map, which the kernel can
// reclaim), labelled with phase.
func (s *stamen) memory(phase string) (rss, hwm float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kib, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kib * 1024 / 1e6
		case "VmHWM:":
			hwm = kib * 1024 / 1e6
		case "RssAnon:":
			figure("rss_anon_mb_"+phase, kib*1024/1e6)
		case "RssFile:":
			figure("rss_file_mb_"+phase, kib*1024/1e6)
		}
	}
	return rss, hwm, nil
}

// metric reads one series of stamen's /metrics; 0 when not exported yet.
func (s *stamen) metric(series string) (float64, error) {
	body, err := get(s.base + "/metrics")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, nil
}
