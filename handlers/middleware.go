package handlers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// taskBodyPrefixes are the operations whose parameters come in a JSON body.
// Flower parses their body as JSON whatever the Content-Type says.
var taskBodyPrefixes = []string{"/api/task/apply/", "/api/task/async-apply/", "/api/task/send-task/"}

// FlowerParams adapts requests the way Flower's clients send them to the
// spec's parameters, before routing:
//   - form-encoded POST bodies become query parameters (Flower reads
//     query and form alike; the spec declares them in: query, and Swagger 2.0
//     cannot declare both);
//   - the three task-execution operations get Content-Type application/json;
//   - `ratelimit` (the name Flower's code reads) is accepted for `rateLimit`
//     (the name in Flower's spec).
func FlowerParams(maxBody int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if hasPrefix(r.URL.Path, taskBodyPrefixes) {
				r.Header.Set("Content-Type", "application/json")
			} else if err := formToQuery(r, maxBody); err != nil {
				writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
				return
			}
		}
		if err := strictParams(r.URL.Query()); err != nil {
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
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return errors.New("invalid Content-Type")
	}
	var form url.Values
	switch mt {
	case "application/x-www-form-urlencoded":
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			return errors.New("cannot read the request body")
		}
		if int64(len(body)) > maxBody {
			return errors.New("request body too large")
		}
		form, err = url.ParseQuery(string(body))
		if err != nil {
			return errors.New("invalid form body")
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(maxBody); err != nil {
			return errors.New("invalid multipart body")
		}
		form = r.MultipartForm.Value
	default:
		// JSON or anything else: control operations take no body (Flower
		// ignores a JSON body there), so drop it rather than fail on it.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
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

// boolParams and numberParams are the typed query parameters of the API.
// go-openapi reads an unparsable boolean as false and an empty number as
// absent; Flower answers 400 for both, and so does stamen.
var (
	boolParams   = []string{"refresh", "status", "terminate"}
	numberParams = []string{"limit", "offset", "n", "min", "max", "timeout", "soft", "hard"}
)

func strictParams(q url.Values) error {
	for _, name := range boolParams {
		for _, v := range q[name] {
			if _, ok := parseFlowerBool(v); !ok {
				return fmt.Errorf("invalid %s %q: want true or false", name, v)
			}
		}
	}
	for _, name := range numberParams {
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
