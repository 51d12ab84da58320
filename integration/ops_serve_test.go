package integration

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
)

// TestDefaultConfigStartsQuietly: serve on the default settings (only the
// addresses changed) logs no warning, and its start-up line names the
// version, the config file and the file-descriptor limit.
func TestDefaultConfigStartsQuietly(t *testing.T) {
	pg := harness.Postgres(t)
	cfg := filepath.Join(t.TempDir(), "fenceproxy.yaml")
	writeFile(t, cfg, "listen: 127.0.0.1:0\nupstream: "+pg.Addr()+"\n")
	_, cmd, logs := startServe(t, nil, "--config", cfg)
	// Everything it logs before it stops: start-up warnings may follow the
	// listening line.
	cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, cmd, logs, 10*time.Second)
	out := logs.String()
	if strings.Contains(out, "level=WARN") {
		t.Errorf("the default config logs a warning:\n%s", out)
	}
	start := ""
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, `msg="fenceproxy starting"`) {
			start = line
		}
	}
	for _, want := range []string{"version=", "commit=", "goversion=go", "config=" + cfg, "nofile_soft=", "nofile_hard="} {
		if !strings.Contains(start, want) {
			t.Errorf("start-up line %q lacks %q", start, want)
		}
	}
}

// TestLogFormatAndLevelFromEnvironment: FENCEPROXY_LOG_FORMAT=json makes
// every line a JSON object, and FENCEPROXY_LOG_LEVEL=warn drops the info
// lines; log_format in the file works the same. FENCEPROXY_ADMIN_DSN is
// used (its unreachable store is warned about).
func TestLogFormatAndLevelFromEnvironment(t *testing.T) {
	pg := harness.Postgres(t)
	dir := t.TempDir()
	for name, c := range map[string]struct {
		yaml      string
		env       []string
		wantStart bool
	}{
		"env": {"", []string{"FENCEPROXY_LOG_FORMAT=json", "FENCEPROXY_LOG_LEVEL=warn",
			"FENCEPROXY_ADMIN_DSN=postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}, false},
		"file": {"log_format: json\nlog_level: info\n", nil, true},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(dir, name+".yaml")
			writeFile(t, cfg, "listen: 127.0.0.1:0\nupstream: "+pg.Addr()+"\nmetrics_listen: 127.0.0.1:0\n"+c.yaml)
			lines := serveLines(t, c.env, "--config", cfg)
			sawStart, sawWarn := false, false
			for _, l := range lines {
				var rec map[string]any
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Fatalf("not a JSON line: %q", l)
				}
				if rec["msg"] == "fenceproxy starting" {
					sawStart = true
				}
				if rec["level"] == "WARN" && strings.Contains(l, "admin_dsn") {
					sawWarn = true
				}
			}
			if !c.wantStart && !sawWarn {
				t.Errorf("no warning about FENCEPROXY_ADMIN_DSN's store:\n%s", strings.Join(lines, "\n"))
			}
			if sawStart != c.wantStart {
				t.Errorf("start-up line (INFO) logged: %v, want %v\n%s", sawStart, c.wantStart, strings.Join(lines, "\n"))
			}
		})
	}
}

// serveLines runs serve with args until it has logged its first line,
// stops it with SIGTERM and returns every line it logged.
func serveLines(t *testing.T, env []string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(harness.Binary(t), append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var lines []string
	first, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if lines = append(lines, sc.Text()); len(lines) == 1 {
				close(first)
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case <-first:
	case <-time.After(20 * time.Second):
		t.Fatal("serve logged nothing in 20s")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-done
	cmd.Wait()
	return lines
}

// TestSecondSignalExitsAtOnce: SIGTERM starts a graceful shutdown that
// waits for a session's open transaction (shutdown_timeout 60s); a second
// SIGTERM ends the process at once with status 143 (128 + SIGTERM).
func TestSecondSignalExitsAtOnce(t *testing.T) {
	e, cmd, logs := serveWithConfig(t, "shutdown_timeout: 60s\n")
	busy := readyConn(t, e, "busy")
	if st := busy.query("BEGIN"); st != 'T' {
		t.Fatalf("status %q after BEGIN, want T", st)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "fenceproxy shutting down") {
		if time.Now().After(deadline) {
			t.Fatalf("no shutdown after SIGTERM:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 143 {
			t.Fatalf("after the second SIGTERM: %v, want exit status 143\n%s", err, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10s after the second SIGTERM (shutdown_timeout is 60s)\n%s", logs.String())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("exit took %v after the second SIGTERM, want at once", d)
	}
}
