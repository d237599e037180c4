// Package auth decides who may call which operation: HTTP basic credentials
// and bearer tokens, each with a role. Viewers may read; operators may also
// run tasks and control workers.
package auth

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Role is what a caller may do.
type Role int

const (
	// None is an unauthenticated caller.
	None Role = iota
	// Viewer may call the read operations.
	Viewer
	// Operator may call every operation.
	Operator
)

func (r Role) String() string {
	switch r {
	case Viewer:
		return "viewer"
	case Operator:
		return "operator"
	}
	return "none"
}

// ParseRole reads "viewer" or "operator".
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "viewer":
		return Viewer, nil
	case "operator":
		return Operator, nil
	}
	return None, fmt.Errorf("unknown role %q: want viewer or operator", s)
}

type basicCred struct {
	userHash [32]byte
	// Exactly one of passHash (plain password, hashed here so comparisons
	// take constant time whatever its length) and bcryptHash is set.
	passHash   [32]byte
	bcryptHash []byte
	role       Role
}

type tokenCred struct {
	hash [32]byte
	role Role
}

// Authenticator holds the configured credentials.
type Authenticator struct {
	basic  []basicCred
	tokens []tokenCred
}

// Enabled reports whether any credential is configured.
func (a *Authenticator) Enabled() bool {
	return a != nil && (len(a.basic) > 0 || len(a.tokens) > 0)
}

// AddBasic adds comma-separated user:password pairs with a role. A password
// that starts with $2a$, $2b$ or $2y$ is a bcrypt hash.
func (a *Authenticator) AddBasic(pairs string, role Role) error {
	for _, pair := range splitList(pairs) {
		user, pass, ok := strings.Cut(pair, ":")
		if !ok || user == "" || pass == "" {
			// Never echo the pair: it holds a password.
			return errors.New("basic auth credentials must be user:password pairs separated by commas")
		}
		c := basicCred{userHash: sha256.Sum256([]byte(user)), role: role}
		if isBcrypt(pass) {
			if _, err := bcrypt.Cost([]byte(pass)); err != nil {
				return fmt.Errorf("invalid bcrypt hash for user %q", user)
			}
			c.bcryptHash = []byte(pass)
		} else {
			c.passHash = sha256.Sum256([]byte(pass))
		}
		a.basic = append(a.basic, c)
	}
	return nil
}

// AddTokens adds comma-separated bearer tokens with a role.
func (a *Authenticator) AddTokens(tokens string, role Role) error {
	for _, tok := range splitList(tokens) {
		if len(tok) < 16 {
			return errors.New("bearer tokens must be at least 16 characters long")
		}
		a.tokens = append(a.tokens, tokenCred{hash: sha256.Sum256([]byte(tok)), role: role})
	}
	return nil
}

// AddFile reads credentials from a file, one per line:
//
//	<role> basic <user>:<password or bcrypt hash>
//	<role> token <token>
//
// Blank lines and lines starting with # are ignored.
func (a *Authenticator) AddFile(r io.Reader) error {
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			return fmt.Errorf("credentials file line %d: want <role> basic|token <value>", n)
		}
		role, err := ParseRole(fields[0])
		if err != nil {
			return fmt.Errorf("credentials file line %d: %w", n, err)
		}
		switch fields[1] {
		case "basic":
			err = a.AddBasic(fields[2], role)
		case "token":
			err = a.AddTokens(fields[2], role)
		default:
			err = fmt.Errorf("unknown kind %q", fields[1])
		}
		if err != nil {
			return fmt.Errorf("credentials file line %d: %w", n, err)
		}
	}
	return sc.Err()
}

// Authenticate returns the caller's role, None when the credentials are
// missing or wrong. Every configured credential is compared, so the time
// taken does not tell which one nearly matched.
func (a *Authenticator) Authenticate(r *http.Request) Role {
	h := r.Header.Get("Authorization")
	scheme, value, _ := strings.Cut(h, " ")
	value = strings.TrimSpace(value)
	best := None
	switch strings.ToLower(scheme) {
	case "basic":
		user, pass, ok := r.BasicAuth()
		if !ok {
			return None
		}
		uh, ph := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
		for _, c := range a.basic {
			userOK := subtle.ConstantTimeCompare(uh[:], c.userHash[:]) == 1
			var passOK bool
			if c.bcryptHash != nil {
				// bcrypt is slow on purpose; only run it for the right user.
				passOK = userOK && bcrypt.CompareHashAndPassword(c.bcryptHash, []byte(pass)) == nil
			} else {
				passOK = subtle.ConstantTimeCompare(ph[:], c.passHash[:]) == 1
			}
			if userOK && passOK && c.role > best {
				best = c.role
			}
		}
	case "bearer":
		th := sha256.Sum256([]byte(value))
		for _, c := range a.tokens {
			if subtle.ConstantTimeCompare(th[:], c.hash[:]) == 1 && c.role > best {
				best = c.role
			}
		}
	}
	return best
}

func isBcrypt(s string) bool {
	return strings.HasPrefix(s, "$2a$") || strings.HasPrefix(s, "$2b$") || strings.HasPrefix(s, "$2y$")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
