// Package redact is stamen's one way of hiding secrets: in what workers
// report (their configuration and stats), in log lines and in error
// messages. It masks, at any depth, what Celery's own
// conf.humanize(censored=True) masks and the few keys more that secretKey
// names, the password of every URL it finds in a string, and the secrets
// stamen was given (Register), wherever they appear.
package redact

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces a secret. It is the mask Celery's censored configuration
// uses (eight asterisks), so a value a worker already censored and one
// stamen censored look the same.
const Mask = "********"

// secretKey tells a setting or field whose value is hidden: the name
// contains, in any case, one of these words. The first nine are Celery's
// rule (celery.app.utils.HIDDEN_SETTINGS; 5.6 added BEAT_DBURI, the
// database URL SQLAlchemy beat schedulers read). stamen adds AUTH, COOKIE
// and CREDENTIAL because the rule also masks the task bodies kept in the
// audit log, where a kwarg such as "authorization": "Bearer ...", "cookie"
// or "credentials" is a secret Celery's words miss. Masking more than
// Celery only hides values (Celery's own cassandra_auth_provider, a class
// name, is one); it never shows a secret.
var secretKey = regexp.MustCompile(`(?i)API|TOKEN|KEY|SECRET|PASS|PROFANITIES_LIST|SIGNATURE|DATABASE|BEAT_DBURI|AUTH|COOKIE|CREDENTIAL`)

// Key reports whether a setting or field named name holds a secret by
// Celery's rule and stamen's additions: broker_password, my_api_key,
// aws_secret_access_key, sentinel_kwargs' password, database_url,
// authorization, session_cookie, credentials...
func Key(name string) bool {
	return secretKey.MatchString(name)
}

// scheme finds where a URL starts in free text.
var scheme = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://`)

// String masks the password of every URL in s, query parameters whose
// name is a secret by Key (redis://h/0?password=x), and every secret
// registered (Register) wherever it stands. A URL's password may
// hold '@', ':' and '/' (kombu and Go both take the userinfo up to the last
// '@' of the authority), so the password is taken to run from the first ':'
// after the scheme's "//" to the last '@' before the URL ends. A URL ends at
// white space, at ';' (Celery's separator of failover URLs) or where the
// next URL starts. This may mask a little more than a password (an '@' in a
// path), never less.
func String(s string) string {
	return maskKnown(maskURLs(s))
}

// maskURLs is String's URL rule.
func maskURLs(s string) string {
	locs := scheme.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	prev := 0
	for i, loc := range locs {
		end := len(s)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		if j := strings.IndexFunc(s[loc[1]:end], urlEnd); j >= 0 {
			end = loc[1] + j
		}
		b.WriteString(s[prev:loc[1]])
		b.WriteString(maskURLRest(s[loc[1]:end]))
		prev = end
	}
	b.WriteString(s[prev:])
	return b.String()
}

func urlEnd(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', ';':
		return true
	}
	return false
}

// maskURLRest masks one URL from just after its "scheme://".
func maskURLRest(rest string) string {
	var out string
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		userinfo := rest[:at]
		if c := strings.IndexByte(userinfo, ':'); c >= 0 {
			out = userinfo[:c+1] + Mask
		} else {
			// A user alone is not a secret (Go's url.Redacted keeps it).
			out = userinfo
		}
		rest = rest[at:]
	}
	q := strings.IndexByte(rest, '?')
	if q < 0 {
		return out + rest
	}
	out += rest[:q+1]
	query := rest[q+1:]
	frag := ""
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, frag = query[:h], query[h:]
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		if k, _, ok := strings.Cut(p, "="); ok && Key(k) {
			params[i] = k + "=" + Mask
		}
	}
	return out + strings.Join(params, "&") + frag
}

// URL masks a URL from stamen's own configuration (--broker,
// --result_backend) for a log line or an error. Unlike String it never
// echoes something that is not a URL, since where its password is could
// not be told.
func URL(raw string) string {
	for part := range strings.SplitSeq(raw, ";") {
		if part != "" && !scheme.MatchString(part) {
			return "<unparsable URL>"
		}
	}
	// The whole of raw is the URL list: white space does not end a URL
	// here, only ';'.
	parts := strings.Split(raw, ";")
	for i, p := range parts {
		if loc := scheme.FindStringIndex(p); loc != nil {
			parts[i] = p[:loc[1]] + maskURLRest(p[loc[1]:])
		}
	}
	return strings.Join(parts, ";")
}

// ParseError is what an error message may tell of url.Parse's error about
// a URL that may hold a password. url.Error repeats the whole URL, so only
// its reason is kept; and a reason that quotes a piece of the URL is
// replaced by one that quotes nothing: an unescaped '/', '?' or '#' in a
// password ends the host early, and the password's start is then quoted
// as the port (invalid port ":s3cret" after host), and an escape quotes
// three of its bytes (invalid URL escape "%s3").
func ParseError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	if strings.ContainsRune(err.Error(), '"') {
		return errors.New("malformed host, port or escape (a password holding '/', '?', '#' or '%' must be percent-encoded)")
	}
	return err
}

// Settings returns v, a JSON value as encoding/json decodes it into an
// interface (map[string]any, []any, string, json.Number, ...), with the
// value of every key that is a secret by Key masked, at any depth, as
// Celery's censored configuration does: an object under such a key is
// searched instead of masked (broker_transport_options stays readable, its
// sentinel_kwargs' password does not); any other value, a list included,
// becomes Mask. Every string left, keys included, goes through String. v is
// modified in place.
func Settings(v any) any {
	return walk(v, true)
}

// Strings is Settings without the keys rule: only the passwords of URLs in
// strings are masked. For data whose keys are not settings (a task's
// delivery_info has a routing_key, a stats total is keyed by task name).
func Strings(v any) any {
	return walk(v, false)
}

func walk(v any, keys bool) any {
	switch t := v.(type) {
	case string:
		return String(t)
	case []any:
		for i, e := range t {
			t[i] = walk(e, keys)
		}
		return t
	case map[string]any:
		var renamed map[string]any
		for k, e := range t {
			if _, isObject := e.(map[string]any); keys && !isObject && Key(k) {
				e = Mask
			} else {
				e = walk(e, keys)
			}
			if nk := String(k); nk != k {
				// A URL as a key: renamed after the loop, so that the
				// loop does not meet it again.
				delete(t, k)
				if renamed == nil {
					renamed = map[string]any{}
				}
				renamed[nk] = e
				continue
			}
			t[k] = e
		}
		for k, e := range renamed {
			t[k] = e
		}
		return t
	}
	return v
}
