package handlers

import (
	"bytes"
	"errors"
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
