package integration

import (
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

func TestHarnessPostgres(t *testing.T) {
	pg := harness.Postgres(t)
	conn, err := pgx.Connect(t.Context(), pg.DSN(pgcluster.Superuser, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var fsync string
	if err := conn.QueryRow(t.Context(), "SHOW fsync").Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	if fsync != "off" {
		t.Errorf("fsync = %q, want off in tests", fsync)
	}
}
