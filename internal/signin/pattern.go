// Package signin signs people in through a browser: OpenID Connect and
// OAuth 2 providers (Flower's --auth_provider handlers by name, or any
// OpenID Connect issuer), into a stateless session cookie that every
// replica given the same secret reads; and through a trusted proxy's
// identity header. Who may sign in, and with which role, is decided by
// Rules: Flower's --auth e-mail pattern, role patterns and groups.
package signin

import (
	"errors"
	"regexp"
	"strings"
)

// Pattern is a Flower --auth e-mail pattern, read with Flower's rules:
//
//   - a|b|c: exactly one of these addresses;
//   - one ".*" in the local part (.*@example.com): any run of the
//     characters an address's local part may hold, the rest literal;
//   - anything else: exactly this address.
//
// A pattern with more than one "*", a "*" in the domain, or a "*" with
// "|" is refused, as Flower refuses it at start. Addresses are compared as
// written, case included, as Flower compares them.
type Pattern struct {
	src   string
	exact []string
	re    *regexp.Regexp
}

// localPartChars is what ".*" stands for: the characters RFC 5322 allows
// in an unquoted local part, as Flower's wildcard allows them. Neither "@"
// nor a space is one, so the wildcard cannot reach into the domain.
const localPartChars = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~.\\-]*"

// ParsePattern reads a --auth pattern; the empty string is no pattern
// (nil).
func ParsePattern(s string) (*Pattern, error) {
	if s == "" {
		return nil, nil
	}
	switch {
	case strings.Count(s, "*") > 1:
		return nil, errors.New("more than one '*'")
	case strings.Contains(s, "*") && strings.Contains(s, "|"):
		return nil, errors.New("'*' and '|' together")
	case strings.Contains(s[strings.LastIndexByte(s, '@')+1:], "*"):
		return nil, errors.New("'*' in the domain")
	}
	p := &Pattern{src: s}
	switch {
	case strings.Contains(s, "|"):
		p.exact = strings.Split(s, "|")
	case strings.Contains(s, "*"):
		// Only ".*" is a wildcard; a "*" without its "." stays literal,
		// as in Flower.
		quoted := strings.Replace(regexp.QuoteMeta(s), `\.\*`, localPartChars, 1)
		re, err := regexp.Compile("^(?:" + quoted + ")$")
		if err != nil {
			return nil, err
		}
		p.re = re
	default:
		p.exact = []string{s}
	}
	return p, nil
}

// Match tells whether email is one the pattern admits; a nil pattern
// admits none.
func (p *Pattern) Match(email string) bool {
	if p == nil || email == "" {
		return false
	}
	if p.re != nil {
		return p.re.MatchString(email)
	}
	for _, e := range p.exact {
		if e == email {
			return true
		}
	}
	return false
}

func (p *Pattern) String() string {
	if p == nil {
		return ""
	}
	return p.src
}
