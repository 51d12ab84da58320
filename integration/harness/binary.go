package harness

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	buildMu sync.Mutex
	built   = map[string]string{} // package → binary path
	binDir  string
)

// Binary builds cmd/fenceproxy once per test package and returns its path.
// Main removes it.
func Binary(t testing.TB) string {
	t.Helper()
	return Build(t, "./cmd/fenceproxy")
}

// EtcdBinary builds the etcd server of the module's own etcd version
// (go.etcd.io/etcd/server/v3, a tool in go.mod) once per test package and
// returns its path. Tests that must kill or freeze etcd members run it as
// separate processes; the version is the one the lock client is built and
// tested against (docs/lockclient.md, "Supported etcd versions").
func EtcdBinary(t testing.TB) string {
	t.Helper()
	return Build(t, "go.etcd.io/etcd/server/v3")
}

// Build builds the main package pkg — an import path, or a path relative to
// the module root such as ./integration/chaos/worker — once per test package
// and returns the binary's path. Main removes it. It fails the test with the
// compiler's output when the build fails.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("harness: go env GOMOD: %v (is Go installed?)", err)
	}
	if binDir == "" {
		if binDir, err = os.MkdirTemp("", "fenceproxy-bin-"); err != nil {
			t.Fatalf("harness: %v", err)
		}
	}
	bin := filepath.Join(binDir, strings.NewReplacer("/", "_", ".", "_").Replace(strings.TrimPrefix(pkg, "./"))+"-"+path.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("harness: go build %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = bin
	return bin
}

func removeBinary() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if binDir != "" {
		os.RemoveAll(binDir)
		binDir = ""
		clear(built)
	}
}
