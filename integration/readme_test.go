package integration

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// readmeBlock returns the fenced code block that follows the marker
// <!-- readme-test: name --> in the README.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "<!-- readme-test: "+name+" -->")
	if i < 0 {
		t.Fatalf("README has no block %q", name)
	}
	s = s[i:]
	start := strings.Index(s, "```")
	s = s[start+3:]
	s = s[strings.IndexByte(s, '\n')+1:]
	return s[:strings.Index(s, "```")]
}

// TestReadmeStaleWrite pastes the README's psql session into psql through
// the proxy and checks that it shows what the README says it shows.
func TestReadmeStaleWrite(t *testing.T) {
	e := newFencedEnv(t, nil)
	harnessExec(t, e.direct(), "DROP TABLE accounts")
	script := readmeBlock(t, "stale-write")
	// Keep going after the expected error, as a person pasting it would.
	out, _ := e.psql(t, script, "-v", "ON_ERROR_STOP=0", "-A", "-t")
	want := `ERROR:  stale fencing token 41 for resource "accounts/1": high-water mark is 42`
	if !strings.Contains(out, want) {
		t.Fatalf("psql output lacks %q:\n%s", want, out)
	}
	lines := strings.Fields(strings.TrimSpace(out))
	if last := lines[len(lines)-1]; last != "90" {
		t.Fatalf("final balance %q, want 90:\n%s", last, out)
	}
	if m := e.mark(t, "accounts/1"); m != 42 {
		t.Fatalf("mark %d, want 42", m)
	}
}
