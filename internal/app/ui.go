package app

import (
	"net/http"
	"path"
	"strings"

	"github.com/stamen-dev/stamen/internal/ui"
)

// dashboard serves the web dashboard for every GET or HEAD outside the API
// and the server's own paths (health and readiness, metrics, spec, docs,
// sign-in), and hands every other request to next. Without a sign-in it
// sits outside the authentication middleware: the page and its assets hold
// no data (the page asks the API, which checks the caller), and a caller
// who signs in with a token needs the page to do so. With a sign-in
// (newHTTPHandler puts it inside), a person without a session is sent to
// sign in and comes back to the page asked for.
func dashboard(prefix string, next http.Handler) http.Handler {
	page := ui.Handler(urlPrefixPath(prefix))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && isDashboardPath(r.URL.Path) {
			page.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isDashboardPath(p string) bool {
	// Cleaned, so that paths that clean to the server's own (/swagger.json/,
	// //api/x) keep their answers.
	p = path.Clean(p)
	switch p {
	case "/api", "/healthcheck", "/readyz", "/metrics", "/swagger.json", "/swagger.yaml", "/docs", "/login", "/logout":
		return false
	}
	// /debug/ is where --debug_addr serves the profiler, on its own port:
	// on the API's it stays a 404, not a page that could be taken for it.
	return !strings.HasPrefix(p, "/api/") && !strings.HasPrefix(p, "/docs/") && p != "/debug" && !strings.HasPrefix(p, "/debug/")
}
