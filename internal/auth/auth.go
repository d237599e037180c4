// Package auth decides who may call which operation: HTTP basic credentials
// and bearer tokens, each with a role. Viewers may read; operators may also
// run tasks and control workers.
package auth

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"

	"github.com/stamen-dev/stamen/internal/redact"
)

// ErrBusy is Authenticate's answer when as many bcrypt password checks as
// it allows are already running: the caller should answer 503 at once
// rather than queue the request.
var ErrBusy = errors.New("too many password checks in progress")

// maxCached bounds the cache of verified bcrypt credentials.
const maxCached = 1024

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
//
// bcrypt is slow on purpose, which makes it a lever: when any bcrypt
// credential is configured, every basic-auth request runs exactly one
// bcrypt comparison, against the user's hash or, for a user that does not
// exist (or has a plain password), against a dummy hash of the highest
// configured cost, so the time taken does not tell which user names exist.
// At most maxChecks comparisons run at once; beyond that Authenticate
// answers ErrBusy immediately instead of queueing. Verified bcrypt
// credentials are remembered (a bounded cache keyed by an HMAC of user and
// password under a key drawn at start), so a legitimate client pays for
// bcrypt once, not on every request, and is not turned away by the bound
// while someone else floods it with wrong passwords.
type Authenticator struct {
	basic  []basicCred
	tokens []tokenCred

	// dummy is a bcrypt hash of a random password, of the highest cost
	// among the configured hashes; nil when none is configured.
	dummy []byte
	// maxChecks bounds the concurrent bcrypt comparisons; 0 means
	// GOMAXPROCS. Set before the first Authenticate.
	maxChecks int
	// compare is bcrypt.CompareHashAndPassword; tests count and hold it.
	compare func(hash, password []byte) error

	once     sync.Once
	slots    chan struct{}
	cacheKey [32]byte

	mu       sync.Mutex
	verified map[[32]byte]Role

	// proxy and session identify callers without an Authorization header
	// (UseProxy, UseSessions); public are the paths they serve to callers
	// not yet signed in (AddPublic).
	proxy, session SignIn
	public         map[string]bool
}

// Enabled reports whether any credential or sign-in is configured.
func (a *Authenticator) Enabled() bool {
	return a != nil && (len(a.basic) > 0 || len(a.tokens) > 0 || a.proxy != nil || a.session != nil)
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
		if !strings.Contains(user, pass) {
			// Masked wherever it shows, but not the user's name with it.
			redact.Register(pass)
		}
		c := basicCred{userHash: sha256.Sum256([]byte(user)), role: role}
		if isBcrypt(pass) {
			cost, err := bcrypt.Cost([]byte(pass))
			if err != nil {
				return fmt.Errorf("invalid bcrypt hash for user %q", user)
			}
			c.bcryptHash = []byte(pass)
			if err := a.raiseDummyCost(cost); err != nil {
				return err
			}
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
		redact.Register(tok)
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

// raiseDummyCost makes the dummy hash at least as costly as a configured
// one.
func (a *Authenticator) raiseDummyCost(cost int) error {
	if a.dummy != nil {
		if have, _ := bcrypt.Cost(a.dummy); have >= cost {
			return nil
		}
	}
	pw := make([]byte, 32)
	_, _ = rand.Read(pw)
	h, err := bcrypt.GenerateFromPassword(pw, cost)
	if err != nil {
		return fmt.Errorf("prepare the password checks: %w", err)
	}
	a.dummy = h
	return nil
}

// Authenticate returns the caller's role, None when the credentials are
// missing or wrong, and ErrBusy (with None) when a bcrypt check is needed
// and too many are running. Every configured credential is compared, in
// constant time, so the time taken does not tell which one nearly matched
// nor, with bcrypt credentials, whether the user name exists.
func (a *Authenticator) Authenticate(r *http.Request) (Role, error) {
	p, err := a.Identify(r)
	return p.Role, err
}

// Principal is who called: the credential's name, its role and how the
// caller proved it (Method).
type Principal struct {
	// Name is the basic-auth user name; for a bearer token, "token-" and
	// the first 8 hex digits of the token's SHA-256 (a name that tells
	// tokens apart in the audit log without revealing them); "anonymous"
	// when stamen runs without credentials.
	Name string
	Role Role
	// Method is how the caller signed in: MethodBasic, MethodBearer,
	// MethodCert, MethodNone, or a sign-in's own (a provider's name for a
	// session, "proxy" for a proxy's identity header).
	Method string
}

// The methods of the credentials Authenticator checks itself.
const (
	MethodBasic  = "basic"
	MethodBearer = "bearer"
	MethodCert   = "cert"
	// MethodNone is a caller let in without credentials, none being
	// configured.
	MethodNone = "none"
)

// Anonymous is every caller when no credential is configured.
const Anonymous = "anonymous"

// TokenName is the name a bearer token goes by in the audit log.
func TokenName(token string) string {
	h := sha256.Sum256([]byte(token))
	return "token-" + hex.EncodeToString(h[:4])
}

// Identify is Authenticate, with the name of the credential that matched
// (empty when none did).
func (a *Authenticator) Identify(r *http.Request) (Principal, error) {
	h := r.Header.Get("Authorization")
	scheme, value, _ := strings.Cut(h, " ")
	value = strings.TrimSpace(value)
	switch strings.ToLower(scheme) {
	case "basic":
		user, pass, ok := r.BasicAuth()
		if !ok {
			return Principal{}, nil
		}
		role, err := a.basicRole(user, pass)
		if role == None {
			return Principal{}, err
		}
		return Principal{Name: user, Role: role, Method: MethodBasic}, err
	case "bearer":
		best := None
		th := sha256.Sum256([]byte(value))
		for _, c := range a.tokens {
			if subtle.ConstantTimeCompare(th[:], c.hash[:]) == 1 && c.role > best {
				best = c.role
			}
		}
		if best == None {
			return Principal{}, nil
		}
		return Principal{Name: TokenName(value), Role: best, Method: MethodBearer}, nil
	}
	return Principal{}, nil
}

func (a *Authenticator) basicRole(user, pass string) (Role, error) {
	uh, ph := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	best := None
	var hashed []*basicCred // the user's bcrypt entries
	for i := range a.basic {
		c := &a.basic[i]
		userOK := subtle.ConstantTimeCompare(uh[:], c.userHash[:]) == 1
		if c.bcryptHash != nil {
			if userOK {
				hashed = append(hashed, c)
			}
			continue
		}
		if userOK && subtle.ConstantTimeCompare(ph[:], c.passHash[:]) == 1 && c.role > best {
			best = c.role
		}
	}
	if a.dummy == nil || (best > None && len(hashed) == 0) {
		// No bcrypt configured, or a plain password matched: the
		// comparisons above took the same time whatever the user.
		return best, nil
	}
	a.once.Do(a.init)
	key := a.credKey(user, pass)
	a.mu.Lock()
	cached, ok := a.verified[key]
	a.mu.Unlock()
	if ok {
		return max(best, cached), nil
	}
	select {
	case a.slots <- struct{}{}:
		defer func() { <-a.slots }()
	default:
		return None, ErrBusy
	}
	compare := a.compare
	if compare == nil {
		compare = bcrypt.CompareHashAndPassword
	}
	if len(hashed) == 0 {
		// An unknown user (or a plain one with a wrong password) costs
		// what a known one does.
		_ = compare(a.dummy, []byte(pass))
		return best, nil
	}
	verified := None
	for _, c := range hashed {
		if compare(c.bcryptHash, []byte(pass)) == nil && c.role > verified {
			verified = c.role
		}
	}
	if verified > None {
		a.remember(key, verified)
	}
	return max(best, verified), nil
}

func (a *Authenticator) init() {
	n := a.maxChecks
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	a.slots = make(chan struct{}, n)
	_, _ = rand.Read(a.cacheKey[:])
	a.verified = map[[32]byte]Role{}
}

// credKey identifies a user and password in the cache without keeping
// either: an HMAC under a key drawn at start, so the cache cannot be
// looked up, or its entries guessed, from outside the process.
func (a *Authenticator) credKey(user, pass string) [32]byte {
	m := hmac.New(sha256.New, a.cacheKey[:])
	_ = binary.Write(m, binary.BigEndian, uint64(len(user)))
	m.Write([]byte(user))
	m.Write([]byte(pass))
	var k [32]byte
	m.Sum(k[:0])
	return k
}

func (a *Authenticator) remember(key [32]byte, role Role) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.verified) >= maxCached {
		for k := range a.verified { // drop an arbitrary entry
			delete(a.verified, k)
			break
		}
	}
	a.verified[key] = role
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
