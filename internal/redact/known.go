package redact

import (
	"cmp"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
)

// known are the secrets stamen was given (Register), longest first: String
// masks them wherever it finds them. The URL and key rules find a secret
// by where it stands; a server's error that repeats what it was sent
// ("ERR unknown command 'auth', with args beginning with: 'pw'") puts it
// where no rule looks.
var known atomic.Pointer[[]string]

// MinKnown is the shortest value Register keeps: masking every occurrence
// of a short word ("guest") would hide more than the secret, and a URL's
// password is masked by the URL rule whatever its length.
const MinKnown = 8

// Register adds secrets that String masks wherever they appear. Values
// shorter than MinKnown are left to the URL and key rules.
func Register(values ...string) {
	for {
		old := known.Load()
		var next []string
		if old != nil {
			next = slices.Clone(*old)
		}
		added := false
		for _, v := range values {
			if len(v) >= MinKnown && !slices.Contains(next, v) {
				next = append(next, v)
				added = true
			}
		}
		if !added {
			return
		}
		// Longest first: a secret that holds another is masked whole.
		slices.SortFunc(next, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
		if known.CompareAndSwap(old, &next) {
			return
		}
	}
}

// RegisterURLs registers the password of each URL in raws (a list of
// failover URLs separated by ';' included), as written and decoded, and
// the values of its query parameters that are secrets by Key, unless the
// rest of the URL shows them anyway.
func RegisterURLs(raws ...string) {
	for _, raw := range raws {
		for part := range strings.SplitSeq(raw, ";") {
			loc := scheme.FindStringIndex(part)
			if loc == nil {
				continue
			}
			// What the URL rule leaves: a value found there (a password
			// that is also the user's name, or the database's, or
			// "postgres" in a postgres:// URL) is not registered, or the
			// URL itself would be masked where it is shown.
			public := maskURLs(part)
			register := func(v string) {
				for _, v := range []string{v, unescaped(v)} {
					if !strings.Contains(public, v) {
						Register(v)
					}
				}
			}
			rest := part[loc[1]:]
			if at := strings.LastIndexByte(rest, '@'); at >= 0 {
				if _, pass, ok := strings.Cut(rest[:at], ":"); ok {
					register(pass)
				}
				rest = rest[at:]
			}
			if _, query, ok := strings.Cut(rest, "?"); ok {
				query, _, _ = strings.Cut(query, "#")
				for p := range strings.SplitSeq(query, "&") {
					if k, v, ok := strings.Cut(p, "="); ok && Key(k) {
						register(v)
					}
				}
			}
		}
	}
}

// unescaped is v percent-decoded (what a server is sent, and may repeat),
// or v when it does not decode.
func unescaped(v string) string {
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v
}

// RegisterSettings registers, from a JSON object (transport options), every
// string under a key that is a secret by Key, at any depth, and the
// passwords of the URLs in its strings. Text that is not JSON registers
// nothing.
func RegisterSettings(text string) {
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		return
	}
	var visit func(v any, secret bool)
	visit = func(v any, secret bool) {
		switch t := v.(type) {
		case string:
			if secret {
				Register(t)
			}
			RegisterURLs(t)
		case []any:
			for _, e := range t {
				visit(e, secret)
			}
		case map[string]any:
			for k, e := range t {
				visit(e, Key(k))
			}
		}
	}
	visit(v, false)
}

// maskKnown replaces every registered secret in s by Mask.
func maskKnown(s string) string {
	p := known.Load()
	if p == nil {
		return s
	}
	for _, v := range *p {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Mask)
		}
	}
	return s
}
