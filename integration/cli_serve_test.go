package integration

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

var listenLine = regexp.MustCompile(`msg="fenceproxy listening" listen=(\S+)`)

// startServe runs `fenceproxy serve` as a process and returns its listen
// address once it is accepting.
func startServe(t testing.TB, env []string, args ...string) (addr string, cmd *exec.Cmd, logs *syncBuffer) {
	t.Helper()
	cmd = exec.Command(harness.Binary(t), append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	logs = &syncBuffer{}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case addr = <-found:
		return addr, cmd, logs
	case <-time.After(20 * time.Second):
		t.Fatalf("fenceproxy serve did not start; stderr so far:\n%s", logs.String())
	}
	return
}

func TestServeCommand(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	cfg := filepath.Join(t.TempDir(), "fenceproxy.yaml")
	// The file names a wrong upstream; the environment corrects it, and the
	// flag picks the listen address: flags > env > file.
	os.WriteFile(cfg, []byte("listen: 127.0.0.1:1\nupstream: 127.0.0.1:1\n"), 0o644)
	addr, cmd, logs := startServe(t, []string{"FENCEPROXY_UPSTREAM=" + pg.Addr()}, "--config", cfg, "--listen", "127.0.0.1:0")

	conn, err := pgx.Connect(t.Context(), "postgres://"+pgcluster.Superuser+"@"+addr+"/"+db+"?sslmode=disable")
	if err != nil {
		t.Fatalf("connect through fenceproxy serve: %v\n%s", err, logs.String())
	}
	var sum int
	if err := conn.QueryRow(t.Context(), "SELECT $1::int + 1", 41).Scan(&sum); err != nil || sum != 42 {
		t.Fatalf("query: %d, %v", sum, err)
	}
	conn.Close(t.Context())

	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM\n%s", err, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
}

func TestServeBadConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nupstream: 127.0.0.1:5432\nlisten_adress: x\n"), 0o644)
	out, err := exec.Command(harness.Binary(t), "serve", "--config", cfg).CombinedOutput()
	if err == nil {
		t.Fatal("serve accepted an unknown config key")
	}
	if want := `bad.yaml:3: unknown key "listen_adress"`; !strings.Contains(string(out), want) {
		t.Errorf("output %q lacks %q", out, want)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a strings.Builder safe for concurrent writers and readers;
// it is an io.Writer, so a logger can write to it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.WriteString(string(p))
	return len(p), nil
}

func (s *syncBuffer) WriteString(x string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(x)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
