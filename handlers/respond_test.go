package handlers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
