//go:build docker

package packaging

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// requireDocker fails the test, saying what to install, when no docker daemon answers (build tag docker: make image-test):
// the one test of the suite allowed to skip for a missing prerequisite, as
// CI machines without docker (or a registry to pull the base images from)
// are common.
func requireDocker(t *testing.T) string {
	t.Helper()
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Fatal("docker unavailable: no docker command in PATH (apt-get install docker.io, and a running daemon); make image-test needs it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("docker unavailable: the daemon does not answer (%v: %s); make image-test needs a running docker daemon", err, strings.TrimSpace(string(out)))
	}
	return docker
}

// TestDockerImageServesMountedConfig (build tag docker, make image-test):
// the image built from the Dockerfile runs as a non-root user, reports the
// version it was built with, and serves with a mounted config against a real
// PostgreSQL: a stale token's write is refused with 55Z01 and the row keeps
// the rightful holder's value; /readyz answers on metrics_listen.
func TestDockerImageServesMountedConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: builds and runs the container image (make image-test runs it)")
	}
	docker := requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dockerRun := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, docker, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("fenceproxy-smoke:%d", os.Getpid())
	dockerRun("build", "--build-arg", "VERSION=0.0.0-smoke", "-t", tag, root)
	t.Cleanup(func() { exec.Command(docker, "rmi", "-f", tag).Run() })

	if user := dockerRun("image", "inspect", "--format", "{{.Config.User}}", tag); user == "" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0") {
		t.Errorf("image user %q, want a non-root user", user)
	}
	if v := dockerRun("run", "--rm", tag, "version"); !strings.HasPrefix(v, "fenceproxy 0.0.0-smoke\n") {
		t.Errorf("docker run %s version printed:\n%s", tag, v)
	}

	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	harness.Migrate(t, pg.DSN(pgcluster.Superuser, db))
	listen, metrics := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "fenceproxy.yaml")
	conf := fmt.Sprintf("listen: %s\nupstream: %s\nmetrics_listen: %s\n", listen, pg.Addr(), metrics)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	// Host networking: the harness's PostgreSQL listens on loopback only.
	id := dockerRun("run", "-d", "--network", "host", "-v", cfg+":/etc/fenceproxy/fenceproxy.yaml:ro", tag)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command(docker, "logs", id).CombinedOutput()
			t.Logf("container logs:\n%s", out)
		}
		exec.Command(docker, "rm", "-f", id).Run()
	})

	conn := connectWithin(t, "postgres://"+pgcluster.Superuser+"@"+listen+"/"+db+"?sslmode=disable", 30*time.Second)
	defer conn.Close(context.Background())
	for _, q := range []string{
		"CREATE TABLE accounts (id int PRIMARY KEY, balance int)",
		"INSERT INTO accounts VALUES (1, 100)",
		"SET lock.resource = 'accounts/1'",
		"SET lock.fencing_token = 42",
		"UPDATE accounts SET balance = 90 WHERE id = 1",
		"SET lock.fencing_token = 41",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_, err = conn.Exec(ctx, "UPDATE accounts SET balance = 0 WHERE id = 1")
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "55Z01" {
		t.Fatalf("stale write through the container: %v, want SQLSTATE 55Z01", err)
	}
	var balance int
	if err := conn.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = 1").Scan(&balance); err != nil || balance != 90 {
		t.Errorf("balance %d (%v), want 90", balance, err)
	}
	resp, err := http.Get("http://" + metrics + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /readyz: %s", resp.Status)
	}
}

// connectWithin connects to dsn, retrying while the container starts.
func connectWithin(t *testing.T, dsn string, d time.Duration) *pgx.Conn {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, dsn)
		cancel()
		if err == nil {
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect through the container within %s: %v", d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
