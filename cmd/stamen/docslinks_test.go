package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	fence   = regexp.MustCompile("(?ms)^```.*?^```")
)

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, and only letters, digits, hyphens and underscores kept.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors is the anchors of a markdown file's headings.
func anchors(text string) []string {
	var out []string
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		out = append(out, githubAnchor(m[1]))
	}
	return out
}

// TestDocsLinks: every page of docs/ is linked from the README, and every
// relative link of the README, CONTRIBUTING.md, CHANGELOG.md, the docs/
// pages and the quickstart's README leads to a file that exists and, for
// a markdown page, to one of its headings when it names one.
func TestDocsLinks(t *testing.T) {
	root := "../.."
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) < 8 {
		t.Fatalf("docs/*.md: %v %v", docs, err)
	}
	pages := []string{"README.md", "CONTRIBUTING.md", "CHANGELOG.md", "examples/quickstart/README.md"}
	for _, d := range docs {
		pages = append(pages, filepath.ToSlash(strings.TrimPrefix(d, root+"/")))
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		name := "docs/" + filepath.Base(d)
		if !strings.Contains(string(readme), "]("+name+")") {
			t.Errorf("README.md does not link %s", name)
		}
	}
	checked := 0
	for _, page := range pages {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		body := fence.ReplaceAllString(string(text), "")
		for _, m := range mdLink.FindAllStringSubmatch(body, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page // an anchor alone is in this page
			if file != "" {
				path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), file)))
			}
			checked++
			full := filepath.Join(root, path)
			if _, err := os.Stat(full); err != nil {
				t.Errorf("%s links %s: %s does not exist", page, target, path)
				continue
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			linked, err := os.ReadFile(full)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(anchors(string(linked)), anchor) {
				t.Errorf("%s links %s: %s has no heading #%s", page, target, path, anchor)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links checked: the pattern no longer reads them", checked)
	}
}

// TestReadmeIsShort: the README stays a page a newcomer reads whole (what
// stamen is, the two commands, the tour, links into docs/): at most 200
// lines; the rest belongs in docs/.
func TestReadmeIsShort(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > 200 {
		t.Errorf("README.md has %d lines; keep it to 200 and move the rest into docs/", n)
	}
}
