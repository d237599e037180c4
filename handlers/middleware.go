package handlers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// taskBodyPrefixes are the operations whose parameters come in a JSON body.
// Flower parses their body as JSON whatever the Content-Type says.
var taskBodyPrefixes = []string{"/api/task/apply/", "/api/task/async-apply/", "/api/task/send-task/", "/api/task/retry/"}

// FlowerParams adapts requests the way Flower's clients send them to the
// spec's parameters, before routing:
//   - form-encoded bodies, of a POST or a GET, become query parameters
//     (Flower reads query and form alike; the spec declares them in: query,
//     and Swagger 2.0 cannot declare both);
//   - the three task-execution operations get Content-Type application/json;
//   - `ratelimit` (the name Flower's code reads) is accepted for `rateLimit`
//     (the name in Flower's spec).
func FlowerParams(maxBody int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A GET may carry a form too: Flower (Tornado) reads form fields
		// whatever the method, and go-openapi would refuse the body (415).
		if r.Method == http.MethodPost || r.ContentLength != 0 {
			var err error
			if r.Method == http.MethodPost && hasPrefix(r.URL.Path, taskBodyPrefixes) {
				err = bufferBody(r, maxBody)
				r.Header.Set("Content-Type", "application/json")
			} else {
				err = formToQuery(r, maxBody)
			}
			if err != nil {
				status := http.StatusBadRequest
				if errors.Is(err, errTooLarge) {
					status = http.StatusRequestEntityTooLarge
				}
				writeJSON(w, status, errorBody{Error: err.Error()})
				return
			}
		}
		if err := strictParams(r.URL.Path, r.URL.Query()); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/task/rate-limit/") {
			q := r.URL.Query()
			if _, ok := q["rateLimit"]; !ok {
				if v, ok := q["ratelimit"]; ok {
					q["rateLimit"] = v
					delete(q, "ratelimit")
					r.URL.RawQuery = q.Encode()
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// errTooLarge is a body over the limit. A Content-Length over it is refused
// before the body is read (the app's limitBody); a chunked body shows its
// size only while it is read, here, so that it gets the same 413 and not the
// JSON decoder's 400.
var errTooLarge = errors.New("request body too large")

// readBody reads the whole body, at most maxBody bytes.
func readBody(r *http.Request, maxBody int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge) || int64(len(body)) > maxBody:
		return nil, errTooLarge
	case err != nil:
		return nil, errors.New("cannot read the request body")
	}
	return body, nil
}

// bufferBody reads a task body into memory, so that its size is known
// before go-openapi decodes it.
func bufferBody(r *http.Request, maxBody int64) error {
	body, err := readBody(r, maxBody)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	return nil
}

func hasPrefix(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// formToQuery moves form fields into the query string (the form wins over
// the query, as in Flower where the last value of a name counts) and drops
// the body, which no query-parameter operation reads.
func formToQuery(r *http.Request, maxBody int64) error {
	// Read whatever comes, so that an oversized body is refused the same
	// whatever its Content-Type.
	body, err := readBody(r, maxBody)
	if err != nil {
		return err
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		dropBody(r)
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return errors.New("invalid Content-Type")
	}
	var form url.Values
	switch mt {
	case "application/x-www-form-urlencoded":
		form, err = url.ParseQuery(string(body))
		if err != nil {
			return errors.New("invalid form body")
		}
	case "multipart/form-data":
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err := r.ParseMultipartForm(maxBody); err != nil {
			return errors.New("invalid multipart body")
		}
		form = r.MultipartForm.Value
	default:
		// JSON or anything else: control operations take no body (Flower
		// ignores a JSON body there), so drop it rather than fail on it.
		dropBody(r)
		return nil
	}
	q := r.URL.Query()
	for k, v := range form {
		q[k] = v
	}
	r.URL.RawQuery = q.Encode()
	dropBody(r)
	return nil
}

func dropBody(r *http.Request) {
	r.Body = io.NopCloser(bytes.NewReader(nil))
	r.ContentLength = 0
	r.Header.Del("Content-Type")
	r.Header.Del("Content-Length")
}

// typedParams are the boolean and number query parameters of each
// operation, by path (a prefix when it ends with /). go-openapi reads an
// unparsable boolean as false and an empty number as absent; Flower answers
// 400 for both, and so does stamen, but only where the operation takes the
// parameter: Flower ignores the ones an operation does not read.
// TestTypedParamsFollowTheSpec keeps this table equal to swagger.yaml's.
// On the operations marked once, stamen's own that act on many tasks or a
// whole queue, such a parameter given twice is refused: Flower's rule, the
// last value counts, would make dry_run=true&dry_run=false revoke.
var typedParams = []struct {
	path           string
	bools, numbers []string
	once           bool
}{
	{"/api/tasks", nil, []string{"limit", "offset"}, false},
	{"/api/workers", []string{"refresh", "status"}, nil, false},
	{"/api/task/apply/", nil, []string{"timeout"}, false},
	{"/api/task/result/", nil, []string{"timeout"}, false},
	{"/api/task/timeout/", nil, []string{"soft", "hard"}, false},
	{"/api/task/revoke/", []string{"terminate"}, nil, false},
	{"/api/tasks/revoke", []string{"dry_run", "terminate"}, []string{"max"}, true},
	{"/api/tasks/retry", []string{"dry_run"}, []string{"max"}, true},
	{"/api/worker/pool/grow/", nil, []string{"n"}, false},
	{"/api/worker/pool/shrink/", nil, []string{"n"}, false},
	{"/api/worker/pool/autoscale/", nil, []string{"min", "max"}, false},
	{"/api/queues/purge/", []string{"force"}, nil, true},
	{"/api/audit", nil, []string{"limit", "offset"}, false},
	{"/api/stats/tasks", nil, []string{"step", "window"}, false},
}

// paramTypes returns the boolean and number query parameters the operation
// at path takes, and whether each may be given only once.
func paramTypes(path string) (bools, numbers []string, once bool) {
	for _, tp := range typedParams {
		if path == tp.path || (strings.HasSuffix(tp.path, "/") && strings.HasPrefix(path, tp.path)) {
			return tp.bools, tp.numbers, tp.once
		}
	}
	return nil, nil, false
}

func strictParams(path string, q url.Values) error {
	bools, numbers, once := paramTypes(path)
	for _, name := range slices.Concat(bools, numbers) {
		if once && len(q[name]) > 1 {
			return fmt.Errorf("%s is given %d times: give it once", name, len(q[name]))
		}
	}
	for _, name := range bools {
		for _, v := range q[name] {
			if _, ok := parseFlowerBool(v); !ok {
				return fmt.Errorf("invalid %s %q: want true or false", name, v)
			}
		}
	}
	for _, name := range numbers {
		for _, v := range q[name] {
			if strings.TrimSpace(v) == "" {
				return fmt.Errorf("%s must not be empty", name)
			}
		}
	}
	return nil
}

// parseFlowerBool accepts what Flower (Tornado) accepts.
func parseFlowerBool(v string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "y", "yes", "t", "true", "on", "1":
		return true, true
	case "n", "no", "f", "false", "off", "0":
		return false, true
	}
	return false, false
}
