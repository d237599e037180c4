package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDockerfileAgrees: the Dockerfile, for machines with an engine, says
// what this builder's image configuration says: final base scratch, the
// non-root user, port 5555, the /data volume, the entrypoint and the
// environment; the build stage cross-compiles (no emulation) a static
// binary.
func TestDockerfileAgrees(t *testing.T) {
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Instructions with their continuation lines joined.
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(raw), " ")
	var final []string
	var stages int
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			stages++
			final = nil
		}
		final = append(final, line)
	}
	if stages != 2 || final[0] != "FROM scratch" {
		t.Fatalf("want a build stage and a final stage FROM scratch, got %d stages, last %q", stages, final[0])
	}
	want := []string{
		"USER " + Config.User,
		"EXPOSE 5555",
		"VOLUME /data",
		"WORKDIR " + Config.WorkingDir,
		`ENTRYPOINT ["` + strings.Join(Config.Entrypoint, `", "`) + `"]`,
		"ENV " + strings.Join(Config.Env, " "),
	}
	for _, w := range want {
		if !slices.Contains(final, w) {
			t.Errorf("the final stage lacks %q", w)
		}
	}
	for _, w := range []string{"FROM --platform=$BUILDPLATFORM", "CGO_ENABLED=0", "GOARCH=$TARGETARCH", "-trimpath",
		"/etc/ssl/certs/ca-certificates.crt", "--chown=65532:65532"} {
		if !strings.Contains(text, w) {
			t.Errorf("the Dockerfile lacks %q", w)
		}
	}
}
