package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// api is a thin HTTP client for the suite: the tests assert on Flower's JSON
// shapes, so they read raw bodies (the contract tests use gen/client).
type api struct {
	t    testing.TB
	base string
	hc   *http.Client
}

type response struct {
	Status int
	Body   []byte
	Header http.Header
}

func (r response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object (status %d): %v: %s", r.Status, err, r.Body)
	}
	return m
}

func (c *api) do(method, path string, query url.Values, body any) response {
	c.t.Helper()
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		default:
			j, err := json.Marshal(b)
			if err != nil {
				c.t.Fatal(err)
			}
			rd = bytes.NewReader(j)
		}
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

func (c *api) get(path string, query url.Values) response {
	c.t.Helper()
	return c.do(http.MethodGet, path, query, nil)
}

func (c *api) post(path string, query url.Values, body any) response {
	c.t.Helper()
	return c.do(http.MethodPost, path, query, body)
}

// mustOK fails unless the answer is 200 and returns its JSON object.
func (c *api) mustOK(r response) map[string]any {
	c.t.Helper()
	if r.Status != http.StatusOK {
		c.t.Fatalf("status %d, want 200: %s", r.Status, r.Body)
	}
	return r.JSON(c.t)
}

// eventually retries cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func q(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func pathEscape(s string) string { return url.PathEscape(s) }
