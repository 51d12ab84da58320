package integration

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
)

// demoLeftovers lists the demo's temporary directories and processes.
func demoLeftovers(t *testing.T) []string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(tempDir(), "fenceproxy-demo-*"))
	out, _ := exec.Command("pgrep", "-f", "demo-worker").Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		dirs = append(dirs, "demo-worker processes: "+s)
	}
	return dirs
}

func pgDirs() map[string]bool {
	dirs, _ := filepath.Glob(filepath.Join(tempDir(), "fenceproxy-pg-*"))
	m := map[string]bool{}
	for _, d := range dirs {
		m[d] = true
	}
	return m
}

func TestDemo(t *testing.T) {
	before := pgDirs()
	out, err := exec.Command(harness.Binary(t), "demo").CombinedOutput()
	if err != nil {
		t.Fatalf("fenceproxy demo: %v\n%s", err, out)
	}
	for _, want := range []string{
		`worker 1  write REFUSED: 55Z01 stale fencing token`,
		`through fenceproxy:     balance = 150`,
		`straight to PostgreSQL: balance = 110`,
		`worker 1  writes balance 110: accepted`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if left := demoLeftovers(t); len(left) > 0 {
		t.Errorf("demo left behind: %v", left)
	}
	for d := range pgDirs() {
		if !before[d] {
			t.Errorf("demo left its PostgreSQL directory %s", d)
		}
	}
}

func TestDemoKeepStopsOnInterrupt(t *testing.T) {
	before := pgDirs()
	cmd := exec.Command(harness.Binary(t), "demo", "--keep")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(stdout)
	var seen strings.Builder
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "Press Ctrl-C") {
			break
		}
	}
	if !strings.Contains(seen.String(), "through fenceproxy:     psql") || !strings.Contains(seen.String(), "etcd:") {
		t.Fatalf("--keep did not print how to reach the stack:\n%s", seen.String())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo --keep exited with %v after Ctrl-C", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("demo --keep still running 20s after Ctrl-C")
	}
	if left := demoLeftovers(t); len(left) > 0 {
		t.Errorf("demo left behind: %v", left)
	}
	for d := range pgDirs() {
		if !before[d] {
			t.Errorf("demo left its PostgreSQL directory %s", d)
		}
	}
}

func tempDir() string { return os.TempDir() }
