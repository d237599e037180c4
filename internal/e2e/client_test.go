package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
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

// taskState is the task's state as GET /api/task/info has it, or the
// status code when that does not answer 200.
func (c *api) taskState(id string) string {
	c.t.Helper()
	r := c.get("/api/task/info/"+id, nil)
	if r.Status != http.StatusOK {
		return fmt.Sprint(r.Status)
	}
	return fmt.Sprint(r.JSON(c.t)["state"])
}

// awaitWorkerReady waits until the worker has answered stamen's inspection
// and is online.
func (c *api) awaitWorkerReady(name string) {
	c.t.Helper()
	eventually(c.t, 30*time.Second, "the worker inspected and online", func() bool {
		_, inspected := c.mustOK(c.get("/api/workers", q("refresh", "true")))[name]
		return inspected && c.mustOK(c.get("/api/workers", q("status", "true")))[name] == true
	})
}

// awaitDoneAndRunning waits until every task of done has succeeded and
// running has started.
func (c *api) awaitDoneAndRunning(done []string, running string) {
	c.t.Helper()
	eventually(c.t, 30*time.Second, "the tasks done and the running one started", func() bool {
		for _, id := range done {
			if c.taskState(id) != "SUCCESS" {
				return false
			}
		}
		return c.taskState(running) == "STARTED"
	})
}

// eventually is testcluster.Eventually.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testcluster.Eventually(t, within, what, cond)
}

func q(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func pathEscape(s string) string { return url.PathEscape(s) }
