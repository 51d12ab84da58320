package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

// psql runs psql against the proxy with input on stdin and returns its
// combined output and error.
func (e *env) psql(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	base := []string{"-X", "-h", e.proxy.Host, "-p", strconv.Itoa(e.proxy.Port), "-U", pgcluster.Superuser, "-d", e.db, "-v", "ON_ERROR_STOP=1"}
	cmd := exec.CommandContext(t.Context(), harness.Tool(t, e.pg, "psql"), append(base, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestPsql(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.tsv")
	out := filepath.Join(dir, "out.tsv")
	if err := os.WriteFile(in, []byte("1\talpha\n2\tbeta\n3\tgamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
CREATE TABLE p (id int PRIMARY KEY, name text); INSERT INTO p VALUES (10, 'ten'); SELECT count(*) AS n FROM p;
\copy p FROM '` + in + `'
\copy (SELECT * FROM p ORDER BY id) TO '` + out + `'
SELECT string_agg(name, ',' ORDER BY id) AS names FROM p;
`
	got, err := e.psql(t, script, "-A", "-t")
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, got)
	}
	if !strings.Contains(got, "alpha,beta,gamma,ten") {
		t.Errorf("psql output %q lacks the copied rows", got)
	}
	b, err := os.ReadFile(out)
	if err != nil || string(b) != "1\talpha\n2\tbeta\n3\tgamma\n10\tten\n" {
		t.Errorf("\\copy TO wrote %q, %v", b, err)
	}
	// An error reaches psql with its SQLSTATE.
	got, err = e.psql(t, "\\set VERBOSITY verbose\nSELECT * FROM no_such_table;\n")
	if err == nil || !strings.Contains(got, "42P01") || !strings.Contains(got, `relation "no_such_table" does not exist`) {
		t.Errorf("psql error output %q, err %v; want SQLSTATE 42P01", got, err)
	}
}

func TestPsqlCancel(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(harness.Tool(t, e.pg, "psql"), "-X", "-h", e.proxy.Host, "-p", strconv.Itoa(e.proxy.Port),
		"-U", pgcluster.Superuser, "-d", e.db, "-c", "select pg_sleep(30)")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitActive(t, e, "select pg_sleep(30)")
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("psql still running 5s after SIGINT; output %q", out.String())
	}
	if d := time.Since(sent); d > time.Second {
		t.Errorf("psql took %v to return after SIGINT, want < 1s", d)
	}
	if !strings.Contains(out.String(), "canceling statement due to user request") {
		t.Errorf("psql output %q, want the cancel message", out.String())
	}
}

// waitActive waits until a backend is running query.
func waitActive(t *testing.T, e *env, query string) {
	t.Helper()
	conn := connect(t, e.direct(), pgx.QueryExecModeExec)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active'", query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("query %q never became active", query)
}

var pgbenchFailed = regexp.MustCompile(`number of failed transactions: (\d+)`)
var pgbenchTPS = regexp.MustCompile(`tps = ([0-9.]+)`)

// pgbench runs pgbench against host:port and returns its output.
func pgbench(t testing.TB, pg *pgcluster.Cluster, host string, port int, db string, args ...string) string {
	t.Helper()
	base := []string{"-h", host, "-p", strconv.Itoa(port), "-U", pgcluster.Superuser}
	cmd := exec.CommandContext(t.Context(), harness.Tool(t, pg, "pgbench"), append(append(base, args...), db)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pgbench %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestPgbench(t *testing.T) {
	e := newEnv(t)
	pgbench(t, e.pg, e.proxy.Host, e.proxy.Port, e.db, "-i", "-q", "-s", "1")
	for _, mode := range []string{"simple", "extended", "prepared"} {
		t.Run(mode, func(t *testing.T) {
			out := pgbench(t, e.pg, e.proxy.Host, e.proxy.Port, e.db, "-M", mode, "-c", "4", "-j", "2", "-t", "200")
			m := pgbenchFailed.FindStringSubmatch(out)
			if m == nil {
				if !strings.Contains(out, "number of transactions actually processed: 800/800") {
					t.Fatalf("pgbench output lacks the processed count:\n%s", out)
				}
			} else if m[1] != "0" {
				t.Fatalf("pgbench -M %s: %s failed transactions\n%s", mode, m[1], out)
			}
			if !strings.Contains(out, "number of transactions actually processed: 800/800") {
				t.Fatalf("pgbench -M %s did not process 800/800:\n%s", mode, out)
			}
		})
	}
	// Each run starts by truncating pgbench_history: the last run's 800
	// transactions must all be there.
	conn := connect(t, e.direct(), pgx.QueryExecModeExec)
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pgbench_history").Scan(&n); err != nil || n != 800 {
		t.Fatalf("pgbench_history has %d rows (%v), want 800", n, err)
	}
}
