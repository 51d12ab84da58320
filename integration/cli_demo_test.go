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

// leftovers returns what a demo run left: temporary directories that were
// not there before it (before is from tempDirs) and demo worker processes
// of binary bin.
func leftovers(before map[string]bool, bin string) []string {
	var left []string
	for d := range tempDirs() {
		if !before[d] {
			left = append(left, d)
		}
	}
	out, _ := exec.Command("pgrep", "-f", bin+" demo-worker").Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		left = append(left, "demo-worker processes: "+s)
	}
	return left
}

// tempDirs lists the demo's temporary directories (its own, and its
// PostgreSQL cluster's, "fenceproxy-demo-pg-…").
func tempDirs() map[string]bool {
	m := map[string]bool{}
	for _, pat := range []string{"fenceproxy-demo-*"} {
		dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), pat))
		for _, d := range dirs {
			m[d] = true
		}
	}
	return m
}

func TestDemo(t *testing.T) {
	before := tempDirs()
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
	if left := leftovers(before, harness.Binary(t)); len(left) > 0 {
		t.Errorf("demo left behind: %v", left)
	}
}

func TestDemoKeepStopsOnInterrupt(t *testing.T) {
	before := tempDirs()
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
	if left := leftovers(before, harness.Binary(t)); len(left) > 0 {
		t.Errorf("demo left behind: %v", left)
	}
}

func TestDemoWithoutServerBinaries(t *testing.T) {
	before := tempDirs()
	cmd := exec.Command(harness.Binary(t), "demo")
	cmd.Env = append(os.Environ(), "PG_BIN="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("demo ran without PostgreSQL binaries")
	}
	if !strings.Contains(string(out), "apt-get install postgresql") {
		t.Fatalf("the error does not say what to install:\n%s", out)
	}
	if left := leftovers(before, harness.Binary(t)); len(left) > 0 {
		t.Errorf("demo left behind: %v", left)
	}
}
