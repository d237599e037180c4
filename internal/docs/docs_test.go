package docs

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestWithBasePath(t *testing.T) {
	for _, tc := range []struct {
		name, spec, basePath string
		want                 map[string]any
		same                 bool // the spec comes back as it is
	}{
		{name: "no prefix", spec: `{"swagger":"2.0","basePath":"/"}`, basePath: "", same: true},
		{name: "replaced", spec: `{"swagger":"2.0","basePath":"/","paths":{"/x":{"basePath":"nested"}}}`, basePath: "/flower",
			want: map[string]any{"swagger": "2.0", "basePath": "/flower", "paths": map[string]any{"/x": map[string]any{"basePath": "nested"}}}},
		{name: "added", spec: `{"swagger":"2.0","info":{}}`, basePath: "/team/flower",
			want: map[string]any{"swagger": "2.0", "info": map[string]any{}, "basePath": "/team/flower"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := WithBasePath([]byte(tc.spec), tc.basePath)
			if err != nil {
				t.Fatal(err)
			}
			if tc.same {
				if string(got) != tc.spec {
					t.Errorf("got %s, want the spec unchanged", got)
				}
				return
			}
			var doc map[string]any
			if err := json.Unmarshal(got, &doc); err != nil {
				t.Fatalf("%s: %v", got, err)
			}
			if !reflect.DeepEqual(doc, tc.want) {
				t.Errorf("got %s, want %v", got, tc.want)
			}
		})
	}
	if _, err := WithBasePath([]byte(`["not", "an object"]`), "/flower"); err == nil {
		t.Error("a spec that is not a JSON object: no error")
	}
}
