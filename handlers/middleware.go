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

	"github.com/stamen-dev/stamen/internal/contract"
)

// FlowerParams adapts requests the way Flower's clients send them to the
// spec's parameters, before routing:
//   - form-encoded bodies, of a POST or a GET, become query parameters
//     (Flower reads query and form alike; the spec declares them in: query,
//     and Swagger 2.0 cannot declare both);
//   - the operations that take a body parameter get Content-Type
//     application/json: Flower parses their body as JSON whatever the
//     Content-Type says;
//   - a query parameter's other name (x-stamen-alias: `ratelimit`, the
//     name Flower's code reads, for `rateLimit`, the name in Flower's
//     spec) is accepted for it.
//
// What each operation takes is read from the spec (internal/contract).
func FlowerParams(maxBody int64, next http.Handler) http.Handler {
	rules := contract.Embedded()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, _ := rules.MatchRequest(r)
		// A GET may carry a form too: Flower (Tornado) reads form fields
		// whatever the method, and go-openapi would refuse the body (415).
		if r.Method == http.MethodPost || r.ContentLength != 0 {
			var err error
			if r.Method == http.MethodPost && op != nil && op.JSONBody {
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
				writeJSON(w, status, errorModel(err.Error()))
				return
			}
		}
		if op == nil {
			next.ServeHTTP(w, r)
			return
		}
		if err := strictParams(op, r.URL.Query()); err != nil {
			writeJSON(w, http.StatusBadRequest, errorModel(err.Error()))
			return
		}
		if len(op.Aliases) > 0 {
			q := r.URL.Query()
			if renameAliases(q, op.Aliases) {
				r.URL.RawQuery = q.Encode()
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

// renameAliases gives the value of a parameter's other name to the
// parameter, when the parameter itself is absent, and reports whether q
// changed.
func renameAliases(q url.Values, aliases map[string]string) bool {
	changed := false
	for alias, name := range aliases {
		if _, ok := q[name]; ok {
			continue
		}
		if v, ok := q[alias]; ok {
			q[name] = v
			delete(q, alias)
			changed = true
		}
	}
	return changed
}

// strictParams refuses what go-openapi would let through: it reads an
// unparsable boolean as false and an empty number as absent; Flower answers
// 400 for both, and so does stamen, but only where the operation takes the
// parameter: Flower ignores the ones an operation does not read. A
// parameter marked x-stamen-once (stamen's own operations that act on many
// tasks or a whole queue) given twice is refused: Flower's rule, the last
// value counts, would make dry_run=true&dry_run=false revoke.
func strictParams(op *contract.Operation, q url.Values) error {
	for _, name := range op.Once {
		if len(q[name]) > 1 {
			return fmt.Errorf("%s is given %d times: give it once", name, len(q[name]))
		}
	}
	for _, name := range op.Bools {
		for _, v := range q[name] {
			if _, ok := parseFlowerBool(v); !ok {
				return fmt.Errorf("invalid %s %q: want true or false", name, v)
			}
		}
	}
	for _, name := range op.Numbers {
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
