// Command stamen serves the Celery Flower REST API over a real Celery
// cluster: it reads events from the broker, keeps the tasks' state and
// controls workers through the broker's remote-control mailbox.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/broker/redis"
)

type options struct {
	broker           string
	resultBackend    string
	address          string
	port             int
	maxTasks         int
	maxTaskAge       time.Duration
	inspectTimeoutMS float64
	applyTimeout     time.Duration
	brokerTimeout    time.Duration
	urlPrefix        string
	embeddedAddr     string
	unauthenticated  bool
	logLevel         string

	basicAuth       string
	viewerBasicAuth string
	authToken       string
	viewerAuthToken string
	authFile        string

	persistent        bool
	db                string
	stateSaveInterval int
}

// env returns the first set variable among STAMEN_<NAME> and FLOWER_<NAME>.
func env(name string, extra ...string) string {
	for _, k := range append([]string{"STAMEN_" + name, "FLOWER_" + name}, extra...) {
		if v, ok := os.LookupEnv(k); ok {
			return v
		}
	}
	return ""
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(env(name)); err == nil {
		return v
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(env(name), 64); err == nil {
		return v
	}
	return def
}

func envBool(name string) bool {
	v, _ := strconv.ParseBool(env(name))
	return v
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(env(name)); err == nil {
		return v
	}
	return def
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// parseFlags reads Flower's flag names (both max_tasks and max-tasks
// spellings), falling back to the environment and then to defaults.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("stamen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	both := func(name string, register func(string)) {
		register(name)
		if alt := strings.ReplaceAll(name, "_", "-"); alt != name {
			register(alt)
		}
	}
	str := func(p *string, name, def, usage string) {
		both(name, func(n string) { fs.StringVar(p, n, def, usage) })
	}
	str(&o.broker, "broker", env("BROKER", "CELERY_BROKER_URL"), "broker URL: redis://[:password@]host:port/db, rediss://, amqp://user:pass@host:port/vhost, amqps://; empty starts the embedded broker")
	str(&o.resultBackend, "result_backend", env("RESULT_BACKEND", "CELERY_RESULT_BACKEND"), "result backend URL: redis://... or rpc:// (default: rpc:// on AMQP, the broker on Redis)")
	str(&o.address, "address", orDefault(env("ADDRESS"), "127.0.0.1"), "address to listen on")
	both("port", func(n string) { fs.IntVar(&o.port, n, envInt("PORT", 5555), "port to listen on") })
	both("max_tasks", func(n string) {
		fs.IntVar(&o.maxTasks, n, envInt("MAX_TASKS", 10000), "tasks kept; the oldest go first")
	})
	both("max_task_age", func(n string) {
		fs.DurationVar(&o.maxTaskAge, n, envDuration("MAX_TASK_AGE", 0), "also drop tasks whose latest event is older than this (e.g. 72h); 0 keeps them until --max_tasks")
	})
	both("inspect_timeout", func(n string) {
		fs.Float64Var(&o.inspectTimeoutMS, n, envFloat("INSPECT_TIMEOUT", 1000), "how long to wait for workers' replies, in milliseconds")
	})
	both("apply_timeout", func(n string) {
		fs.DurationVar(&o.applyTimeout, n, envDuration("APPLY_TIMEOUT", 60*time.Second), "default bound on /api/task/apply's wait for a result")
	})
	both("broker_timeout", func(n string) {
		fs.DurationVar(&o.brokerTimeout, n, envDuration("BROKER_TIMEOUT", 5*time.Second), "bound on each broker call")
	})
	str(&o.urlPrefix, "url_prefix", env("URL_PREFIX"), "serve everything under /<prefix>")
	str(&o.embeddedAddr, "embedded_broker_address", orDefault(env("EMBEDDED_BROKER_ADDRESS"), "127.0.0.1:6380"), "where the embedded broker listens when no broker is configured")
	both("unauthenticated_api", func(n string) {
		fs.BoolVar(&o.unauthenticated, n, envBool("UNAUTHENTICATED_API"), "allow serving the API without credentials on a non-loopback address")
	})
	// Credentials are best given through the environment or a file, so
	// that they do not show in ps.
	str(&o.basicAuth, "basic_auth", env("BASIC_AUTH"), "operators' HTTP basic credentials: user:password[,user:password] (password may be a bcrypt hash)")
	str(&o.viewerBasicAuth, "viewer_basic_auth", env("VIEWER_BASIC_AUTH"), "viewers' (read-only) HTTP basic credentials: user:password[,...]")
	str(&o.authToken, "auth_token", env("AUTH_TOKEN"), "operators' bearer tokens, comma-separated")
	str(&o.viewerAuthToken, "viewer_auth_token", env("VIEWER_AUTH_TOKEN"), "viewers' bearer tokens, comma-separated")
	str(&o.authFile, "auth_file", env("AUTH_FILE"), "credentials file: lines '<viewer|operator> basic user:password' or '<viewer|operator> token <token>'")
	both("persistent", func(n string) {
		fs.BoolVar(&o.persistent, n, envBool("PERSISTENT"), "keep the history in --db and restore it at start (always on with the embedded broker)")
	})
	str(&o.db, "db", orDefault(env("DB"), "stamen.db"), "the store's file")
	both("state_save_interval", func(n string) {
		fs.IntVar(&o.stateSaveInterval, n, envInt("STATE_SAVE_INTERVAL", 1000), "how often the history is written to --db, in milliseconds")
	})
	str(&o.logLevel, "logging", orDefault(env("LOGGING"), "info"), "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return o, nil
}

func (o options) authenticator() (*auth.Authenticator, error) {
	var a auth.Authenticator
	for _, add := range []func() error{
		func() error { return a.AddBasic(o.basicAuth, auth.Operator) },
		func() error { return a.AddBasic(o.viewerBasicAuth, auth.Viewer) },
		func() error { return a.AddTokens(o.authToken, auth.Operator) },
		func() error { return a.AddTokens(o.viewerAuthToken, auth.Viewer) },
	} {
		if err := add(); err != nil {
			return nil, err
		}
	}
	if o.authFile != "" {
		f, err := os.Open(o.authFile)
		if err != nil {
			return nil, fmt.Errorf("open the credentials file: %w", err)
		}
		defer f.Close()
		if err := a.AddFile(f); err != nil {
			return nil, err
		}
	}
	return &a, nil
}

// defaultGCPercent replaces Go's 100 unless GOGC is set. The task state is
// a few large pointer-free arrays, which a collection does not scan, so
// collecting five times as often costs little CPU, while it keeps the
// process within about a third of its live heap instead of over twice it
// (bench/RESULTS.md: about 270 MB resident at a million tasks).
const defaultGCPercent = 20

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "stamen:", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintln(stderr, "stamen: invalid --logging:", o.logLevel)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// go-redis otherwise prints pool and dial trouble straight to stderr.
	goredis.SetLogger(redis.LibraryLogger{Log: log})

	authn, err := o.authenticator()
	if err != nil {
		log.Error("invalid credentials configuration", slog.Any("err", err))
		return 2
	}
	// Safe by default: an API that can shut workers down is not offered to
	// the network without credentials unless the operator says so.
	if !app.IsLoopback(o.address) && !authn.Enabled() && !o.unauthenticated {
		log.Error("refusing to serve the API without authentication on a non-loopback address; " +
			"listen on 127.0.0.1, or pass --unauthenticated_api to accept the risk")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var dbPath string
	if o.persistent || o.broker == "" {
		dbPath = o.db
	}
	a, err := app.New(ctx, app.Config{
		DBPath:         dbPath,
		BrokerURL:      o.broker,
		ResultBackend:  o.resultBackend,
		EmbeddedAddr:   o.embeddedAddr,
		MaxTasks:       o.maxTasks,
		MaxTaskAge:     o.maxTaskAge,
		InspectTimeout: time.Duration(o.inspectTimeoutMS * float64(time.Millisecond)),
		BrokerTimeout:  o.brokerTimeout,
		ApplyTimeout:   o.applyTimeout,
		URLPrefix:      o.urlPrefix,
		Auth:           authn,
		SaveInterval:   time.Duration(o.stateSaveInterval) * time.Millisecond,
		Logger:         log,
	})
	if err != nil {
		log.Error("cannot start", slog.Any("err", err))
		return 1
	}
	defer a.Close()

	addr := net.JoinHostPort(o.address, strconv.Itoa(o.port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("cannot listen", slog.String("address", addr), slog.Any("err", err))
		return 1
	}
	srv := &http.Server{
		Handler:           a.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	log.Info("stamen listening", slog.String("address", "http://"+ln.Addr().String()),
		slog.String("broker", app.Redact(a.BrokerURL)))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		log.Error("server stopped", slog.Any("err", err))
		return 1
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown", slog.Any("err", err))
	}
	return 0
}
