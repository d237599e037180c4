package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	httptransport "github.com/go-openapi/runtime/client"
	"github.com/go-openapi/strfmt"
	"go.yaml.in/yaml/v3"

	"github.com/stamen-dev/stamen/gen/client"
	auditops "github.com/stamen-dev/stamen/gen/client/audit"
	"github.com/stamen-dev/stamen/gen/client/tasks"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestGeneratedClientUnderURLPrefix: a client generated from the spec
// (gen/client), its BasePath taken from the spec a --url_prefix stamen
// serves (swagger.json and swagger.yaml), reaches the operations: the
// revocation it sends is the one the audit log records, under the prefix.
// With the served spec's basePath "/", as before, the client called
// /api/... outside the prefix and got 404.
func TestGeneratedClientUnderURLPrefix(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	bin := buildBinary(t)
	port := freePort(t)
	p := startProcess(t, bin, append([]string{"--port", fmt.Sprint(port), "--url_prefix", "flower",
		"--basic_auth", "op:op-secret"}, embeddedArgs(t)...)...)
	host := fmt.Sprintf("127.0.0.1:%d", port)
	prefixed := "http://" + host + "/flower"
	p.awaitUp(t, func() bool {
		resp, err := http.Get(prefixed + "/healthcheck")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	creds := httptransport.BasicAuth("op", "op-secret")

	var revoked []string
	for _, spec := range []string{"/swagger.json", "/swagger.yaml"} {
		t.Run(spec, func(t *testing.T) {
			req, err := http.NewRequest("GET", prefixed+spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.SetBasicAuth("op", "op-secret")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d %v", spec, resp.StatusCode, err)
			}
			// YAML reads the JSON spec too.
			var served struct {
				BasePath string `yaml:"basePath"`
			}
			if err := yaml.Unmarshal(body, &served); err != nil {
				t.Fatalf("%s: %v", spec, err)
			}
			if served.BasePath != "/flower" {
				t.Errorf("%s: basePath %q, want /flower", spec, served.BasePath)
			}
			// As a generator does: the client's base path is the spec's.
			cl := client.New(httptransport.New(host, served.BasePath, []string{"http"}), strfmt.Default)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			id := "url-prefix-" + url.PathEscape(spec[1:])
			if _, err := cl.Tasks.RevokeTaskContext(ctx, tasks.NewRevokeTaskParams().WithTaskid(id), creds); err != nil {
				t.Fatalf("revoke through the client of %s: %v", spec, err)
			}
			revoked = append(revoked, "/api/task/revoke/"+id)
			log, err := cl.Audit.ListAuditContext(ctx, auditops.NewListAuditParams(), creds)
			if err != nil {
				t.Fatalf("audit log through the client of %s: %v", spec, err)
			}
			var paths []string
			for _, r := range log.Payload.Records {
				if r.Path != nil && r.Status != nil && *r.Status == http.StatusOK {
					paths = append(paths, *r.Path)
				}
			}
			for _, want := range revoked {
				if !slices.Contains(paths, want) {
					t.Errorf("the audit log records %q, lacking the revocation %s", paths, want)
				}
			}
		})
	}
}
