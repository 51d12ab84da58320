package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// Binary builds cmd/fenceproxy once per test package and returns its path.
// Main removes it.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			binErr = err
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		binDir, binErr = os.MkdirTemp("", "fenceproxy-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "fenceproxy")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/fenceproxy")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = err
			binPath = string(out)
		}
	})
	if binErr != nil {
		t.Fatalf("harness: go build ./cmd/fenceproxy: %v\n%s", binErr, binPath)
	}
	return binPath
}

func removeBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}
