package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
)

// The fence store: the schema fence holds the marks and its functions; the
// proxy keeps it out of reach of sessions and fails closed without it.

// TestFenceSchemaNotWritableThroughProxy: the fence store cannot be written,
// dropped or called through the proxy, even by a superuser (42501); it can
// be read.
func TestFenceSchemaNotWritableThroughProxy(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeExec) // a superuser, even
	mustExec(t, c, "/* fencing_token=9 resource=f */ SELECT 1")
	for _, stmt := range []string{
		"UPDATE fence.hwm SET token = 1",
		"DELETE FROM fence.hwm",
		"TRUNCATE fence.hwm",
		"INSERT INTO fence.hwm VALUES ('x', 1, now())",
		"WITH d AS (DELETE FROM fence.hwm RETURNING *) SELECT count(*) FROM d",
		"DROP SCHEMA fence CASCADE",
		"ALTER TABLE fence.hwm DROP COLUMN token",
		"CALL fence.check('1000', 'f', '', '', false, true)",
	} {
		_, err := c.Exec(t.Context(), stmt)
		wantCode(t, err, "42501")
	}
	if m := e.mark(t, "f"); m != 9 {
		t.Fatalf("mark %d, want 9", m)
	}
	var n int
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM fence.hwm").Scan(&n); err != nil || n != 1 {
		t.Fatalf("reading fence.hwm through the proxy: %d, %v", n, err)
	}
}

// TestStoreMissingFailsClosed: a database without the fence store refuses a
// fenced write (55Z03, saying to run fenceproxy migrate), again on retry;
// nothing lands.
func TestStoreMissingFailsClosed(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	p := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr()})
	harness.Exec(context.Background(), pg.DSN(pgcluster.Superuser, db), "CREATE TABLE t (v int)")
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			c := connect(t, p.DSN(pgcluster.Superuser, "", db), mode)
			_, err := c.Exec(t.Context(), "/* fencing_token=1 resource=r */ INSERT INTO t VALUES ($1)", 1)
			pgErr := wantCode(t, err, "55Z03")
			if !strings.Contains(pgErr.Message, "fenceproxy migrate") {
				t.Errorf("message %q does not say to run fenceproxy migrate", pgErr.Message)
			}
			// The next attempt fails the same way (the check is re-prepared).
			_, err = c.Exec(t.Context(), "/* fencing_token=1 resource=r */ INSERT INTO t VALUES ($1)", 1)
			wantCode(t, err, "55Z03")
		})
	}
	conn := connect(t, pg.DSN(pgcluster.Superuser, db), pgx.QueryExecModeExec)
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("t has %d rows (%v): a write passed without its check", n, err)
	}
}
