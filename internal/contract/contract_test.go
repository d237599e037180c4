package contract

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/go-openapi/loads"

	"github.com/stamen-dev/stamen/restapi"
	"github.com/stamen-dev/stamen/restapi/operations"
)

// TestExtensionsAreKnown refuses an x-stamen-... key in swagger.yaml that
// this package does not read: a misspelt rule would otherwise be ignored.
func TestExtensionsAreKnown(t *testing.T) {
	var doc any
	if err := json.Unmarshal(restapi.SwaggerJSON, &doc); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if strings.HasPrefix(k, "x-stamen-") {
					seen[k] = true
					if !slices.Contains(Known, k) {
						t.Errorf("%s: %s is no extension stamen reads (known: %v)", path, k, Known)
					}
				}
				walk(path+"/"+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		}
	}
	walk("", doc)
	for _, k := range Known {
		if !seen[k] {
			t.Errorf("%s is read but swagger.yaml uses it nowhere", k)
		}
	}
}

// TestEmbeddedRules: the rules read from swagger.yaml, as the middleware
// relied on before they moved there.
func TestEmbeddedRules(t *testing.T) {
	c := Embedded()
	get := func(id string) *Operation {
		t.Helper()
		o, ok := c.Operation(id)
		if !ok {
			t.Fatalf("no operation %s", id)
		}
		return o
	}
	if o := get("listAudit"); !o.OperatorOnly || !slices.Equal(o.Numbers, []string{"limit", "offset"}) {
		t.Errorf("listAudit: %+v", o)
	}
	if o := get("revokeTasks"); !slices.Equal(o.Once, []string{"dry_run", "ids", "max", "terminate"}) ||
		!slices.Equal(o.Bools, []string{"dry_run", "terminate"}) || !slices.Equal(o.Numbers, []string{"max"}) {
		t.Errorf("revokeTasks: %+v", o)
	}
	if o := get("purgeQueue"); !slices.Equal(o.Once, []string{"force"}) {
		t.Errorf("purgeQueue: %+v", o)
	}
	if o := get("setTaskRateLimit"); o.Aliases["ratelimit"] != "rateLimit" {
		t.Errorf("setTaskRateLimit: %+v", o)
	}
	var body []string
	for _, o := range c.Operations() {
		if o.JSONBody {
			body = append(body, o.ID)
		}
		if o.OperatorOnly && o.ID != "listAudit" {
			t.Errorf("%s is operator-only", o.ID)
		}
	}
	if want := []string{"applyTask", "asyncApplyTask", "retryTask", "sendTask"}; !slices.Equal(body, want) {
		t.Errorf("operations with a JSON body: %v, want %v", body, want)
	}
}

// TestMatch: a request matches the operation go-openapi routes it to,
// trailing slash and escapes included, or the path's operation under
// another method; nothing else.
func TestMatch(t *testing.T) {
	c := Embedded()
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/api/audit", "listAudit"},
		{"GET", "/api/audit/", "listAudit"},
		{"HEAD", "/api/audit", "listAudit"},
		{"POST", "/api/audit", "listAudit"},
		{"POST", "/api/task/apply/a%2Fb", "applyTask"},
		{"POST", "/api/task/apply/a/b", ""},
		{"POST", "/api/task/apply/", ""},
		{"GET", "/api/tasks", "listTasks"},
		{"POST", "/api/tasks/revoke", "revokeTasks"},
		{"GET", "/healthcheck", ""},
		{"GET", "/api/auditx", ""},
	} {
		o, ok := c.Match(tc.method, tc.path)
		got := ""
		if ok {
			got = o.ID
		}
		if got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

// TestBadExtensions: a rule that cannot mean what it says stops the load.
func TestBadExtensions(t *testing.T) {
	for _, tc := range []struct{ name, op, param, want string }{
		{"not a boolean", `"x-stamen-operator-only": "yes"`, "", "must be true or false"},
		{"operator-only on a POST", `"x-stamen-operator-only": true`, "", "GET operations only"},
		{"once on a path parameter", "", `"x-stamen-once": true`, "query parameters only"},
		{"empty alias", "", `"x-stamen-alias": ""`, "must be a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "get"
			if strings.Contains(tc.name, "POST") {
				method = "post"
			}
			ext := ""
			if tc.op != "" {
				ext = tc.op + ","
			}
			pext := ""
			if tc.param != "" {
				pext = "," + tc.param
			}
			raw := `{"swagger": "2.0", "info": {"title": "t", "version": "1"}, "paths": {"/a/{id}": {"` + method + `": {` + ext +
				`"operationId": "a", "parameters": [{"name": "id", "in": "path", "required": true, "type": "string"` + pext + `}],` +
				`"responses": {"200": {"description": "ok"}}}}}}`
			doc, err := loads.Analyzed(json.RawMessage(raw), "")
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(doc, operations.NewStamenAPI(doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want an error saying %q", err, tc.want)
			}
		})
	}
}
