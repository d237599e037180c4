// Package audit records who called which write operation: a record per
// call, refused calls of known callers included, kept in a Store (the
// bbolt file's, internal/store/bolt; PostgreSQL's, internal/store/pg; or
// Memory without --persistent) and logged as one slog line. Parameters are masked by internal/redact before
// a record leaves the request.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/stamen-dev/stamen/internal/redact"
)

// Record is one call of a write operation.
type Record struct {
	Time time.Time `json:"time"`
	User string    `json:"user"`
	Role string    `json:"role"`
	// Auth is how the user signed in (auth.Principal.Method): basic,
	// token, cert, none, proxy, or a sign-in provider (oidc, google, ...).
	Auth      string         `json:"auth,omitempty"`
	Remote    string         `json:"remote"` // socket's ip:port; a proxy's ip with --xheaders (app's clientAddr)
	Operation string         `json:"operation"`
	Method    string         `json:"method"`
	Path      string         `json:"path"`
	Params    map[string]any `json:"params,omitempty"`
	// ParamsCut is how many query parameters the record does not keep
	// (Params' bound on those the operation does not declare).
	ParamsCut int `json:"params_cut,omitempty"`
	Status    int `json:"status"`
	// Count is how many items a bulk operation acted on, when the handler
	// said (SetCount).
	Count *int64 `json:"count,omitempty"`
}

// Query selects records, newest first.
type Query struct {
	// Limit <= 0 means DefaultLimit.
	Limit, Offset   int
	Operation, User string
	// Since (inclusive) and Until (exclusive) bound the time when set.
	Since, Until time.Time
}

// DefaultLimit is a query's limit when it gives none.
const DefaultLimit = 100

// Match reports whether r passes q's filters.
func (q Query) Match(r *Record) bool {
	return (q.Operation == "" || r.Operation == q.Operation) &&
		(q.User == "" || r.User == q.User) &&
		(q.Since.IsZero() || !r.Time.Before(q.Since)) &&
		(q.Until.IsZero() || r.Time.Before(q.Until))
}

// Store keeps the records. Every method honours ctx.
type Store interface {
	Append(ctx context.Context, r Record) error
	// List returns the records matching q, newest first.
	List(ctx context.Context, q Query) ([]Record, error)
	// Prune drops the records older than before, then the oldest beyond
	// maxRecords (when > 0), and returns how many went.
	Prune(ctx context.Context, before time.Time, maxRecords int) (int, error)
}

// Memory is a Store in memory, for stamen without --persistent: bounded by
// Max records, the oldest dropped first.
type Memory struct {
	Max  int
	mu   sync.Mutex
	recs []Record // oldest first
}

// Append adds r, dropping the oldest record when Max is reached.
func (m *Memory) Append(_ context.Context, r Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Max > 0 && len(m.recs) >= m.Max {
		n := len(m.recs) - m.Max + 1
		m.recs = append(m.recs[:0], m.recs[n:]...)
	}
	// Keep time order even when the clock steps back.
	i := sort.Search(len(m.recs), func(i int) bool { return m.recs[i].Time.After(r.Time) })
	m.recs = append(m.recs, Record{})
	copy(m.recs[i+1:], m.recs[i:])
	m.recs[i] = r
	return nil
}

// List returns the matching records, newest first.
func (m *Memory) List(_ context.Context, q Query) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	var out []Record
	skip := q.Offset
	for i := len(m.recs) - 1; i >= 0 && len(out) < limit; i-- {
		r := &m.recs[i]
		if !q.Match(r) {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		out = append(out, *r)
	}
	return out, nil
}

// Prune drops records older than before and the oldest beyond maxRecords.
func (m *Memory) Prune(_ context.Context, before time.Time, maxRecords int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := sort.Search(len(m.recs), func(i int) bool { return !m.recs[i].Time.Before(before) })
	if maxRecords > 0 && len(m.recs)-n > maxRecords {
		n = len(m.recs) - maxRecords
	}
	m.recs = append(m.recs[:0], m.recs[n:]...)
	return n, nil
}

// Params is what a record keeps of a call's parameters: the path
// parameters, the query parameters (one value as a string, several as a
// list) and the JSON body under "body", masked by redact's rules: a value
// under a key that is a secret by redact.Key, Celery's rule and stamen's
// additions (a kwargs "api_token" or "authorization", a "password" query
// parameter), becomes the mask at any depth, and every URL
// keeps its user but not its password.
//
// Each parameter is bounded (MaxParamBytes), and so is their number: the
// query parameters the operation declares (declared; nil declares none)
// are all kept, since the spec bounds them, and of the others, which the
// operation ignores, at most MaxExtraParams (in name order, within
// MaxExtraParamBytes). A query string may hold thousands of names within
// the header limit, and a record is kept per write call, refused calls of
// viewers included, up to --audit_max_records. cut is how many were not
// kept.
func Params(path map[string]string, query url.Values, declared func(name string) bool, body []byte) (params map[string]any, cut int) {
	out := make(map[string]any, len(path)+len(query)+1)
	for k, v := range path {
		out[k] = v
	}
	var extra []string
	for k, vs := range query {
		if declared == nil || !declared(k) {
			extra = append(extra, k)
			continue
		}
		out[k] = queryValue(vs)
	}
	if len(body) > 0 {
		var v any
		if json.Unmarshal(body, &v) == nil {
			out["body"] = v
		} else {
			// Not JSON (the call is refused with a 400): not kept, since
			// secrets are found by their keys only in decoded JSON, and a
			// cut or mistyped body ({"kwargs": {"password": "..."}) is
			// still full of them.
			out["body"] = fmt.Sprintf("(%d bytes, not JSON: not kept)", len(body))
		}
	}
	if len(out) > 0 {
		out = redact.Settings(any(out)).(map[string]any)
		for k, v := range out {
			out[k] = boundParam(v)
		}
	}
	sort.Strings(extra)
	size, kept := 0, 0
	for _, k := range extra {
		if _, taken := out[k]; taken || kept == MaxExtraParams {
			// A name the path or the body has is theirs: the operation
			// reads that one.
			cut++
			continue
		}
		v := boundParam(redact.Settings(map[string]any{k: queryValue(query[k])}).(map[string]any)[k])
		b, _ := json.Marshal(v)
		if size+len(k)+len(b) > MaxExtraParamBytes {
			cut++
			continue
		}
		size += len(k) + len(b)
		kept++
		out[k] = v
	}
	if len(out) == 0 {
		return nil, cut
	}
	return out, cut
}

// queryValue is a query parameter as a record keeps it: one value as a
// string, several as a list.
func queryValue(vs []string) any {
	if len(vs) == 1 {
		return vs[0]
	}
	l := make([]any, len(vs))
	for i, v := range vs {
		l[i] = v
	}
	return l
}

// boundParam cuts a parameter's JSON to MaxParamBytes. It is applied after
// masking, so a cut can only shorten a masked text.
func boundParam(v any) any {
	b, err := json.Marshal(v)
	if err != nil || len(b) <= MaxParamBytes {
		return v
	}
	return fmt.Sprintf("%s... (%d bytes, cut)", truncate(b, MaxParamBytes), len(b))
}

// MaxParamBytes bounds each parameter a record keeps (as JSON): a record
// per write call, up to --audit_max_records of them, must not keep
// megabyte task bodies.
const MaxParamBytes = 4096

// MaxExtraParams and MaxExtraParamBytes bound the query parameters a
// record keeps beyond those the operation declares.
const (
	MaxExtraParams     = 16
	MaxExtraParamBytes = 4096
)

// MaxPathBytes bounds the path a record keeps.
const MaxPathBytes = 1024

// Path is the request path as a record keeps it: passwords masked, then
// cut to MaxPathBytes.
func Path(p string) string {
	p = redact.String(p)
	if len(p) <= MaxPathBytes {
		return p
	}
	return fmt.Sprintf("%s... (%d bytes, cut)", truncate([]byte(p), MaxPathBytes), len(p))
}

// truncate cuts b to at most n bytes without splitting a UTF-8 sequence.
func truncate(b []byte, n int) []byte {
	for n > 0 && n < len(b) && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}

type countKey struct{}

type counter struct {
	n   atomic.Int64
	set atomic.Bool
}

// WithCounter returns a context that carries a count slot for SetCount, and
// a function that reads it (nil when no handler set it).
func WithCounter(ctx context.Context) (context.Context, func() *int64) {
	c := &counter{}
	return context.WithValue(ctx, countKey{}, c), func() *int64 {
		if !c.set.Load() {
			return nil
		}
		n := c.n.Load()
		return &n
	}
}

// SetCount records how many items a bulk operation acted on; the audit
// record of the request whose context this is carries it. Without a
// counter in ctx (no audit) it does nothing.
func SetCount(ctx context.Context, n int64) {
	if c, ok := ctx.Value(countKey{}).(*counter); ok {
		c.n.Store(n)
		c.set.Store(true)
	}
}

// Log is an audit log: a Store, its bounds and the slog line per record.
type Log struct {
	Store Store
	// MaxAge and MaxRecords bound the store (0: unbounded by that).
	MaxAge     time.Duration
	MaxRecords int
	// Timeout bounds each store call.
	Timeout time.Duration
	Logger  *slog.Logger
	Now     func() time.Time

	appended atomic.Int64
}

// pruneEvery is how many appends go between two prunes besides the
// periodic ones, so that a burst of calls cannot grow the store far past
// MaxRecords before the next tick.
const pruneEvery = 256

// Record stores r and logs it. A store error is logged, not returned: the
// call it records has already been answered.
func (l *Log) Record(ctx context.Context, r Record) {
	args := []any{
		slog.Time("time", r.Time), slog.String("user", r.User), slog.String("role", r.Role), slog.String("auth", r.Auth),
		slog.String("remote", r.Remote), slog.String("operation", r.Operation),
		slog.String("method", r.Method), slog.String("path", redact.String(r.Path)), slog.Int("status", r.Status),
	}
	if r.Count != nil {
		args = append(args, slog.Int64("count", *r.Count))
	}
	if r.ParamsCut > 0 {
		args = append(args, slog.Int("params_cut", r.ParamsCut))
	}
	if r.Params != nil {
		if b, err := json.Marshal(r.Params); err == nil {
			args = append(args, slog.String("params", string(b)))
		}
	}
	l.Logger.Info("audit", args...)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout())
	defer cancel()
	if err := l.Store.Append(ctx, r); err != nil {
		l.Logger.Error("audit record not stored", slog.String("operation", r.Operation), slog.Any("err", err))
	}
	if l.appended.Add(1)%pruneEvery == 0 {
		l.Prune(ctx)
	}
}

func (l *Log) timeout() time.Duration {
	if l.Timeout > 0 {
		return l.Timeout
	}
	return 5 * time.Second
}

// Prune applies the bounds once.
func (l *Log) Prune(ctx context.Context) {
	var before time.Time
	if l.MaxAge > 0 {
		now := time.Now
		if l.Now != nil {
			now = l.Now
		}
		before = now().Add(-l.MaxAge)
	}
	if before.IsZero() && l.MaxRecords <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout())
	defer cancel()
	if n, err := l.Store.Prune(ctx, before, l.MaxRecords); err != nil {
		l.Logger.Error("audit prune failed", slog.Any("err", err))
	} else if n > 0 {
		l.Logger.Debug("audit records dropped", slog.Int("records", n))
	}
}

// List reads the store.
func (l *Log) List(ctx context.Context, q Query) ([]Record, error) {
	if q.Offset < 0 {
		return nil, errors.New("offset must not be negative")
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout())
	defer cancel()
	return l.Store.List(ctx, q)
}
