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
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/broker/amqp"
	"github.com/stamen-dev/stamen/internal/broker/redis"
	"github.com/stamen-dev/stamen/internal/brokertls"
	"github.com/stamen-dev/stamen/internal/crossorigin"
	"github.com/stamen-dev/stamen/internal/metrics"
	"github.com/stamen-dev/stamen/internal/reconcile"
	"github.com/stamen-dev/stamen/internal/redact"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/version"
)

type options struct {
	broker          string
	resultBackend   string
	brokerTransport string
	resultTransport string
	// brokerUseSSL and redisBackendUseSSL are Celery's broker_use_ssl and
	// redis_backend_use_ssl as given (JSON); brokerSSL and backendSSL what
	// parseUseSSL read from them.
	brokerUseSSL       string
	redisBackendUseSSL string
	brokerSSL          *brokertls.Settings
	backendSSL         *brokertls.Settings
	address            string
	port               int
	maxTasks           int
	maxTaskAge         time.Duration
	maxWorkers         int
	maxSeries          int
	taskWorkerLabel    bool
	runtimeBuckets     bucketsFlag
	enableEvents       bool
	inspectTimeoutMS   float64
	applyTimeout       time.Duration
	brokerTimeout      time.Duration
	urlPrefix          string
	embeddedAddr       string
	embeddedPassword   string
	unauthenticated    bool
	logLevel           string
	debug              bool
	// flowerIgnored names the Flower options given that stamen ignores.
	flowerIgnored []string

	basicAuth       string
	viewerBasicAuth string
	authToken       string
	viewerAuthToken string
	authFile        string
	signIn          signInOptions

	persistent        bool
	db                string
	dbMaxTasks        int
	dbTimeout         time.Duration
	stateSaveInterval int

	purgeOfflineWorkers int

	eventQueue          string
	eventQueueTTL       time.Duration
	eventQueueMaxLength int64

	reconcileAfter      time.Duration
	reconcileInterval   time.Duration
	reconcileMaxLookups int
	readOnly            bool
	xheaders            bool
	auditMaxAge         time.Duration
	auditMaxRecords     int
	maxEventStreams     int

	debugAddr string
	// version: print the build's version and exit.
	version bool

	// allowedOrigins and allowedHosts are the flags as given; origins and
	// hosts what crossorigin read from them.
	allowedOrigins string
	allowedHosts   string
	origins        []string
	hosts          []string

	unixSocket string
	certFile   string
	keyFile    string
	caCerts    string
}

// defaultPurgeOfflineWorkers is --purge_offline_workers' default, in
// seconds. Flower's is never, which keeps every pod name of every deploy;
// a day still shows a worker stopped overnight.
const defaultPurgeOfflineWorkers = 86400

// env returns the first set variable among STAMEN_<NAME> and FLOWER_<NAME>
// (then extra), and its name.
func env(name string, extra ...string) (key, value string) {
	for _, k := range append([]string{"STAMEN_" + name, "FLOWER_" + name}, extra...) {
		if v, ok := os.LookupEnv(k); ok {
			return k, v
		}
	}
	return "", ""
}

func envString(name string, extra ...string) string {
	_, v := env(name, extra...)
	return v
}

// envParser reads typed variables, remembering the ones that are set but
// unreadable, by name: a typo in STAMEN_PERSISTENT or
// FLOWER_UNAUTHENTICATED_API must not silently become the default.
type envParser struct{ errs map[string]error }

func (p *envParser) read(name string, parse func(string) error) {
	k, v := env(name)
	if k == "" || v == "" {
		return
	}
	if err := parse(v); err != nil {
		if p.errs == nil {
			p.errs = map[string]error{}
		}
		p.errs[name] = fmt.Errorf("invalid %s=%q: %v", k, v, err)
	}
}

// check returns the errors of the variables whose flag was not given: a
// flag on the command line overrides its variable, readable or not.
func (p *envParser) check(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[strings.ReplaceAll(f.Name, "-", "_")] = true })
	names := make([]string, 0, len(p.errs))
	for name := range p.errs {
		if !given[strings.ToLower(name)] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	errs := make([]error, len(names))
	for i, name := range names {
		errs[i] = p.errs[name]
	}
	return errors.Join(errs...)
}

func (p *envParser) int(name string, def int) int {
	p.read(name, func(v string) (err error) { def, err = strconv.Atoi(v); return err })
	return def
}

func (p *envParser) float(name string, def float64) float64 {
	p.read(name, func(v string) (err error) { def, err = strconv.ParseFloat(v, 64); return err })
	return def
}

func (p *envParser) duration(name string, def time.Duration) time.Duration {
	p.read(name, func(v string) (err error) { def, err = time.ParseDuration(v); return err })
	return def
}

// bool reads a switch from the environment (parseSwitch), def when unset.
func (p *envParser) bool(name string, def bool) bool {
	p.read(name, func(v string) (err error) { def, err = parseSwitch(v); return err })
	return def
}

// parseSwitch reads a switch the way Flower reads FLOWER_UNAUTHENTICATED_API
// (y, yes, t, true, on, 1 and their negations, in any case), so that a
// Flower deployment's environment and command line mean the same to
// stamen. Anything else is refused, where Tornado's command line takes
// every value but false, 0 and f as true: --read_only=nope turns Flower's
// read-only mode on.
func parseSwitch(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "y", "yes", "t", "true", "on", "1":
		return true, nil
	case "n", "no", "f", "false", "off", "0":
		return false, nil
	}
	return false, errors.New("want true or false")
}

// switchFlag is a boolean flag that takes parseSwitch's values, where Go's
// takes only true and false forms: --read_only=yes, as Flower's users
// write it.
type switchFlag bool

func (b *switchFlag) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(bool(*b))
}

func (b *switchFlag) Set(v string) error {
	x, err := parseSwitch(v)
	*b = switchFlag(x)
	return err
}

// IsBoolFlag lets the switch be given alone (--read_only).
func (b *switchFlag) IsBoolFlag() bool { return true }

// urlPrefixPath is --url_prefix as a path: "/flower", or "" without one.
func urlPrefixPath(prefix string) string {
	if prefix = strings.Trim(prefix, "/"); prefix == "" {
		return ""
	}
	return "/" + prefix
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// bucketsFlag is a comma-separated list of histogram buckets
// (metrics.ParseRuntimeBuckets).
type bucketsFlag []float64

func (b *bucketsFlag) String() string {
	if b == nil {
		return ""
	}
	parts := make([]string, len(*b))
	for i, v := range *b {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (b *bucketsFlag) Set(v string) error {
	x, err := metrics.ParseRuntimeBuckets(v)
	if err != nil {
		return err
	}
	*b = x
	return nil
}

// redactedString is a string flag whose printed value (--help's default)
// has its passwords masked.
type redactedString string

func (s *redactedString) String() string     { return redact.String(string(*s)) }
func (s *redactedString) Set(v string) error { *s = redactedString(v); return nil }

// hiddenString is a string flag whose value is a secret whole (credentials,
// transport options holding the sentinels' password): --help shows its
// default, read from the environment, as the mask.
type hiddenString string

func (s *hiddenString) String() string {
	if s == nil || *s == "" {
		return ""
	}
	return redact.Mask
}
func (s *hiddenString) Set(v string) error { *s = hiddenString(v); return nil }

// parseFlags reads Flower's flag names (both max_tasks and max-tasks
// spellings), falling back to the environment and then to defaults.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var e envParser
	fs, flowerOnly := defineFlags(&o, &e, stderr)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	fs.Visit(func(f *flag.Flag) {
		o.signIn.oauth2SecretFlag = o.signIn.oauth2SecretFlag || f.Name == "oauth2_secret" || f.Name == "oauth2-secret"
	})
	if err := e.check(fs); err != nil {
		return o, err
	}
	var err error
	if o.flowerIgnored, err = flowerOnly(); err != nil {
		return o, err
	}
	// As Flower: debug raises the default level only.
	if o.debug && o.logLevel == "info" {
		o.logLevel = "debug"
	}
	if fs.NArg() > 0 {
		// Not echoed: a stray argument is often a flag's value cut off
		// from it (--broker= redis://:password@host).
		return o, fmt.Errorf("%d unexpected arguments after the flags (not shown: they may hold a password)", fs.NArg())
	}
	if err := o.validate(); err != nil {
		return o, err
	}
	if o.origins, err = crossorigin.ParseOrigins(o.allowedOrigins); err != nil {
		return o, fmt.Errorf("--allowed_origins: %w", err)
	}
	if o.hosts, err = crossorigin.ParseHosts(o.allowedHosts); err != nil {
		return o, fmt.Errorf("--allowed_hosts: %w", err)
	}
	return o, o.parseUseSSL()
}

// defineFlags registers every option on a new flag set whose values land
// in o, their defaults read from the environment through e. The second
// value, called once the set is parsed, names the ignored Flower options
// given and errs on a refused one (registerFlowerOnly). --help prints
// printUsage; docs/configuration.md is generated from the same set.
func defineFlags(o *options, e *envParser, stderr io.Writer) (*flag.FlagSet, func() ([]string, error)) {
	fs := flag.NewFlagSet("stamen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(fs.Output(), fs) }
	both := func(name string, register func(string)) {
		register(name)
		if alt := strings.ReplaceAll(name, "_", "-"); alt != name {
			register(alt)
		}
	}
	str := func(p *string, name, def, usage string) {
		both(name, func(n string) { fs.StringVar(p, n, def, usage) })
	}
	// secret is str for a value that may hold a password (a URL from the
	// environment): --help shows its default redacted.
	secret := func(p *string, name, def, usage string) {
		*p = def
		both(name, func(n string) { fs.Var((*redactedString)(p), n, usage) })
	}
	// switchVar is a boolean flag taking Flower's values (parseSwitch), its
	// default read from the environment, else def.
	switchVar := func(p *bool, name, envName string, def bool, usage string) {
		*p = e.bool(envName, def)
		both(name, func(n string) { fs.Var((*switchFlag)(p), n, usage) })
	}
	// hidden is str for a value that is a secret whole: --help shows its
	// default (from the environment) masked.
	hidden := func(p *string, name, def, usage string) {
		*p = def
		both(name, func(n string) { fs.Var((*hiddenString)(p), n, usage) })
	}
	secret(&o.broker, "broker", envString("BROKER", envExtra["broker"]...), "broker URL: redis://[:password@]host:port/db, rediss://, sentinel://host:26379[;sentinel://...], amqp://user:pass@host:port/vhost, amqps://; empty starts the embedded broker")
	secret(&o.resultBackend, "result_backend", envString("RESULT_BACKEND", envExtra["result_backend"]...), "result backend URL: redis://... or rpc:// (default: rpc:// on AMQP, the broker on Redis)")
	hidden(&o.brokerTransport, "broker_transport_options", envString("BROKER_TRANSPORT_OPTIONS"),
		`Redis transport options as a JSON object, as Celery's broker_transport_options: global_keyprefix, master_name (sentinel://), sentinel_kwargs, sep, priority_steps`)
	hidden(&o.resultTransport, "result_backend_transport_options", envString("RESULT_BACKEND_TRANSPORT_OPTIONS"),
		`the Redis result backend's options as a JSON object, as Celery's result_backend_transport_options (default: the broker's master_name and sentinel_kwargs)`)
	str(&o.brokerUseSSL, "broker_use_ssl", envString("BROKER_USE_SSL"),
		`TLS to the broker as a JSON object, as Celery's broker_use_ssl: RabbitMQ takes py-amqp's ca_certs, certfile, keyfile, cert_reqs (CERT_REQUIRED, CERT_OPTIONAL, CERT_NONE), server_hostname; Redis redis-py's ssl_ca_certs, ssl_certfile, ssl_keyfile, ssl_cert_reqs, ssl_check_hostname. Turns TLS on for amqp:// and redis:// URLs too, as Celery does`)
	str(&o.redisBackendUseSSL, "redis_backend_use_ssl", envString("REDIS_BACKEND_USE_SSL"),
		`TLS to a Redis --result_backend of its own URL as a JSON object, as Celery's redis_backend_use_ssl (redis-py's ssl_* keys); a result backend that is the broker's URL takes --broker_use_ssl`)
	str(&o.address, "address", orDefault(envString("ADDRESS"), "127.0.0.1"), "address to listen on")
	both("port", func(n string) { fs.IntVar(&o.port, n, e.int("PORT", 5555), "port to listen on") })
	both("max_tasks", func(n string) {
		fs.IntVar(&o.maxTasks, n, e.int("MAX_TASKS", 10000), "tasks kept; the oldest go first")
	})
	both("max_workers", func(n string) {
		fs.IntVar(&o.maxWorkers, n, e.int("MAX_WORKERS", state.DefaultMaxWorkers), "workers kept in the events state; the one silent longest goes first")
	})
	both("max_series", func(n string) {
		fs.IntVar(&o.maxSeries, n, e.int("MAX_SERIES", metrics.DefaultMaxSeries),
			"the budget of Flower's series on /metrics (flower_*): what does not fit is counted under worker or task \"other\"")
	})
	switchVar(&o.taskWorkerLabel, "task_metrics_worker_label", "TASK_METRICS_WORKER_LABEL", true,
		"label per-task series (events, runtime, prefetch) by worker as Flower does; false drops the worker from them, one set of series per task name")
	o.runtimeBuckets = metrics.DefaultRuntimeBuckets
	e.read("TASK_RUNTIME_METRIC_BUCKETS", o.runtimeBuckets.Set)
	both("task_runtime_metric_buckets", func(n string) {
		fs.Var(&o.runtimeBuckets, n, "flower_task_runtime_seconds' buckets in seconds: comma-separated, increasing; a last inf, as Flower takes it, may be given (+Inf is always there)")
	})
	switchVar(&o.enableEvents, "enable_events", "ENABLE_EVENTS", true, "tell the workers to send task events (enable_events) on subscribing to the events and every 5 s after, as Flower does; false leaves their setting alone")
	both("max_task_age", func(n string) {
		fs.DurationVar(&o.maxTaskAge, n, e.duration("MAX_TASK_AGE", 0), "also drop tasks whose latest event is older than this (e.g. 72h); 0 keeps them until --max_tasks")
	})
	both("purge_offline_workers", func(n string) {
		fs.IntVar(&o.purgeOfflineWorkers, n, e.int("PURGE_OFFLINE_WORKERS", defaultPurgeOfflineWorkers),
			"forget workers offline longer than this many seconds (state, store, worker cache, metrics); 0 keeps them")
	})
	both("inspect_timeout", func(n string) {
		fs.Float64Var(&o.inspectTimeoutMS, n, e.float("INSPECT_TIMEOUT", 1000), "how long to wait for workers' replies, in milliseconds")
	})
	both("apply_timeout", func(n string) {
		fs.DurationVar(&o.applyTimeout, n, e.duration("APPLY_TIMEOUT", 60*time.Second), "default bound on /api/task/apply's wait for a result")
	})
	both("broker_timeout", func(n string) {
		fs.DurationVar(&o.brokerTimeout, n, e.duration("BROKER_TIMEOUT", 5*time.Second), "bound on each broker call")
	})
	str(&o.urlPrefix, "url_prefix", envString("URL_PREFIX"), "serve everything under /<prefix>")
	str(&o.embeddedAddr, "embedded_broker_address", orDefault(envString("EMBEDDED_BROKER_ADDRESS"), "127.0.0.1:6380"), "where the embedded broker listens when no broker is configured")
	hidden(&o.embeddedPassword, "embedded_broker_password", envString("EMBEDDED_BROKER_PASSWORD"), "the password the embedded broker requires (default: generated at start and logged in the workers' URL); required on a non-loopback --embedded_broker_address")
	switchVar(&o.unauthenticated, "unauthenticated_api", "UNAUTHENTICATED_API", false, "allow serving the API without credentials on a non-loopback address")
	// Credentials are best given through the environment or a file, so
	// that they do not show in ps.
	hidden(&o.basicAuth, "basic_auth", envString("BASIC_AUTH"), "operators' HTTP basic credentials: user:password[,user:password] (password may be a bcrypt hash)")
	hidden(&o.viewerBasicAuth, "viewer_basic_auth", envString("VIEWER_BASIC_AUTH"), "viewers' (read-only) HTTP basic credentials: user:password[,...]")
	hidden(&o.authToken, "auth_token", envString("AUTH_TOKEN"), "operators' bearer tokens, comma-separated")
	hidden(&o.viewerAuthToken, "viewer_auth_token", envString("VIEWER_AUTH_TOKEN"), "viewers' bearer tokens, comma-separated")
	str(&o.authFile, "auth_file", envString("AUTH_FILE"), "credentials file: lines '<viewer|operator> basic user:password' or '<viewer|operator> token <token>'")
	switchVar(&o.persistent, "persistent", "PERSISTENT", false, "keep the history in --db and restore it at start (always on with the embedded broker)")
	secret(&o.db, "db", orDefault(envString("DB"), "stamen.db"), "the store's file, or a postgres:// URL: the history shared by a fleet of replicas")
	both("db_max_tasks", func(n string) {
		fs.IntVar(&o.dbMaxTasks, n, e.int("DB_MAX_TASKS", 0), "with --db postgres://: tasks kept in PostgreSQL, the oldest go first (0: no bound by count; --max_tasks bounds each replica's memory)")
	})
	both("db_timeout", func(n string) {
		fs.DurationVar(&o.dbTimeout, n, e.duration("DB_TIMEOUT", 2*time.Second), "with --db postgres://: bound on each read, past which it answers 503")
	})
	both("state_save_interval", func(n string) {
		fs.IntVar(&o.stateSaveInterval, n, e.int("STATE_SAVE_INTERVAL", 1000), "how often the history is written to --db, in milliseconds")
	})
	str(&o.eventQueue, "event_queue", envString("EVENT_QUEUE"),
		"RabbitMQ: consume events from this durable queue (created if missing, bound to celeryev), where they wait while no stamen runs; replicas naming the same queue share it")
	both("event_queue_ttl", func(n string) {
		fs.DurationVar(&o.eventQueueTTL, n, e.duration("EVENT_QUEUE_TTL", amqp.DefaultEventQueueTTL), "--event_queue's x-message-ttl: events older than this are dropped from it")
	})
	both("event_queue_max_length", func(n string) {
		fs.Int64Var(&o.eventQueueMaxLength, n, int64(e.int("EVENT_QUEUE_MAX_LENGTH", amqp.DefaultEventQueueMaxLength)),
			"--event_queue's x-max-length: beyond this many messages the oldest are dropped")
	})
	both("reconcile_after", func(n string) {
		fs.DurationVar(&o.reconcileAfter, n, e.duration("RECONCILE_AFTER", reconcile.DefaultAfter),
			"look up in the result backend the tasks left unfinished (PENDING, RECEIVED, STARTED, RETRY) this long")
	})
	both("reconcile_interval", func(n string) {
		fs.DurationVar(&o.reconcileInterval, n, e.duration("RECONCILE_INTERVAL", reconcile.DefaultInterval), "how often to look for such tasks")
	})
	both("reconcile_max_lookups", func(n string) {
		fs.IntVar(&o.reconcileMaxLookups, n, e.int("RECONCILE_MAX_LOOKUPS", reconcile.DefaultMaxLookups),
			"result documents read per reconciliation round, at most; 0 turns reconciliation off")
	})
	switchVar(&o.readOnly, "read_only", "READ_ONLY", false, "refuse every write operation with 403, whatever the credentials")
	switchVar(&o.xheaders, "xheaders", "XHEADERS", false, "take the client's address the audit log records from X-Real-Ip or X-Forwarded-For's last entry (only behind a proxy that sets them)")
	both("audit_max_age", func(n string) {
		fs.DurationVar(&o.auditMaxAge, n, e.duration("AUDIT_MAX_AGE", app.DefaultAuditMaxAge), "drop audit records older than this")
	})
	both("audit_max_records", func(n string) {
		fs.IntVar(&o.auditMaxRecords, n, e.int("AUDIT_MAX_RECORDS", app.DefaultAuditMaxRecords), "keep at most this many audit records, the newest")
	})
	both("max_event_streams", func(n string) {
		fs.IntVar(&o.maxEventStreams, n, e.int("MAX_EVENT_STREAMS", app.DefaultMaxEventStreams), "/api/events streams served at once; one more answers 503")
	})
	str(&o.allowedOrigins, "allowed_origins", envString("ALLOWED_ORIGINS"),
		"origins (scheme://host[:port], comma-separated) whose web pages may call the API from a browser, such as a dashboard served elsewhere: "+
			"they get CORS answers; write calls from the pages of every other origin are refused")
	str(&o.allowedHosts, "allowed_hosts", envString("ALLOWED_HOSTS"),
		"host names, comma-separated, that a request's Host may name besides localhost and IP addresses (a proxy's public name); "+
			"checked on a loopback --address or a --unix_socket, and on any address once given")
	str(&o.unixSocket, "unix_socket", envString("UNIX_SOCKET"), "serve the API on this unix socket (mode 0660) instead of --address and --port")
	str(&o.certFile, "certfile", envString("CERTFILE"), "serve HTTPS with this PEM certificate (chain), with --keyfile; read again when it changes")
	str(&o.keyFile, "keyfile", envString("KEYFILE"), "the PEM private key of --certfile")
	str(&o.caCerts, "ca_certs", envString("CA_CERTS"), "with --certfile: require client certificates signed by these PEM authorities")
	str(&o.debugAddr, "debug_addr", envString("DEBUG_ADDR"),
		"serve Go's profiling endpoints (/debug/pprof/; not cmdline, which may show passwords) on this host:port, apart from the API and without authentication: keep it on loopback; empty: off")
	str(&o.logLevel, "logging", orDefault(envString("LOGGING"), "info"), "log level: debug, info, warn, error")
	switchVar(&o.debug, "debug", "DEBUG", false, "Flower's debug switch: log at debug level when --logging is left at info")
	fs.BoolVar(&o.version, "version", false, "print the version, commit and build date, and exit")
	registerSignIn(&o.signIn, fs, e, str, hidden, both)
	return fs, registerFlowerOnly(fs, both)
}

// parseUseSSL reads --broker_use_ssl in the keys of the broker's library
// and --redis_backend_use_ssl in redis-py's, and reads the files they name,
// so that a typo or a missing file stops stamen before anything connects.
func (o *options) parseUseSSL() error {
	if o.brokerUseSSL != "" {
		kind, ok := brokerKind(o.broker)
		if !ok {
			return errors.New("--broker_use_ssl: needs a --broker redis://, rediss://, sentinel://, amqp:// or amqps:// URL (the embedded broker has no TLS)")
		}
		s, err := useSSL(o.brokerUseSSL, kind)
		if err != nil {
			return fmt.Errorf("--broker_use_ssl: %w", err)
		}
		o.brokerSSL = s
	}
	if o.redisBackendUseSSL != "" {
		backend := strings.TrimSpace(o.resultBackend)
		if !strings.HasPrefix(backend, "redis://") && !strings.HasPrefix(backend, "rediss://") {
			return errors.New("--redis_backend_use_ssl: needs a --result_backend redis:// or rediss:// URL")
		}
		s, err := useSSL(o.redisBackendUseSSL, brokertls.Redis)
		if err != nil {
			return fmt.Errorf("--redis_backend_use_ssl: %w", err)
		}
		o.backendSSL = s
	}
	return nil
}

// useSSL parses one broker_use_ssl-like option and builds its TLS
// configuration once, for the files' sake only: the brokers build their
// own from the settings.
func useSSL(raw string, kind brokertls.Kind) (*brokertls.Settings, error) {
	s, err := brokertls.Parse(raw, kind)
	if err != nil {
		return nil, err
	}
	if _, err := s.Config(); err != nil {
		return nil, err
	}
	return s, nil
}

// brokerKind is the library whose keys broker_use_ssl takes for this
// broker URL list (its first URL's scheme, as broker.Open chooses).
func brokerKind(broker string) (brokertls.Kind, bool) {
	first, _, _ := strings.Cut(strings.TrimSpace(broker), ";")
	scheme, _, _ := strings.Cut(strings.TrimSpace(first), "://")
	switch scheme {
	case "redis", "rediss", "sentinel":
		return brokertls.Redis, true
	case "amqp", "amqps", "pyamqp", "librabbitmq":
		return brokertls.AMQP, true
	}
	return 0, false
}

// reconcileLookups maps --reconcile_max_lookups to the app's setting,
// where 0 is the default and a negative number is off.
func reconcileLookups(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// validate checks the options that parse but cannot work, before anything
// connects.
func (o options) validate() error {
	if o.maxWorkers < 1 {
		return fmt.Errorf("--max_workers: want at least 1, got %d", o.maxWorkers)
	}
	if o.maxSeries < 1 {
		return fmt.Errorf("--max_series: want at least 1, got %d", o.maxSeries)
	}
	if o.eventQueue != "" {
		if err := amqp.ValidateEventQueue(o.eventQueue); err != nil {
			return fmt.Errorf("--event_queue: %w", err)
		}
	}
	if o.eventQueueTTL < time.Millisecond {
		return fmt.Errorf("--event_queue_ttl: want at least 1ms, got %s", o.eventQueueTTL)
	}
	if o.eventQueueMaxLength < 1 {
		return fmt.Errorf("--event_queue_max_length: want at least 1, got %d", o.eventQueueMaxLength)
	}
	if o.reconcileAfter <= 0 || o.reconcileInterval <= 0 {
		return errors.New("--reconcile_after and --reconcile_interval: want a positive duration")
	}
	if o.debugAddr != "" {
		if _, _, err := net.SplitHostPort(o.debugAddr); err != nil {
			return fmt.Errorf("--debug_addr: want host:port: %w", err)
		}
	}
	return nil
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

// A client that sends its headers or its request slowly holds a connection
// and a goroutine (slowloris): these bound how long. No write timeout: the
// event stream and apply's wait (--apply_timeout) answer late on purpose.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
)

func newServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler: h,
		// net/http's own complaints (a failed TLS handshake, an accept
		// error) go through the redacting handler, in the log's format.
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

func main() {
	if os.Getenv("GOGC") == "" {
		tuneGC()
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
	if o.version {
		fmt.Println(version.Get())
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintln(stderr, "stamen: invalid --logging:", o.logLevel)
		return 2
	}
	// Every line goes through redact, whatever the call site (or go-redis)
	// put in it.
	log := slog.New(redact.Handler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	// go-redis otherwise prints pool and dial trouble straight to stderr.
	goredis.SetLogger(redis.LibraryLogger{Log: log})
	for _, name := range o.flowerIgnored {
		log.Info("Flower's option ignored", slog.String("option", "--"+name), slog.String("why", ignoredWhy(name)))
	}

	authn, err := o.authenticator()
	if err != nil {
		log.Error("invalid credentials configuration", slog.Any("err", err))
		return 2
	}
	signInPages, err := o.signIn.setUp(authn, urlPrefixPath(o.urlPrefix), log)
	if err != nil {
		log.Error("invalid sign-in configuration", slog.Any("err", err))
		return 2
	}
	tlsCfg, err := tlsConfig(o, log)
	if err != nil {
		log.Error("invalid TLS configuration", slog.Any("err", err))
		return 2
	}
	// Safe by default: an API that can shut workers down is not offered to
	// the network without credentials unless the operator says so. A unix
	// socket is local, and its mode keeps other users out; with client
	// certificates (--ca_certs) only their holders reach the API.
	clientCerts := tlsCfg != nil && o.caCerts != ""
	if o.unixSocket == "" && !clientCerts && !app.IsLoopback(o.address) && !authn.Enabled() && !o.unauthenticated {
		log.Error("refusing to serve the API without authentication on a non-loopback address; " +
			"listen on 127.0.0.1, or pass --unauthenticated_api to accept the risk")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var dbPath string
	if o.persistent || o.broker == "" || app.IsPostgresURL(o.db) {
		// A PostgreSQL URL is the replicas' shared history: asking for it
		// is asking for persistence.
		dbPath = o.db
	}
	a, err := app.New(ctx, app.Config{
		DBPath:        dbPath,
		DBMaxTasks:    int64(max(o.dbMaxTasks, 0)),
		DBTimeout:     o.dbTimeout,
		BrokerURL:     o.broker,
		ResultBackend: o.resultBackend,

		BrokerTransportOptions:        o.brokerTransport,
		ResultBackendTransportOptions: o.resultTransport,
		BrokerUseSSL:                  o.brokerSSL,
		RedisBackendUseSSL:            o.backendSSL,

		EmbeddedAddr:      o.embeddedAddr,
		EmbeddedPassword:  o.embeddedPassword,
		MaxTasks:          o.maxTasks,
		MaxWorkers:        o.maxWorkers,
		MaxSeries:         o.maxSeries,
		NoTaskWorkerLabel: !o.taskWorkerLabel,
		MaxTaskAge:        o.maxTaskAge,
		InspectTimeout:    time.Duration(o.inspectTimeoutMS * float64(time.Millisecond)),
		BrokerTimeout:     o.brokerTimeout,
		ApplyTimeout:      o.applyTimeout,
		URLPrefix:         o.urlPrefix,
		Auth:              authn,
		SignIn:            signInPages,
		SaveInterval:      time.Duration(o.stateSaveInterval) * time.Millisecond,
		Logger:            log,

		PurgeOfflineWorkers: time.Duration(max(o.purgeOfflineWorkers, 0)) * time.Second,
		TaskRuntimeBuckets:  o.runtimeBuckets,
		NoEnableEvents:      !o.enableEvents,

		EventQueue:          o.eventQueue,
		EventQueueTTL:       o.eventQueueTTL,
		EventQueueMaxLength: o.eventQueueMaxLength,
		ReconcileAfter:      o.reconcileAfter,
		ReconcileInterval:   o.reconcileInterval,
		ReconcileMaxLookups: reconcileLookups(o.reconcileMaxLookups),
		ReadOnly:            o.readOnly,
		XHeaders:            o.xheaders,
		AuditMaxAge:         o.auditMaxAge,
		AuditMaxRecords:     o.auditMaxRecords,
		MaxEventStreams:     o.maxEventStreams,
		AllowedOrigins:      o.origins,
		// On loopback or a unix socket the only names are localhost's;
		// elsewhere the server's names are not known unless given.
		CheckHost:    o.unixSocket != "" || app.IsLoopback(o.address) || len(o.hosts) > 0,
		AllowedHosts: o.hosts,
	})
	if err != nil {
		log.Error("cannot start", slog.Any("err", err))
		return 1
	}
	defer a.Close()

	ln, where, err := listen(o)
	if err != nil {
		log.Error("cannot listen", slog.Any("err", err))
		return 1
	}
	if o.debugAddr != "" {
		dsrv, err := startDebug(o.debugAddr, log)
		if err != nil {
			ln.Close()
			log.Error("cannot start the profiling endpoints", slog.Any("err", err))
			return 1
		}
		// Closed, not shut down: a profile being taken is cut at exit
		// rather than waited for.
		defer dsrv.Close()
	}
	srv := newServer(a.Handler, log)
	// Shutdown waits for active requests; event streams are ended first.
	srv.RegisterOnShutdown(a.Events.Close)
	scheme := "http://"
	if tlsCfg != nil {
		scheme = "https://"
	}
	log.Info("stamen listening", slog.String("address", scheme+where),
		slog.String("broker", redact.URL(a.BrokerURL)))
	errc := make(chan error, 1)
	// The certificate comes from TLSConfig.GetConfigForClient, not files.
	srv.TLSConfig = tlsCfg
	go func() {
		if tlsCfg == nil {
			errc <- srv.Serve(ln)
			return
		}
		errc <- srv.ServeTLS(ln, "", "")
	}()
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
