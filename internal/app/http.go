package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	oaerrors "github.com/go-openapi/errors"
	"github.com/go-openapi/loads"
	"github.com/go-openapi/runtime"
	"github.com/go-openapi/runtime/middleware"
	"github.com/go-openapi/runtime/security"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stamen-dev/stamen/handlers"
	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/contract"
	"github.com/stamen-dev/stamen/internal/crossorigin"
	"github.com/stamen-dev/stamen/internal/docs"
	"github.com/stamen-dev/stamen/internal/metrics"
	"github.com/stamen-dev/stamen/internal/signin"
	"github.com/stamen-dev/stamen/restapi"
	"github.com/stamen-dev/stamen/restapi/operations"
)

// NewAPI builds the generated API with every handler registered, and fails
// when an operation of the spec has none.
func NewAPI(h *handlers.Handlers) (*operations.StamenAPI, error) {
	return newAPI(h.Register)
}

// newAPI builds the generated API with the handlers register installs.
// The generated constructor fills every operation with a stub that answers
// 501, so its Validate would pass with a handler forgotten: the stubs are
// taken out first, and Validate then names each operation left without
// one.
func newAPI(register func(*operations.StamenAPI)) (*operations.StamenAPI, error) {
	spec, err := loads.Analyzed(restapi.SwaggerJSON, "")
	if err != nil {
		return nil, fmt.Errorf("load the embedded spec: %w", err)
	}
	// The middleware reads the rules of the operations from the spec
	// (x-stamen-... extensions); a rule that cannot be read stops here.
	if _, err := contract.Load(); err != nil {
		return nil, err
	}
	api := operations.NewStamenAPI(spec)
	api.Logger = func(string, ...any) {}
	dropStubs(api)
	register(api)
	useMiddlewareAuth(api)
	if err := api.Validate(); err != nil {
		return nil, fmt.Errorf("spec and handlers disagree: %w", err)
	}
	return api, nil
}

// dropStubs sets to nil every operation handler of the generated API (its
// fields named ...Handler, of interface type), which the generated
// constructor fills with "not implemented" stubs.
func dropStubs(api *operations.StamenAPI) {
	v := reflect.ValueOf(api).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.IsExported() && strings.HasSuffix(f.Name, "Handler") && f.Type.Kind() == reflect.Interface {
			v.Field(i).SetZero()
		}
	}
}

// useMiddlewareAuth makes the spec's security schemes (basicAuth,
// bearerAuth) yield the role that auth.Middleware established. The
// middleware stays the one place that checks credentials and roles: it also
// guards the paths outside the spec (an unknown path answers 401, not 404,
// to a caller without credentials), and checking again here would run bcrypt
// twice per request. go-swagger's hooks (BasicAuthAuth, BearerAuthAuth) get
// only the user and password or the token, not the request, so the
// authenticators built from them are replaced by one that reads the role
// from the request's context; the hooks keep go-swagger's defaults, which
// refuse, and are never called. A request that did not go through the
// middleware carries no role, and the runtime answers it 401. Roles are not
// checked twice either: APIAuthorizer stays go-swagger's default, which
// lets every authenticated caller through.
func useMiddlewareAuth(api *operations.StamenAPI) {
	fromMiddleware := security.HTTPAuthenticator(func(r *http.Request) (bool, any, error) {
		role := auth.RoleFrom(r.Context())
		return role != auth.None, role, nil
	})
	api.BasicAuthenticator = func(security.UserPassAuthentication) runtime.Authenticator { return fromMiddleware }
	api.APIKeyAuthenticator = func(string, string, security.TokenAuthentication) runtime.Authenticator { return fromMiddleware }
}

func newHTTPHandler(h *handlers.Handlers, m *metrics.Metrics, log *audit.Log, cfg Config) (http.Handler, error) {
	api, err := NewAPI(h)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("OK"))
	})
	if cfg.ready != nil {
		mux.Handle("GET /readyz", readyHandler(cfg.ready))
	}
	// The served spec names the prefix as its basePath, so that a client
	// generated from it calls the operations where they are served.
	specJSON, err := docs.WithBasePath(restapi.SwaggerJSON, urlPrefixPath(cfg.URLPrefix))
	if err != nil {
		return nil, fmt.Errorf("set the served spec's basePath: %w", err)
	}
	mux.HandleFunc("GET /swagger.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(specJSON)
	})
	specYAML, err := docs.SpecYAML(specJSON)
	if err != nil {
		return nil, fmt.Errorf("convert the spec to YAML: %w", err)
	}
	mux.HandleFunc("GET /swagger.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(specYAML)
	})
	docsHandler := docs.Handler(handlers.WriteError)
	mux.Handle("GET /docs", docsHandler)
	mux.Handle("GET /docs/", docsHandler)
	mux.Handle("GET /metrics", m.Handler())
	if cfg.SignIn != nil {
		// Outside the spec: pages a browser is sent to, not operations.
		for _, p := range signin.Paths {
			mux.Handle(p, cfg.SignIn)
		}
	}
	// These paths answer GET, and HEAD, which the mux serves with GET's
	// handler, only. Another method would fall through to the API handler
	// below, whose router does not know them and answers 404; they answer
	// the API's own 405 (ServeError), Allow header included.
	notAllowed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.ServeError(w, r, oaerrors.MethodNotAllowed(r.Method, []string{http.MethodGet, http.MethodHead}))
	})
	for _, path := range []string{"/healthcheck", "/readyz", "/swagger.json", "/swagger.yaml", "/docs", "/docs/", "/metrics"} {
		mux.Handle(path, notAllowed)
	}
	// The API handler serves the spec's operations only; the spec and the
	// docs are the mux's. go-openapi's default handler puts its own spec
	// and Redoc middleware before the routes, and they answer every path
	// that cleans to /swagger.json or /docs: GET /swagger.json/ served the
	// spec.
	api.Middleware = func(b middleware.Builder) http.Handler { return api.Context().RoutesHandler(b) }
	mux.Handle("/", api.Serve(func(next http.Handler) http.Handler {
		// Runs after routing, so the operation is known.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sw := w.(*statusWriter) // observed's, which measures the call
			op := "unknown"
			var route *middleware.MatchedRoute
			if rt, _, ok := api.Context().RouteInfo(r); ok && rt != nil && rt.Operation != nil {
				route, op = rt, rt.Operation.ID
			}
			sw.op = op
			write := auth.IsWrite(r.Method)
			var rec audit.Record
			var count func() *int64
			if write && log != nil {
				rec = auditRecord(r, op, route, cfg.MaxBodyBytes, cfg.XHeaders)
				var ctx context.Context
				ctx, count = audit.WithCounter(r.Context())
				r = r.WithContext(ctx)
			}
			if write && cfg.ReadOnly {
				// Whatever the credentials: --read_only is a promise that
				// nothing changes through stamen.
				handlers.WriteError(sw, http.StatusForbidden, "Read only mode is enabled (--read_only): write operations are refused")
			} else {
				next.ServeHTTP(sw, r)
			}
			if write && log != nil {
				rec.Status, rec.Count = sw.status, count()
				log.Record(r.Context(), rec)
			}
		})
	}))

	// refuse answers a call refused before routing: a viewer's write call,
	// or a body over the body limit (Config.MaxBodyBytes). A write call of a known caller is
	// recorded in the audit log, without its body, as the calls that run
	// are. Calls without valid credentials are not: anyone could fill the
	// bounded log with them and push out the records of real calls.
	//
	// Every refusal is measured (observed), 401s included: a rise in them
	// is what an operator alerts on.
	refuse := func(w http.ResponseWriter, r *http.Request, status int, msg string) {
		handlers.WriteError(w, status, msg)
		op := "unknown"
		route, ok := api.Context().LookupRoute(r)
		if ok && route.Operation != nil {
			op = route.Operation.ID
		} else {
			route = nil
		}
		w.(*statusWriter).op = op
		if log == nil || !auth.IsWrite(r.Method) || auth.RoleFrom(r.Context()) == auth.None {
			return
		}
		rec := auditRecord(r, op, route, 0, cfg.XHeaders)
		rec.Status = status
		log.Record(r.Context(), rec)
	}

	guard, err := newGuard(m, cfg)
	if err != nil {
		return nil, err
	}
	// The Host check runs before the authenticator, which a page on a
	// rebinding name would otherwise reach: it could send credentials of
	// its choosing and tell from the answers whether they are right. So it
	// names the caller itself, for the audit log, only where that needs no
	// credentials: with none configured, everyone is the anonymous
	// operator, whose write calls are recorded (refused ones too).
	hostDeny := refuse
	if !cfg.Auth.Enabled() {
		hostDeny = func(w http.ResponseWriter, r *http.Request, status int, msg string) {
			cfg.Auth.Middleware(refuse, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				refuse(w, r, status, msg)
			})).ServeHTTP(w, r)
		}
	}

	var next http.Handler = mux
	next = handlers.FlowerParams(cfg.MaxBodyBytes, next)
	next = limitBody(cfg.MaxBodyBytes, refuse, next)
	// Other origins' write calls, refused with net/http's
	// CrossOriginProtection (CheckWrites says where its defaults differ
	// from what stamen needs). After the authenticator: a refused write
	// call of a known caller is recorded in the audit log, as refuse
	// records it, under the name of the credentials the browser added.
	next = guard.CheckWrites(refuse, next)
	if cfg.SignIn != nil {
		next = cfg.Auth.Middleware(refuse, dashboard(cfg.URLPrefix, next))
	} else {
		next = dashboard(cfg.URLPrefix, cfg.Auth.Middleware(refuse, next))
	}
	// Before the authenticator: preflights carry no credentials.
	next = guard.CORS(next)
	next = guard.CheckHost(hostDeny, next)
	next = observed(m, next)
	next = recoverPanics(cfg.Logger, next)
	return withPrefix(cfg.URLPrefix, next), nil
}

// newGuard builds the checks that keep other sites' pages out
// (crossorigin), counting their refusals in m and logging them to
// cfg.Logger.
func newGuard(m *metrics.Metrics, cfg Config) (*crossorigin.Guard, error) {
	counts := make(map[string]prometheus.Counter, len(crossorigin.Reasons))
	for _, reason := range crossorigin.Reasons {
		counts[reason] = m.BrowserRefusals(reason)
	}
	g, err := crossorigin.New(crossorigin.Config{
		AllowedOrigins: cfg.AllowedOrigins,
		CheckHost:      cfg.CheckHost,
		AllowedHosts:   cfg.AllowedHosts,
		Log:            cfg.Logger,
		Count:          func(reason string) { counts[reason].Inc() },
	})
	if err != nil {
		return nil, fmt.Errorf("browser checks: %w", err)
	}
	return g, nil
}

// limitBody caps what a handler can read from a request body. Only the
// POST operations read one, so only they answer 413 to a Content-Length over
// the cap (the spec declares it there); a GET's body is ignored, as Flower
// ignores it.
func limitBody(max int64, refuse func(w http.ResponseWriter, r *http.Request, status int, msg string), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.ContentLength > max {
			refuse(w, r, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		if r.Body == http.NoBody {
			// No body, said where go-openapi's HasBody looks before it
			// wraps the body in a peeking reader: a 4 KiB bufio.Reader a
			// request, 11% of the bytes the process allocated under
			// concurrent task-list reads (bench/RESULTS.md).
			r.Header.Set("Content-Length", "0")
		} else {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		next.ServeHTTP(w, r)
	})
}

// recoverPanics turns a panic into a 500 JSON answer instead of a dropped
// connection, and logs it.
func recoverPanics(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("panic serving request", slog.String("path", r.URL.Path), slog.Any("panic", v))
				handlers.WriteError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// urlPrefixPath is --url_prefix as a path: "/" and the leading slash but no
// trailing one ("/flower"), or "" without a prefix.
func urlPrefixPath(prefix string) string {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return ""
	}
	return "/" + prefix
}

// withPrefix serves everything under /<prefix> (Flower's url_prefix) and
// nothing outside it.
func withPrefix(prefix string, next http.Handler) http.Handler {
	p := urlPrefixPath(prefix)
	if p == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, p)
		if !ok || (rest != "" && rest[0] != '/') {
			handlers.WriteError(w, http.StatusNotFound, "path "+r.URL.Path+" was not found")
			return
		}
		if rest == "" {
			// The bare prefix is the prefix's "/", which is what the server
			// without a prefix answers for the path the client left empty:
			// send the client there. Passed on, the empty path would reach
			// the mux, which redirects it to the root, outside the prefix,
			// with an HTML body. The Location is relative ("./<last
			// segment>/"), resolved against the URL the client used, so it
			// stays right behind a proxy that serves the prefix under a
			// longer path, as /docs's redirect does.
			loc := "./" + url.PathEscape(p[strings.LastIndex(p, "/")+1:]) + "/"
			if r.URL.RawQuery != "" {
				loc += "?" + r.URL.RawQuery
			}
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = rest
		r2.URL.RawPath = ""
		next.ServeHTTP(w, r2)
	})
}

// observed measures every call of an API operation, refused ones included,
// by operation and status. The handlers below it name the operation on
// the statusWriter they are given; paths that are not operations (health
// check, metrics, spec, docs) name none and are not measured.
func observed(m *metrics.Metrics, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		if sw.op != "" {
			m.ObserveHTTP(sw.op, sw.status, time.Since(start))
		}
	})
}

// statusWriter remembers the status code, and the operation its handler
// names, for the metrics and the audit log; Unwrap keeps
// http.ResponseController (flushing the event stream) working.
type statusWriter struct {
	http.ResponseWriter
	status int
	op     string
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// auditRecord is what the audit log keeps of a write call before it runs:
// who, from where, which operation and its parameters (masked by
// audit.Params). The body is read from the buffer FlowerParams left (task
// bodies) and put back for the handler; with maxBody 0 it is not read.
// xheaders takes the client's address from a proxy's headers (clientAddr).
func auditRecord(r *http.Request, op string, route *middleware.MatchedRoute, maxBody int64, xheaders bool) audit.Record {
	p := auth.PrincipalFrom(r.Context())
	name := p.Name
	if name == "" {
		name = auth.Anonymous
	}
	path := map[string]string{}
	if route != nil {
		for _, rp := range route.Params {
			path[rp.Name] = rp.Value
		}
	}
	var body []byte
	if maxBody > 0 && r.Body != nil && r.ContentLength != 0 {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err == nil {
			body = b
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	var declared func(string) bool
	if route != nil {
		declared = func(name string) bool {
			for _, sp := range route.Parameters {
				if sp.In == "query" && sp.Name == name {
					return true
				}
			}
			return false
		}
	}
	params, cut := audit.Params(path, r.URL.Query(), declared, body)
	return audit.Record{
		Time: time.Now().UTC(), User: name, Role: p.Role.String(), Auth: p.Method, Remote: clientAddr(r, xheaders),
		Operation: op, Method: r.Method, Path: audit.Path(r.URL.Path),
		Params: params, ParamsCut: cut,
	}
}
