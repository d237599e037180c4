package handlers

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/go-openapi/loads"
	"github.com/go-openapi/spec"

	"github.com/stamen-dev/stamen/restapi"
)

// TestTypedParamsFollowTheSpec keeps typedParams, which strictParams reads
// before routing, equal to the boolean and number query parameters each
// operation of swagger.yaml declares.
func TestTypedParamsFollowTheSpec(t *testing.T) {
	doc, err := loads.Analyzed(restapi.SwaggerJSON, "")
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Spec().Paths.Paths {
		// A path of the operation: its parameters are any non-empty value.
		concrete := path
		for strings.Contains(concrete, "{") {
			i, j := strings.Index(concrete, "{"), strings.Index(concrete, "}")
			concrete = concrete[:i] + "x" + concrete[j+1:]
		}
		for _, op := range []*spec.Operation{item.Get, item.Post} {
			if op == nil {
				continue
			}
			var wantBools, wantNumbers []string
			for _, p := range op.Parameters {
				if p.In != "query" {
					continue
				}
				switch p.Type {
				case "boolean":
					wantBools = append(wantBools, p.Name)
				case "integer", "number":
					wantNumbers = append(wantNumbers, p.Name)
				}
			}
			bools, numbers, _ := paramTypes(concrete)
			slices.Sort(wantBools)
			slices.Sort(wantNumbers)
			bools, numbers = slices.Sorted(slices.Values(bools)), slices.Sorted(slices.Values(numbers))
			if !slices.Equal(bools, wantBools) || !slices.Equal(numbers, wantNumbers) {
				t.Errorf("%s (%s): typedParams has booleans %v and numbers %v, the spec %v and %v",
					op.ID, path, bools, numbers, wantBools, wantNumbers)
			}
		}
	}
}

// TestParamsGivenOnce: on stamen's bulk operations and purge a typed
// parameter given twice is refused; elsewhere the last value counts, as in
// Flower.
func TestParamsGivenOnce(t *testing.T) {
	for _, c := range []struct {
		path, query string
		refused     bool
	}{
		{"/api/tasks/revoke", "max=10&dry_run=true&dry_run=false", true},
		{"/api/tasks/retry", "max=10&max=20", true},
		{"/api/queues/purge/celery", "force=false&force=true", true},
		{"/api/tasks/revoke", "max=10&dry_run=true&state=A&state=B", false},
		{"/api/task/revoke/x", "terminate=false&terminate=true", false},
		{"/api/tasks", "limit=1&limit=2", false},
	} {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		if err := strictParams(c.path, q); (err != nil) != c.refused {
			t.Errorf("%s?%s: %v, want refused %v", c.path, c.query, err, c.refused)
		}
	}
}
