package auth

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// countingAuth is an Authenticator with an operator whose password is a
// bcrypt hash of cost 5, a viewer with a plain password, and a compare
// hook that records the cost of every bcrypt comparison it runs.
func countingAuth(t *testing.T) (*Authenticator, func() []int) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("hashed-pw"), 5)
	if err != nil {
		t.Fatal(err)
	}
	var a Authenticator
	if err := a.AddBasic("hasher:"+string(hash), Operator); err != nil {
		t.Fatal(err)
	}
	if err := a.AddBasic("plain:plain-pw", Viewer); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var costs []int
	a.compare = func(h, pw []byte) error {
		c, err := bcrypt.Cost(h)
		if err != nil {
			t.Errorf("compare with a bad hash: %v", err)
		}
		mu.Lock()
		costs = append(costs, c)
		mu.Unlock()
		return bcrypt.CompareHashAndPassword(h, pw)
	}
	take := func() []int {
		mu.Lock()
		defer mu.Unlock()
		out := costs
		costs = nil
		return out
	}
	return &a, take
}

func authBasic(t *testing.T, a *Authenticator, user, pass string) Role {
	t.Helper()
	r := httptest.NewRequest("GET", "/api/tasks", nil)
	r.SetBasicAuth(user, pass)
	role, err := a.Authenticate(r)
	if err != nil {
		t.Fatalf("Authenticate(%s): %v", user, err)
	}
	return role
}

// TestBcryptWorkDoesNotTellUsersApart: a wrong password costs one bcrypt
// comparison of the same cost whether the user exists, has a plain
// password, or does not exist. The old code ran bcrypt only for a known
// user, so its time told which names exist.
func TestBcryptWorkDoesNotTellUsersApart(t *testing.T) {
	a, take := countingAuth(t)
	want := []int{5}
	for _, tc := range []struct{ name, user, pass string }{
		{"known bcrypt user, wrong password", "hasher", "nope"},
		{"unknown user", "nobody", "nope"},
		{"unknown user with the right password of another", "nobody", "hashed-pw"},
		{"plain user, wrong password", "plain", "nope"},
	} {
		if role := authBasic(t, a, tc.user, tc.pass); role != None {
			t.Errorf("%s: role %v", tc.name, role)
		}
		if got := take(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: bcrypt comparisons of cost %v, want %v", tc.name, got, want)
		}
	}

	// The right password: one comparison, then none while it is cached.
	for i, want := range [][]int{{5}, nil, nil} {
		if role := authBasic(t, a, "hasher", "hashed-pw"); role != Operator {
			t.Fatalf("right password, try %d: role %v", i, role)
		}
		if got := take(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("right password, try %d: bcrypt comparisons %v, want %v", i, got, want)
		}
	}
	// A wrong password is never cached.
	for i := range 2 {
		authBasic(t, a, "hasher", "nope")
		if got := take(); len(got) != 1 {
			t.Errorf("wrong password, try %d: bcrypt comparisons %v, want one", i, got)
		}
	}
	// A plain password that matches needs no bcrypt.
	if role := authBasic(t, a, "plain", "plain-pw"); role != Viewer {
		t.Errorf("plain user: role %v", role)
	}
	if got := take(); len(got) != 0 {
		t.Errorf("plain user: bcrypt comparisons %v", got)
	}
}

// TestDummyHashTakesTheHighestCost: with hashes of several costs, an
// unknown user costs what the most expensive known one does.
func TestDummyHashTakesTheHighestCost(t *testing.T) {
	var a Authenticator
	for _, cost := range []int{4, 6, 5} {
		h, err := bcrypt.GenerateFromPassword([]byte("pw"), cost)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.AddBasic(fmt.Sprintf("u%d:%s", cost, h), Viewer); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := bcrypt.Cost(a.dummy); err != nil || c != 6 {
		t.Errorf("dummy hash cost %d (%v), want 6", c, err)
	}
}

// TestPasswordChecksAreBounded: N parallel wrong logins never run more
// than K bcrypt comparisons at once; the others are told ErrBusy at once
// instead of queueing, and the middleware answers them 503 with
// Retry-After.
func TestPasswordChecksAreBounded(t *testing.T) {
	const n, k = 20, 3
	a, _ := countingAuth(t)
	a.maxChecks = k
	var inflight, peak atomic.Int32
	entered := make(chan struct{}, n)
	release := make(chan struct{})
	a.compare = func(h, pw []byte) error {
		cur := inflight.Add(1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		entered <- struct{}{}
		<-release
		inflight.Add(-1)
		return bcrypt.ErrMismatchedHashAndPassword
	}
	type result struct {
		role Role
		err  error
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			r := httptest.NewRequest("GET", "/api/tasks", nil)
			r.SetBasicAuth(fmt.Sprintf("user%d", i%4), "wrong")
			role, err := a.Authenticate(r)
			results <- result{role, err}
		}()
	}
	// K checks start and hold their slots; every other request must be
	// refused while they do, without waiting for them.
	for range k {
		<-entered
	}
	timeout := time.After(30 * time.Second)
	for range n - k {
		select {
		case r := <-results:
			if !errors.Is(r.err, ErrBusy) || r.role != None {
				t.Errorf("over the bound: role %v, err %v; want ErrBusy", r.role, r.err)
			}
		case <-timeout:
			t.Fatal("requests over the bound queued instead of being refused")
		}
	}
	close(release)
	for range k {
		if r := <-results; r.err != nil || r.role != None {
			t.Errorf("within the bound: role %v, err %v; want None, nil", r.role, r.err)
		}
	}
	if p := peak.Load(); p != k {
		t.Errorf("at most %d bcrypt comparisons at once, want %d", p, k)
	}

	// Through the middleware, a refused check is a 503 with Retry-After.
	a.compare = func(h, pw []byte) error { return bcrypt.ErrMismatchedHashAndPassword }
	for range k {
		a.slots <- struct{}{} // every slot taken
	}
	h := a.Middleware(func(w http.ResponseWriter, _ *http.Request, status int, msg string) { http.Error(w, msg, status) },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the next handler ran") }))
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/api/tasks", nil)
	r.SetBasicAuth("hasher", "wrong")
	h.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("busy: status %d, headers %v; want 503 with Retry-After", w.Code, w.Header())
	}
}

// TestVerifiedCacheIsBounded: however many distinct credentials verify,
// the cache holds at most maxCached of them.
func TestVerifiedCacheIsBounded(t *testing.T) {
	a, _ := countingAuth(t)
	a.once.Do(a.init)
	for i := range maxCached + 100 {
		a.remember(a.credKey(fmt.Sprint("u", i), "p"), Viewer)
	}
	if n := len(a.verified); n != maxCached {
		t.Errorf("%d cached, want %d", n, maxCached)
	}
}
