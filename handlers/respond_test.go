package handlers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	oaerrors "github.com/go-openapi/errors"
)

// TestErrorBodiesHoldNoURLPassword: whatever an error quotes, its body
// does not show a URL's password.
func TestErrorBodiesHoldNoURLPassword(t *testing.T) {
	const secret = "SecA@SecB:SecC/SecD"
	quoted := errors.New("dial redis://:" + secret + "@h:6379/0;redis://u:" + secret + "@h2/0: refused")
	for name, write := range map[string]func(http.ResponseWriter){
		"apiError": func(w http.ResponseWriter) {
			apiError(http.StatusServiceUnavailable, "op: %v", quoted).WriteResponse(w, nil)
		},
		"ServeError": func(w http.ResponseWriter) { ServeError(w, nil, quoted) },
		"WriteError": func(w http.ResponseWriter) { WriteError(w, http.StatusBadRequest, quoted.Error()) },
	} {
		rec := httptest.NewRecorder()
		write(rec)
		body := rec.Body.String()
		for _, part := range []string{"SecA", "SecB", "SecC", "SecD"} {
			if strings.Contains(body, part) {
				t.Errorf("%s shows %s: %s", name, part, body)
			}
		}
		if !strings.Contains(body, `"error"`) {
			t.Errorf("%s: not an error body: %s", name, body)
		}
	}
}

// TestErrorBodyBytes: the error body is the spec's Error model written as
// encoding/json writes it, byte for byte what stamen has always answered
// (no trailing newline, <, > and & escaped), whichever writer sends it.
func TestErrorBodyBytes(t *testing.T) {
	const want = `{"error":"a \u003cb\u003e \u0026 \"c\" é"}`
	msg := `a <b> & "c" é`
	for name, write := range map[string]func(http.ResponseWriter){
		"apiError":   func(w http.ResponseWriter) { apiError(http.StatusBadRequest, "%s", msg).WriteResponse(w, nil) },
		"WriteError": func(w http.ResponseWriter) { WriteError(w, http.StatusBadRequest, msg) },
		"ServeError": func(w http.ResponseWriter) {
			ServeError(w, nil, oaerrors.New(http.StatusBadRequest, "%s", msg))
		},
	} {
		rec := httptest.NewRecorder()
		write(rec)
		if got := rec.Body.String(); got != want || rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s %q, want 400 application/json %q", name, rec.Code, rec.Header().Get("Content-Type"), got, want)
		}
	}
}
