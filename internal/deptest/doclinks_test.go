package deptest

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository's top directory, found from this file's path.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find this test's file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// markdownFiles returns README.md, lockclient/README.md and every page under
// docs/, relative to root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", filepath.Join("lockclient", "README.md")}
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	return files
}

var (
	mdLink     = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*)$`)
	notSlug    = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// prose returns the lines of a markdown text outside fenced code blocks,
// with inline code removed, so that links in examples are not read.
func prose(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// anchors returns the heading anchors GitHub makes for a markdown text:
// lower case, punctuation dropped, blanks as hyphens, -1, -2 … for repeats.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range prose(text) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := strings.ToLower(strings.TrimSpace(m[1]))
		slug = strings.ReplaceAll(notSlug.ReplaceAllString(slug, ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestDocLinksResolve checks that every relative link in README.md and
// docs/*.md names a file that exists, and every #anchor one of its headings:
// moving a section must not leave a reader at a dead link.
func TestDocLinksResolve(t *testing.T) {
	root := repoRoot(t)
	texts := map[string]string{}
	read := func(rel string) (string, bool) {
		if s, ok := texts[rel]; ok {
			return s, true
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return "", false
		}
		texts[rel] = string(b)
		return string(b), true
	}
	for _, file := range markdownFiles(t, root) {
		text, _ := read(file)
		for n, line := range prose(text) {
			line = inlineCode.ReplaceAllString(line, "")
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				rel := file
				if path != "" {
					rel = filepath.Clean(filepath.Join(filepath.Dir(file), path))
					if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
						t.Errorf("%s (prose line %d): link %q: %s does not exist", file, n+1, target, rel)
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(rel, ".md") {
					continue
				}
				dest, _ := read(rel)
				if !anchors(dest)[anchor] {
					t.Errorf("%s (prose line %d): link %q: %s has no heading #%s", file, n+1, target, rel, anchor)
				}
			}
		}
	}
}

// TestReadmeShape keeps the README what a newcomer reads first: short, and
// opening with the two commands that try the project.
func TestReadmeShape(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "\n"); n > 250 {
		t.Errorf("README.md has %d lines; keep it at most 250 and move reference material to docs/", n)
	}
	var commands []string
	fenced, shell := false, false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			shell = fenced && strings.TrimSpace(line) == "```sh"
			continue
		}
		if shell && strings.TrimSpace(line) != "" {
			commands = append(commands, strings.TrimSpace(strings.SplitN(line, "#", 2)[0]))
		}
		if len(commands) == 2 {
			break
		}
	}
	want := []string{"go run ./cmd/fenceproxy demo", "make test"}
	if len(commands) < 2 || commands[0] != want[0] || commands[1] != want[1] {
		t.Errorf("README's first two commands are %q, want %q", commands, want)
	}
}

// TestDocsIndexComplete checks that docs/README.md links every page in docs/,
// so that no reference page is reachable only by knowing its name.
func TestDocsIndexComplete(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
		path, _, _ := strings.Cut(m[1], "#")
		linked[path] = true
	}
	for _, file := range markdownFiles(t, root) {
		name := filepath.Base(file)
		if filepath.Dir(file) == "docs" && name != "README.md" && !linked[name] {
			t.Errorf("docs/README.md does not link docs/%s", name)
		}
	}
}
