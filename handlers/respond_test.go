package handlers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	oaerrors "github.com/go-openapi/errors"
	"github.com/go-openapi/runtime"

	"github.com/stamen-dev/stamen/restapi/operations/workers"
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

// TestEncodedBodyBytes: a generated responder answered through encoded
// writes what writeJSON wrote before the handlers returned it, byte for
// byte, status and Content-Type included, whatever format the runtime
// negotiated and whatever producer it hands over.
func TestEncodedBodyBytes(t *testing.T) {
	msg := `Unknown worker 'a<b> & "c" é'`
	want := httptest.NewRecorder()
	writeJSON(want, http.StatusOK, messageBody("%s", msg))
	got := httptest.NewRecorder()
	got.Header().Set("Content-Type", "text/csv") // as the runtime may have set it
	encoded(workers.NewShutdownWorkerOK().WithPayload(messageBody("%s", msg))).WriteResponse(got, runtime.JSONProducer())
	if got.Body.String() != want.Body.String() || got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
		t.Errorf("encoded: %d %s %q, want %d %s %q", got.Code, got.Header().Get("Content-Type"), got.Body,
			want.Code, want.Header().Get("Content-Type"), want.Body)
	}
	if !strings.Contains(want.Body.String(), `\u003cb\u003e \u0026`) || strings.HasSuffix(want.Body.String(), "\n") {
		t.Errorf("writeJSON no longer writes Marshal's bytes: %q", want.Body)
	}
}
