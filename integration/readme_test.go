package integration

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
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
	checkStaleWriteSession(t, out)
	if m := e.mark(t, "accounts/1"); m != 42 {
		t.Fatalf("mark %d, want 42", m)
	}
}

const staleWriteError = `ERROR:  stale fencing token 41 for resource "accounts/1": high-water mark is 42`

// checkStaleWriteSession checks psql's output of the stale-write block: the
// stale UPDATE refused, and worker B's balance of 90 read last.
func checkStaleWriteSession(t *testing.T, out string) {
	t.Helper()
	if !strings.Contains(out, staleWriteError) {
		t.Fatalf("psql output lacks %q:\n%s", staleWriteError, out)
	}
	lines := strings.Fields(strings.TrimSpace(out))
	if last := lines[len(lines)-1]; last != "90" {
		t.Fatalf("final balance %q, want 90:\n%s", last, out)
	}
}

// TestReadmeWithYourDatabase follows the README from "Use it with your
// database" to "Fence an unchanged program" with its own commands, only the
// host names, ports and database name replaced: migrate as a dedicated owner
// role, the grant, fenceproxy serve as a process, then as the application's
// role through it the stale-write session, the token in PGOPTIONS and in SET
// LOCAL, and psql under lock run.
func TestReadmeWithYourDatabase(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	direct := pg.DSN(pgcluster.Superuser, db)
	// The roles the README names; fence_client too, as the README says to
	// create it where the owner role may not create roles.
	for _, role := range []string{"fence_owner LOGIN", "app_rw LOGIN", "fence_client NOLOGIN"} {
		harnessExec(t, direct, `DO $$BEGIN CREATE ROLE `+role+`; EXCEPTION WHEN duplicate_object THEN NULL; END$$`)
	}
	psql := harness.Tool(t, pg, "psql")
	env := append(os.Environ(), "PATH="+filepath.Dir(psql)+string(os.PathListSeparator)+os.Getenv("PATH"), "PGUSER=app_rw", "PGCONNECT_TIMEOUT=10")
	dir := t.TempDir()
	shell := func(script string) (string, error) {
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	upstream := strings.NewReplacer(
		"bin/fenceproxy", harness.Binary(t), // what make build builds
		"db.internal/appdb", pg.Addr()+"/"+db,
		"postgres://admin@", "postgres://"+pgcluster.Superuser+"@",
		"db.internal:5432", pg.Addr(),
		"127.0.0.1:6432", "127.0.0.1:0",
	)

	// Use it with your database: every line but make build (the harness
	// builds the same binary) and serve, which runs on.
	var setup []string
	var serve []string
	for _, line := range strings.Split(readmeBlock(t, "use-with-db"), "\n") {
		switch f := strings.Fields(upstream.Replace(line)); {
		case len(f) == 0 || strings.HasPrefix(line, "make build"):
		case len(f) > 1 && f[1] == "serve":
			serve = f[2:]
		default:
			setup = append(setup, upstream.Replace(line))
		}
	}
	if out, err := shell("set -e\n" + strings.Join(setup, "\n")); err != nil {
		t.Fatalf("README setup: %v\n%s", err, out)
	}
	if serve == nil {
		t.Fatal("README's use-with-db block runs no fenceproxy serve")
	}
	addr, _, logs := startServe(t, nil, serve...)
	_, port, _ := net.SplitHostPort(addr)
	proxy := strings.NewReplacer("bin/fenceproxy", harness.Binary(t), "port=6432", "port="+port, "dbname=appdb", "dbname="+db)

	// The stale-write session, as the application's role.
	cmd := exec.Command(psql, "-X", "-v", "ON_ERROR_STOP=0", "-A", "-t", "host=127.0.0.1 port="+port+" dbname="+db)
	cmd.Env, cmd.Stdin = env, strings.NewReader(readmeBlock(t, "stale-write"))
	out, _ := cmd.CombinedOutput()
	checkStaleWriteSession(t, string(out))

	// PGOPTIONS with the stale token 41, then SET LOCAL with 43, then a
	// comment with 44.
	got, _ := shell(proxy.Replace(readmeBlock(t, "carry-token")))
	if !strings.Contains(got, staleWriteError) {
		t.Fatalf("PGOPTIONS with a stale token: output lacks %q:\n%s\nserve's log:\n%s", staleWriteError, got, logs)
	}
	if m := harness.Mark(t, direct, "accounts/1"); m != 44 {
		t.Fatalf("mark of accounts/1 = %d after SET LOCAL with token 43 and a comment with 44, want 44:\n%s", m, got)
	}
	if balance := queryInt(t, direct, "SELECT balance FROM accounts WHERE id = 1"); balance != 92 {
		t.Fatalf("balance %d, want 92 (90, the stale write refused, then +1 under token 43 and +1 under 44):\n%s", balance, got)
	}

	// Fence an unchanged program: psql under lock run, through serve.
	etcd := harness.StartEtcd(t)
	harnessExec(t, direct, "CREATE TABLE reports (balance int)", "GRANT ALL ON reports TO app_rw")
	if err := os.WriteFile(filepath.Join(dir, "nightly.sql"), []byte("INSERT INTO reports SELECT balance FROM accounts;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lockRun := strings.NewReplacer("--etcd 127.0.0.1:2379", "--etcd "+strings.Join(etcd.Endpoints(), ","))
	if got, err := shell(lockRun.Replace(proxy.Replace(readmeBlock(t, "lock-run")))); err != nil {
		t.Fatalf("lock run: %v\n%s", err, got)
	}
	if m := harness.Mark(t, direct, "nightly-report"); m <= 0 {
		t.Fatalf("mark of nightly-report = %d: psql under lock run was not fenced", m)
	}
	if rows := queryInt(t, direct, "SELECT count(*) FROM reports WHERE balance = 92"); rows != 1 {
		t.Fatalf("%d report rows, want 1", rows)
	}
}

// queryInt runs a query that returns one integer, on a connection of its own.
func queryInt(t *testing.T, dsn, query string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
