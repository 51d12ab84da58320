package integration

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
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
	if err != nil || !strings.Contains(out, "installed fence schema version 3") {
		t.Fatalf("first migrate: %v\n%s", err, out)
	}
	out, err = fp("migrate", "--dsn", dsn)
	if err != nil || !strings.Contains(out, "already at version 3") {
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
