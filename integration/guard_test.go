package integration

import (
	"context"
	"fmt"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/guard"
	"github.com/jackc/pgx/v5"
)

// guardedTables is the proxy's table map of the guard tests; the database
// guard protects the require_token ones.
var guardedTables = map[gate.TableRef]gate.Protection{
	{Schema: "public", Name: "jobs"}:   {Resource: "jobs", RequireToken: true},
	{Schema: "public", Name: "Mixed"}:  {Resource: "mixed", RequireToken: true},
	{Schema: "public", Name: "events"}: {Resource: "ev", RequireToken: true},
	{Name: "child"}:                    {Resource: "kids", RequireToken: true},
	{Schema: "public", Name: "softt"}:  {Resource: "soft"},
	{Schema: "sch", Name: "items"}:     {Resource: "items", RequireToken: true},
}

// newGuardedEnv is newFencedEnv with tables that reach the protected ones
// by paths the table filter cannot see, the database guard installed, and an
// application role (not a superuser, member of fence_client). It returns
// the role's DSNs through the proxy and straight to PostgreSQL.
func newGuardedEnv(t *testing.T) (e *env, viaProxy, direct string) {
	t.Helper()
	e = newFencedEnv(t, &gate.Config{Tables: guardedTables})
	app := "app_" + e.db
	err := harness.Exec(context.Background(), e.direct(), `
		CREATE TABLE jobs (id int PRIMARY KEY, v int);
		CREATE TABLE "Mixed" (id int);
		CREATE TABLE softt (id int);
		CREATE TABLE parent (id int PRIMARY KEY);
		CREATE TABLE child (id int, parent_id int REFERENCES parent ON DELETE CASCADE);
		CREATE TABLE events (id int, at int) PARTITION BY RANGE (at);
		CREATE TABLE events_1 PARTITION OF events FOR VALUES FROM (0) TO (100);
		CREATE VIEW jobs_v AS SELECT * FROM jobs;
		INSERT INTO parent VALUES (1), (2); INSERT INTO child VALUES (1, 1), (2, 2);`,
		"CREATE ROLE "+app+" LOGIN", "GRANT fence_client TO "+app,
		"GRANT ALL ON ALL TABLES IN SCHEMA public TO "+app,
		"GRANT CREATE ON DATABASE "+e.db+" TO "+app,
		"CREATE SCHEMA sch AUTHORIZATION "+app, "CREATE TABLE sch.items (id int)", "ALTER TABLE sch.items OWNER TO "+app)
	if err != nil {
		t.Fatal(err)
	}
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	var entries []guard.Entry
	for ref, p := range guardedTables {
		if p.RequireToken {
			entries = append(entries, guard.Entry{Schema: ref.Schema, Name: ref.Name, Resource: p.Resource, Where: "test"})
		}
	}
	if _, err := guard.Protect(t.Context(), fencestorepgx.Querier{Conn: admin}, entries, guard.Options{}); err != nil {
		t.Fatal(err)
	}
	return e, e.proxy.DSN(app, "", e.db), e.pg.DSN(app, e.db)
}

// TestGuardThroughProxy: without a token every path is refused with 55Z02,
// by the table filter where the text names the table and by the database
// guard where it does not; with a token the proxy checks each table's
// resource, so the database guard lets the writes through.
func TestGuardThroughProxy(t *testing.T) {
	e, viaProxy, _ := newGuardedEnv(t)
	paths := []string{
		"INSERT INTO jobs VALUES (1, 1)",
		"INSERT INTO jobs_v VALUES (2, 1)",        // view: database guard
		"TRUNCATE softt, jobs",                    // second table counts
		"DELETE FROM parent WHERE id = 1",         // FK cascade: database guard
		"INSERT INTO events_1 VALUES (1, 5)",      // partition: database guard
		"DO $$BEGIN UPDATE jobs SET v = 3; END$$", // DO: database guard
		`WITH x AS (INSERT INTO jobs VALUES (3, 0) RETURNING id) INSERT INTO "Mixed" SELECT id FROM x`,
	}
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			c := connect(t, viaProxy, mode)
			for _, p := range paths {
				_, err := c.Exec(t.Context(), p)
				wantCode(t, err, "55Z02")
			}
		})
	}
	t.Run("with a token", func(t *testing.T) {
		c := connect(t, viaProxy, pgx.QueryExecModeExec)
		mustExec(t, c, "SET lock.fencing_token = '5'")
		for _, p := range []string{"INSERT INTO jobs VALUES (1, 1)", "TRUNCATE softt, jobs",
			`WITH x AS (INSERT INTO jobs VALUES (3, 0) RETURNING id) INSERT INTO "Mixed" SELECT id FROM x`} {
			mustExec(t, c, p)
		}
		for _, r := range []string{"jobs", "mixed", "soft"} {
			if m := e.mark(t, r); m != 5 {
				t.Errorf("mark of %s = %d, want 5: each resource a statement writes is checked", r, m)
			}
		}
		// The view hides the table from the table filter: the check follows
		// lock.resource, and the database guard wants the table's resource.
		mustExec(t, c, "SET lock.resource = 'jobs'")
		mustExec(t, c, "INSERT INTO jobs_v VALUES (4, 1)")
		mustExec(t, c, "SET lock.resource = 'other'")
		_, err := c.Exec(t.Context(), "INSERT INTO jobs_v VALUES (5, 1)")
		wantCode(t, err, "55Z02")
		mustExec(t, c, "INSERT INTO jobs VALUES (6, 1)") // table named: 'other' and 'jobs' both checked
		mustExec(t, c, "SET lock.fencing_token = '4'")
		_, err = c.Exec(t.Context(), "INSERT INTO jobs VALUES (7, 1)")
		wantCode(t, err, "55Z01")
	})
	var n int
	if err := connect(t, e.direct(), pgx.QueryExecModeExec).QueryRow(t.Context(), "SELECT count(*) FROM jobs").Scan(&n); err != nil || n != 3 {
		t.Fatalf("jobs has %d rows (%v), want 3 (ids 3, 4, 6)", n, err)
	}
}

// TestGuardBypassingProxy: the same application role connected straight to
// PostgreSQL is refused without a check and allowed after one.
func TestGuardBypassingProxy(t *testing.T) {
	e, _, direct := newGuardedEnv(t)
	c := connect(t, direct, pgx.QueryExecModeExec)
	for _, p := range []struct{ stmt, resource string }{
		{"INSERT INTO jobs VALUES (1, 1)", "jobs"},
		{"INSERT INTO jobs_v VALUES (2, 1)", "jobs"},
		{"TRUNCATE softt, jobs", "jobs"},
		{"DELETE FROM parent WHERE id = 1", "kids"},
		{"INSERT INTO events VALUES (1, 5)", "ev"},
		{`INSERT INTO "Mixed" VALUES (1)`, "mixed"},
	} {
		_, err := c.Exec(t.Context(), p.stmt)
		wantCode(t, err, "55Z02")
		tx, err := c.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(t.Context(), fmt.Sprintf("CALL fence.check('1', '%s', '', '', false, true)", p.resource)); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(t.Context(), p.stmt); err != nil {
			t.Fatalf("%s after the check: %v", p.stmt, err)
		}
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// fence.check itself is for fence_client only.
	stranger := "stranger_" + e.db
	if err := harness.Exec(t.Context(), e.direct(), "CREATE ROLE "+stranger+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	s := connect(t, e.pg.DSN(stranger, e.db), pgx.QueryExecModeExec)
	_, err := s.Exec(t.Context(), "CALL fence.check('9223372036854775807', 'jobs', '', '', false, true)")
	wantCode(t, err, "42501")
}

// TestGuardDDLThroughProxy: DDL the table filter does not read (COMMENT, a
// schema's rename or drop, DROP OWNED BY) is refused by the event triggers
// without a check; after a checked rename, a write under the new name is
// still guarded.
func TestGuardDDLThroughProxy(t *testing.T) {
	e, viaProxy, _ := newGuardedEnv(t)
	c := connect(t, viaProxy, pgx.QueryExecModeSimpleProtocol)
	for _, stmt := range []string{
		"COMMENT ON TABLE sch.items IS 'x'",
		"ALTER SCHEMA sch RENAME TO sch2",
		"DROP SCHEMA sch CASCADE",
		"DROP OWNED BY app_" + e.db + " CASCADE",
	} {
		_, err := c.Exec(t.Context(), stmt)
		wantCode(t, err, "55Z02")
	}
	mustExec(t, c, "SET lock.fencing_token = '3'")
	mustExec(t, c, "/* resource=items */ ALTER SCHEMA sch RENAME TO sch2")
	mustExec(t, c, "RESET lock.fencing_token")
	_, err := c.Exec(t.Context(), "INSERT INTO sch2.items VALUES (1)") // the table filter knows only sch.items
	wantCode(t, err, "55Z02")
	var n int
	if err := connect(t, e.direct(), pgx.QueryExecModeExec).QueryRow(t.Context(), "SELECT count(*) FROM sch2.items").Scan(&n); err != nil || n != 0 {
		t.Fatalf("sch2.items has %d rows (%v), want 0", n, err)
	}
}
