// Package contract reads, from the parsed swagger.yaml, the rules about
// operations that the HTTP layers apply before go-openapi routes a request:
// which query parameters are typed, which ones may be given once only,
// which names a parameter also answers to, whose body is JSON whatever its
// Content-Type, and which read operations only operators may call. The
// spec states them (its types, its body parameters and the x-stamen-...
// vendor extensions that docs/spec-extensions.md lists), so that an
// operation added to swagger.yaml needs no table edited here or in the
// middleware.
//
// A request is matched to its operation by go-openapi's own router, built
// from the same spec, so the rules apply to exactly the requests the API
// serves as that operation (a trailing slash included).
package contract

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/go-openapi/loads"
	"github.com/go-openapi/runtime/middleware"
	"github.com/go-openapi/spec"

	"github.com/stamen-dev/stamen/restapi"
	"github.com/stamen-dev/stamen/restapi/operations"
)

// The vendor extensions stamen reads. docs/spec-extensions.md says what
// each means; TestExtensionsAreKnown refuses one in swagger.yaml that is
// not listed here.
const (
	// ExtOperatorOnly, true on a read operation, refuses it to viewers.
	ExtOperatorOnly = "x-stamen-operator-only"
	// ExtOnce, true on a query parameter, refuses the parameter given
	// more than once.
	ExtOnce = "x-stamen-once"
	// ExtAlias, a string on a query parameter, is another name the
	// parameter is accepted under.
	ExtAlias = "x-stamen-alias"
)

// Known lists every x-stamen-... extension this package reads.
var Known = []string{ExtOperatorOnly, ExtOnce, ExtAlias}

// Operation is what the spec says of one operation, for the layers that
// run before routing.
type Operation struct {
	ID     string
	Method string
	// Path is the spec's path template (/api/task/info/{taskid}).
	Path string
	// Bools and Numbers are the boolean and the integer or number query
	// parameters, sorted. go-openapi reads an unparsable boolean as false
	// and an empty number as absent, where Flower answers 400.
	Bools, Numbers []string
	// Once are the query parameters that may be given once only.
	Once []string
	// Aliases maps another name of a query parameter to its name.
	Aliases map[string]string
	// JSONBody is set when the operation takes a body parameter: the body
	// is read as JSON whatever the Content-Type says, as Flower does.
	JSONBody bool
	// OperatorOnly is set on the read operations viewers may not call.
	OperatorOnly bool
}

// Contract is the rules of one spec, and the router that finds a
// request's operation.
type Contract struct {
	ops    []*Operation
	byID   map[string]*Operation
	router middleware.Router
}

// New reads the rules of doc. api routes requests: the router has a route
// for each operation api has a handler for (the generated API's stubs
// count, once its Init has run).
func New(doc *loads.Document, api middleware.RoutableAPI) (*Contract, error) {
	c := &Contract{byID: map[string]*Operation{}}
	an := doc.Analyzer
	for method, paths := range an.Operations() {
		for path, op := range paths {
			o, err := operation(method, path, op, an.ParamsFor(method, path))
			if err != nil {
				return nil, err
			}
			if _, dup := c.byID[o.ID]; dup {
				return nil, fmt.Errorf("operation id %q is used twice", o.ID)
			}
			c.ops = append(c.ops, o)
			c.byID[o.ID] = o
		}
	}
	sort.Slice(c.ops, func(i, j int) bool { return c.ops[i].ID < c.ops[j].ID })
	c.router = middleware.DefaultRouter(doc, api)
	for _, o := range c.ops {
		if got, ok := c.Match(o.Method, concrete(o.Path)); !ok || got != o {
			return nil, fmt.Errorf("%s: the router does not find %s %s (has api a handler for it?)", o.ID, o.Method, o.Path)
		}
	}
	return c, nil
}

// concrete fills a path template's parameters with "x".
func concrete(template string) string {
	return pathParam.ReplaceAllString(template, "x")
}

var pathParam = regexp.MustCompile(`{[^}]*}`)

func operation(method, path string, op *spec.Operation, params map[string]spec.Parameter) (*Operation, error) {
	if op.ID == "" {
		return nil, fmt.Errorf("%s %s has no operationId", method, path)
	}
	o := &Operation{ID: op.ID, Method: method, Path: path, Aliases: map[string]string{}}
	only, err := boolExt(op.Extensions, ExtOperatorOnly)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.ID, err)
	}
	if only && method != http.MethodGet {
		// Every other method needs an operator already: saying so of a
		// POST would suggest a viewer may call the POSTs not marked.
		return nil, fmt.Errorf("%s: %s is for GET operations only", op.ID, ExtOperatorOnly)
	}
	o.OperatorOnly = only
	for _, p := range params {
		if p.In == "body" {
			o.JSONBody = true
		}
		once, err := boolExt(p.Extensions, ExtOnce)
		if err != nil {
			return nil, fmt.Errorf("%s, parameter %s: %w", op.ID, p.Name, err)
		}
		alias, hasAlias := p.Extensions.GetString(ExtAlias)
		if _, set := p.Extensions[ExtAlias]; set && (!hasAlias || alias == "") {
			return nil, fmt.Errorf("%s, parameter %s: %s must be a name", op.ID, p.Name, ExtAlias)
		}
		if p.In != "query" {
			if once || hasAlias {
				return nil, fmt.Errorf("%s, parameter %s: %s and %s apply to query parameters only", op.ID, p.Name, ExtOnce, ExtAlias)
			}
			continue
		}
		switch p.Type {
		case "boolean":
			o.Bools = append(o.Bools, p.Name)
		case "integer", "number":
			o.Numbers = append(o.Numbers, p.Name)
		}
		if once {
			o.Once = append(o.Once, p.Name)
		}
		if hasAlias {
			o.Aliases[alias] = p.Name
		}
	}
	slices.Sort(o.Bools)
	slices.Sort(o.Numbers)
	slices.Sort(o.Once)
	return o, nil
}

// boolExt reads a boolean extension: absent is false, anything but a
// boolean an error (a typo such as "yes" must not silently mean false).
func boolExt(ext spec.Extensions, name string) (bool, error) {
	v, ok := ext[name]
	if !ok {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%s must be true or false, not %v", name, v)
	}
	return b, nil
}

// Operations returns every operation, by id.
func (c *Contract) Operations() []*Operation { return c.ops }

// Operation returns the operation with the id.
func (c *Contract) Operation(id string) (*Operation, bool) {
	o, ok := c.byID[id]
	return o, ok
}

// Match returns the operation a request for method and escapedPath
// (URL.EscapedPath) routes to. When the path is an operation's under
// another method it returns that one: the router answers such a request
// 405, and the rules before it apply as they would to the right method,
// so that a parameter's check does not depend on it.
func (c *Contract) Match(method, escapedPath string) (*Operation, bool) {
	if route, ok := c.router.Lookup(method, escapedPath); ok && route.Operation != nil {
		return c.Operation(route.Operation.ID)
	}
	others := c.router.OtherMethods(method, escapedPath)
	slices.Sort(others) // the router's order is a map's
	for _, m := range others {
		if route, ok := c.router.Lookup(m, escapedPath); ok && route.Operation != nil {
			return c.Operation(route.Operation.ID)
		}
	}
	return nil, false
}

// MatchRequest is Match for r.
func (c *Contract) MatchRequest(r *http.Request) (*Operation, bool) {
	return c.Match(r.Method, r.URL.EscapedPath())
}

// Load returns the rules of the spec the server is built from
// (restapi.SwaggerJSON), read once.
var Load = sync.OnceValues(func() (*Contract, error) {
	doc, err := loads.Analyzed(restapi.SwaggerJSON, "")
	if err != nil {
		return nil, fmt.Errorf("load the embedded spec: %w", err)
	}
	api := operations.NewStamenAPI(doc)
	api.Init() // routes the generated stubs: a route needs a handler
	c, err := New(doc, api)
	if err != nil {
		return nil, fmt.Errorf("the embedded spec's rules: %w", err)
	}
	return c, nil
})

// Embedded is Load for the middleware, which has no error to return: the
// server calls Load at start (app.NewAPI) and does not start when it
// fails, so a panic here means a binary whose every test fails.
func Embedded() *Contract {
	c, err := Load()
	if err != nil {
		panic("contract: " + err.Error())
	}
	return c
}
