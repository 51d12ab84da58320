package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

// TestProtectCommand: protect refuses a name that matches no table (naming
// file and line), prints SQL on --dry-run without changing anything,
// installs, says so again as a no-op, chooses fence.guard's implementation
// (the C guard from the extension fence_guard, saying so only with
// --verbose), and removes; serve with admin_dsn and
// guard_verify: strict refuses to start while the guard does not match.
func TestProtectCommand(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	dsn := pg.DSN(pgcluster.Superuser, db)
	if err := harness.Exec(t.Context(), dsn, `CREATE TABLE jobs (id int); CREATE TABLE "Jobs" (id int)`); err != nil {
		t.Fatal(err)
	}
	bin := harness.Binary(t)
	fp := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := fp("migrate", "--dsn", dsn); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.yaml")
	base := "admin_dsn: " + dsn + "\nguard_verify: strict\nresources:\n  - name: jobs\n    require_token: true\n    tables:\n      - public.jobs\n      - public.\"Jobs\"\n"
	writeFile(t, cfg, base+"      - public.jbos\n")
	out, err := fp("protect", "--dsn", dsn, "--config", cfg)
	if err == nil || !strings.Contains(out, cfg+":9: table \"public\".\"jbos\" matches no table") {
		t.Fatalf("protect with a typo: %v\n%s", err, out)
	}
	writeFile(t, cfg, base)

	out, err = fp("protect", "--dsn", dsn, "--config", cfg, "--dry-run")
	if err != nil || !strings.Contains(out, `CREATE OR REPLACE TRIGGER fence_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON public."Jobs"`) {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if err := startServeFails(t, bin, cfg, pg.Addr()); !strings.Contains(err, "guard_verify: strict") || !strings.Contains(err, "not protected") {
		t.Fatalf("serve strict before protect: %s", err)
	}
	if out, err = fp("protect", "--dsn", dsn, "--config", cfg); err != nil || !strings.Contains(out, "database guard installed") {
		t.Fatalf("protect: %v\n%s", err, out)
	}
	if out, err = fp("protect", "--dsn", dsn, "--config", cfg); err != nil || !strings.Contains(out, "already up to date") {
		t.Fatalf("protect again: %v\n%s", err, out)
	}
	_, _, logs := startServe(t, nil, "--config", cfg, "--listen", "127.0.0.1:0", "--upstream", pg.Addr())
	if !strings.Contains(logs.String(), "database guard verified") {
		t.Fatalf("serve did not verify the guard:\n%s", logs.String())
	}
	// --guard: the implementation of fence.guard (auto made it C: a
	// superuser, and the test dependencies install the library).
	guardImpl := func() string {
		var lang string
		c := connect(t, dsn, pgx.QueryExecModeExec)
		if err := c.QueryRow(t.Context(), "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.oid = 'fence.guard()'::regprocedure").Scan(&lang); err != nil {
			t.Fatal(err)
		}
		return lang
	}
	if got := guardImpl(); got != "c" {
		t.Fatalf("after protect as a superuser: fence.guard is %s, want c", got)
	}
	if out, err = fp("protect", "--dsn", dsn, "--config", cfg, "--guard", "plpgsql"); err != nil || !strings.Contains(out, "database guard installed (1 statements)") || guardImpl() != "plpgsql" {
		t.Fatalf("protect --guard plpgsql: %v\n%s", err, out)
	}
	if out, err = fp("protect", "--dsn", dsn, "--config", cfg, "--guard", "cobol"); err == nil || !strings.Contains(out, `--guard "cobol": want auto, c or plpgsql`) {
		t.Fatalf("protect --guard cobol: %v\n%s", err, out)
	}
	if out, err = fp("protect", "--dsn", dsn, "--config", cfg, "--guard", "c"); err != nil || guardImpl() != "c" {
		t.Fatalf("protect --guard c: %v\n%s", err, out)
	}
	// The C guard is the extension fence_guard; which implementation
	// fence.guard is, and how to build the C guard, only with --verbose.
	var ext string
	if err := connect(t, dsn, pgx.QueryExecModeExec).QueryRow(t.Context(), "SELECT extversion FROM pg_extension WHERE extname = 'fence_guard'").Scan(&ext); err != nil {
		t.Fatalf("extension fence_guard after protect --guard c: %v", err)
	}
	if strings.Contains(out, "info:") || strings.Contains(out, "note:") || strings.Contains(out, "make -C ext/fence_guard") {
		t.Fatalf("protect --guard c printed notes unasked:\n%s", out)
	}
	if out, err = fp("protect", "--dsn", dsn, "--config", cfg, "--verbose"); err != nil || !strings.Contains(out, "already up to date\ninfo: fence.guard is the C guard (extension fence_guard") {
		t.Fatalf("protect --verbose: %v\n%s", err, out)
	}
	if out, err = fp("protect", "--dsn", dsn, "--remove"); err != nil || !strings.Contains(out, "database guard removed") {
		t.Fatalf("remove: %v\n%s", err, out)
	}
	if err := harness.Exec(t.Context(), dsn, "INSERT INTO jobs VALUES (1)"); err != nil {
		t.Fatalf("write after remove: %v", err)
	}
}

// startServeFails runs serve, which must exit with an error, and returns
// its output.
func startServeFails(t *testing.T, bin, cfg, upstream string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--upstream", upstream).CombinedOutput()
	if err == nil {
		t.Fatalf("serve started:\n%s", out)
	}
	return string(out)
}
