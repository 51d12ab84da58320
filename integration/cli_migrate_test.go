package integration

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

func TestMigrateAndHWMCommands(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	dsn := pg.DSN(pgcluster.Superuser, db)
	bin := harness.Binary(t)
	fp := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	out, err := fp("migrate", "--dsn", dsn)
	if err != nil || !strings.Contains(out, "installed fence schema version "+strconv.Itoa(fencestore.LatestVersion)) {
		t.Fatalf("first migrate: %v\n%s", err, out)
	}
	out, err = fp("migrate", "--dsn", dsn)
	if err != nil || !strings.Contains(out, "already at version "+strconv.Itoa(fencestore.LatestVersion)) {
		t.Fatalf("second migrate: %v\n%s", err, out)
	}
	if out, err = fp("hwm", "--dsn", dsn, "set", "orders/42", "42"); err != nil || !strings.Contains(out, "high-water mark 42") {
		t.Fatalf("hwm set: %v\n%s", err, out)
	}
	if out, err = fp("hwm", "--dsn", dsn, "get", "orders/42"); err != nil || strings.TrimSpace(out) != "42" {
		t.Fatalf("hwm get: %v\n%s", err, out)
	}
	if out, err = fp("hwm", "--dsn", dsn, "list"); err != nil || !strings.Contains(out, "orders/42") {
		t.Fatalf("hwm list: %v\n%s", err, out)
	}
	if out, err = fp("hwm", "--dsn", dsn, "set", "orders/42", "abc"); err == nil || !strings.Contains(out, "positive 64-bit integer") {
		t.Fatalf("hwm set with a bad token: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ceiling"}, "none"},
		{[]string{"ceiling", "1000000"}, "token ceiling 1000000"},
		{[]string{"ceiling"}, "1000000"},
		{[]string{"ceiling", "none"}, "token ceiling removed"},
		{[]string{"ceiling"}, "none"},
	} {
		if out, err = fp(append([]string{"hwm", "--dsn", dsn}, c.args...)...); err != nil || !strings.Contains(out, c.want) {
			t.Fatalf("hwm %v: %v\n%s", c.args, err, out)
		}
	}
	if out, err = fp("hwm", "--dsn", dsn, "ceiling", "-5"); err == nil || !strings.Contains(out, "positive 64-bit integer or none") {
		t.Fatalf("hwm ceiling -5: %v\n%s", err, out)
	}
	if out, err = fp("migrate"); err == nil || !strings.Contains(out, "--dsn is required") {
		t.Fatalf("migrate without --dsn: %v\n%s", err, out)
	}
}

func TestServeVerifiesStoreWithAdminDSN(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg) // no fence store installed
	cfg := t.TempDir() + "/fenceproxy.yaml"
	writeFile(t, cfg, "admin_dsn: "+pg.DSN(pgcluster.Superuser, db)+"\n")
	_, _, logs := startServe(t, nil, "--config", cfg, "--listen", "127.0.0.1:0", "--upstream", pg.Addr())
	if !strings.Contains(logs.String(), "fenceproxy migrate") {
		t.Fatalf("serve with admin_dsn on a database without the store did not say to migrate:\n%s", logs.String())
	}
}

// TestMigrateCannotCreateClientRole: a migrating role without CREATEROLE, on
// a cluster where fence_client does not exist yet, fails with 42501 and the
// hint saying what to run; the store stays at version 2 (version 3 is all
// or nothing), and once a superuser has created the role the same command
// finishes the upgrade. fence_client belongs to the whole cluster, and the
// shared test cluster has it, so this test starts a cluster of its own.
func TestMigrateCannotCreateClientRole(t *testing.T) {
	pg, err := pgcluster.Start(t.Context(), pgcluster.Options{NoFsync: true, DirPrefix: "fenceproxy-pg-norole-"})
	if err != nil {
		t.Fatalf("start a cluster of its own: %v", err)
	}
	t.Cleanup(func() { pg.Stop() })
	super := pg.DSN(pgcluster.Superuser, "postgres")
	if err := harness.Exec(t.Context(), super, "CREATE ROLE store_owner LOGIN NOCREATEROLE", "CREATE DATABASE app OWNER store_owner"); err != nil {
		t.Fatal(err)
	}
	bin := harness.Binary(t)
	migrate := func() (string, error) {
		out, err := exec.Command(bin, "migrate", "--dsn", pg.DSN("store_owner", "app")).CombinedOutput()
		return string(out), err
	}
	out, err := migrate()
	for _, want := range []string{
		"fenceproxy migrate needs the role fence_client, and store_owner may not create roles (SQLSTATE 42501)",
		"hint: Run CREATE ROLE fence_client NOLOGIN as a superuser or a role with CREATEROLE, then migrate again.",
	} {
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("migrate without CREATEROLE: %v, want %q in\n%s", err, want, out)
		}
	}
	conn := connect(t, pg.DSN(pgcluster.Superuser, "app"), pgx.QueryExecModeExec)
	var version int
	var role, registry bool
	state := `SELECT (SELECT max(version) FROM fence.schema_version),
		EXISTS (SELECT FROM pg_roles WHERE rolname = 'fence_client'), to_regclass('fence.protected') IS NOT NULL`
	if err := conn.QueryRow(t.Context(), state).Scan(&version, &role, &registry); err != nil {
		t.Fatal(err)
	}
	if version != 2 || role || registry {
		t.Fatalf("after the failed migrate: version %d, fence_client exists %v, fence.protected exists %v; want 2, false, false", version, role, registry)
	}

	mustExec(t, conn, "CREATE ROLE fence_client NOLOGIN")
	if out, err = migrate(); err != nil || !strings.Contains(out, "upgraded fence schema from version 2 to "+strconv.Itoa(fencestore.LatestVersion)) {
		t.Fatalf("migrate after CREATE ROLE: %v\n%s", err, out)
	}
	var clientMay, publicMay bool
	grants := `SELECT has_function_privilege('fence_client', 'fence.check(text, text, text, text, boolean, boolean)', 'EXECUTE'),
		EXISTS (SELECT FROM pg_proc AS p, aclexplode(p.proacl) AS a
			WHERE p.oid = 'fence.check(text, text, text, text, boolean, boolean)'::regprocedure AND a.grantee = 0)`
	if err := conn.QueryRow(t.Context(), state).Scan(&version, &role, &registry); err != nil || version != fencestore.LatestVersion || !role || !registry {
		t.Fatalf("after the second migrate: version %d, fence_client %v, fence.protected %v (%v); want %d, true, true", version, role, registry, err, fencestore.LatestVersion)
	}
	if err := conn.QueryRow(t.Context(), grants).Scan(&clientMay, &publicMay); err != nil || !clientMay || publicMay {
		t.Fatalf("fence_client may execute fence.check: %v, PUBLIC may: %v (%v); want true, false", clientMay, publicMay, err)
	}
}
