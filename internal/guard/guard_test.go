package guard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
	"github.com/fenceproxy/fenceproxy/internal/guard"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

var dbSeq atomic.Int64

// env is a fresh database with the fence store, tables and an application
// role app (LOGIN, not a superuser, member of fence_client, all privileges
// on the tables).
type env struct {
	pg   *pgcluster.Cluster
	name string
	app  string
	impl string // fence.guard's implementation protect installs (guard.GuardAuto: as protect decides)
}

// eachImpl runs f in a fresh env under each implementation of fence.guard:
// what the guard refuses must not depend on which one runs.
func eachImpl(t *testing.T, f func(t *testing.T, e env)) {
	for _, impl := range []string{guard.GuardPLpgSQL, guard.GuardC} {
		t.Run(impl, func(t *testing.T) {
			e := newEnv(t)
			e.impl = impl
			f(t, e)
		})
	}
}

const schemaSQL = `
CREATE TABLE jobs (id int PRIMARY KEY, v int);
CREATE TABLE "Mixed" (id int);
CREATE TABLE softt (id int);
CREATE TABLE parent (id int PRIMARY KEY);
CREATE TABLE child (id int, parent_id int REFERENCES parent ON DELETE CASCADE);
CREATE TABLE events (id int, at int) PARTITION BY RANGE (at);
CREATE TABLE events_1 PARTITION OF events FOR VALUES FROM (0) TO (100);
CREATE TABLE base (id int);
CREATE TABLE base_kid () INHERITS (base);
CREATE VIEW jobs_v AS SELECT * FROM jobs;
CREATE TABLE jobs_log (id int);
CREATE FUNCTION jobs_fn() RETURNS void LANGUAGE sql AS 'INSERT INTO jobs VALUES (900, 1)';
CREATE PROCEDURE jobs_proc() LANGUAGE sql AS 'DELETE FROM jobs WHERE id = 900';
CREATE FUNCTION log_to_jobs() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN INSERT INTO jobs VALUES (NEW.id + 1000, 0); RETURN NEW; END';
CREATE TRIGGER log_to_jobs AFTER INSERT ON jobs_log FOR EACH ROW EXECUTE FUNCTION log_to_jobs();
CREATE TABLE ruled (id int);
CREATE RULE ruled_to_jobs AS ON INSERT TO ruled DO INSTEAD INSERT INTO jobs VALUES (NEW.id, 0);
`

// entries protects jobs ("jobs"), child ("kids"), events ("ev"), base_kid
// ("base") and "Mixed" ("mixed").
var entries = []guard.Entry{
	{Schema: "public", Name: "jobs", Resource: "jobs", Where: "t.yaml:1"},
	{Name: "child", Resource: "kids", Where: "t.yaml:2"},
	{Schema: "public", Name: "events", Resource: "ev", Where: "t.yaml:3"},
	{Schema: "public", Name: "base_kid", Resource: "base", Where: "t.yaml:4"},
	{Schema: "public", Name: "Mixed", Resource: "mixed", Where: "t.yaml:5"},
}

func newEnv(t *testing.T) env {
	t.Helper()
	pg := harness.Postgres(t)
	n := dbSeq.Add(1)
	e := env{pg: pg, name: fmt.Sprintf("guard_%d", n), app: fmt.Sprintf("guard_app_%d", n)}
	ctx := t.Context()
	if err := harness.Exec(ctx, pg.DSN(pgcluster.Superuser, "postgres"), "CREATE DATABASE "+e.name, "CREATE ROLE "+e.app+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	super := e.connect(t, pgcluster.Superuser)
	if _, err := fencestore.Migrate(ctx, fencestorepgx.Querier{Conn: super}); err != nil {
		t.Fatal(err)
	}
	setup := schemaSQL + fmt.Sprintf(`GRANT fence_client TO %[1]s;
		GRANT ALL ON ALL TABLES IN SCHEMA public TO %[1]s; GRANT CREATE ON SCHEMA public TO %[1]s;
		INSERT INTO parent VALUES (1), (2); INSERT INTO child VALUES (1, 1), (2, 2);`, e.app)
	if _, err := super.Exec(ctx, setup); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e env) connect(t *testing.T, user string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), e.pg.DSN(user, e.name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func (e env) protect(t *testing.T, opts guard.Options) guard.Report {
	t.Helper()
	if opts.Guard == guard.GuardAuto {
		opts.Guard = e.impl
	}
	rep, err := guard.Protect(t.Context(), fencestorepgx.Querier{Conn: e.connect(t, pgcluster.Superuser)}, entries, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// code returns err's SQLSTATE, "" for nil.
func code(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("not a server error: %v", err)
	}
	return pe.Code
}

// run runs each statement of script on c in order (simple protocol, one
// at a time) and returns the error of the first that fails; it rolls back
// an open transaction after a failure.
func run(t *testing.T, c *pgx.Conn, script ...string) error {
	t.Helper()
	for _, s := range script {
		if _, err := c.Exec(t.Context(), s, pgx.QueryExecModeSimpleProtocol); err != nil {
			c.Exec(t.Context(), "ROLLBACK", pgx.QueryExecModeSimpleProtocol)
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

func check(token int, resource string) string {
	return fmt.Sprintf("CALL fence.check('%d', '%s', '', '', false, true)", token, resource)
}

// TestWritePathsBypassingProxy connects straight to PostgreSQL as an
// application role: every write path to a protected table is refused with
// 55Z02 without a check, and allowed after CALL fence.check in the same
// transaction.
func TestWritePathsBypassingProxy(t *testing.T) {
	eachImpl(t, func(t *testing.T, e env) {
		e.protect(t, guard.Options{})
		app := e.connect(t, e.app)
		paths := []struct {
			name, resource string
			stmts          []string
		}{
			{"insert", "jobs", []string{"INSERT INTO jobs VALUES (1, 1)"}},
			{"update", "jobs", []string{"UPDATE jobs SET v = 2"}},
			{"delete", "jobs", []string{"DELETE FROM jobs WHERE id = 1"}},
			{"merge", "jobs", []string{"MERGE INTO jobs j USING (VALUES (5)) v(x) ON j.id = v.x WHEN NOT MATCHED THEN INSERT VALUES (5, 0)"}},
			{"upsert", "jobs", []string{"INSERT INTO jobs VALUES (5, 1) ON CONFLICT (id) DO UPDATE SET v = 9"}},
			{"data-modifying CTE", "jobs", []string{"WITH x AS (INSERT INTO jobs VALUES (6, 0) RETURNING 1) SELECT count(*) FROM x"}},
			{"truncate", "jobs", []string{"TRUNCATE jobs"}},
			{"view", "jobs", []string{"INSERT INTO jobs_v VALUES (7, 0)"}},
			{"rule", "jobs", []string{"INSERT INTO ruled VALUES (8)"}},
			{"trigger on another table", "jobs", []string{"INSERT INTO jobs_log VALUES (9)"}},
			{"function", "jobs", []string{"SELECT jobs_fn()"}},
			{"procedure", "jobs", []string{"CALL jobs_proc()"}},
			{"DO block", "jobs", []string{"DO $$BEGIN UPDATE jobs SET v = 3; END$$"}},
			{"FK ON DELETE CASCADE", "kids", []string{"DELETE FROM parent WHERE id = 1"}},
			{"TRUNCATE CASCADE", "kids", []string{"TRUNCATE parent CASCADE"}},
			{"TRUNCATE two tables", "jobs", []string{"TRUNCATE softt, jobs"}},
			{"partition directly", "ev", []string{"INSERT INTO events_1 VALUES (1, 5)"}},
			{"partitioned parent", "ev", []string{"INSERT INTO events VALUES (1, 6)"}},
			{"inheritance parent", "base", []string{"DELETE FROM base"}},
			{"inheritance child", "base", []string{"INSERT INTO base_kid VALUES (1)"}},
			{"mixed-case table", "mixed", []string{"INSERT INTO \"Mixed\" VALUES (1)"}},
		}
		for _, p := range paths {
			t.Run(p.name, func(t *testing.T) {
				err := run(t, app, append([]string{"BEGIN"}, append(p.stmts, "COMMIT")...)...)
				if code(t, errors.Unwrap(err)) != "55Z02" {
					t.Fatalf("without a check: %v, want 55Z02", err)
				}
				err = run(t, app, append([]string{"BEGIN", check(10, p.resource)}, append(p.stmts, "COMMIT")...)...)
				if err != nil {
					t.Fatalf("after the check: %v", err)
				}
			})
		}
	})
}

// TestCopyFromStdin is COPY FROM STDIN, the bulk path, both ways.
func TestCopyFromStdin(t *testing.T) {
	eachImpl(t, func(t *testing.T, e env) {
		e.protect(t, guard.Options{})
		app := e.connect(t, e.app)
		copyIn := func() error {
			_, err := app.PgConn().CopyFrom(t.Context(), strings.NewReader("50\t1\n51\t1\n"), "COPY jobs FROM STDIN")
			return err
		}
		if err := copyIn(); code(t, err) != "55Z02" {
			t.Fatalf("COPY without a check: %v", err)
		}
		run(t, app, "BEGIN", check(3, "jobs"))
		if err := copyIn(); err != nil {
			t.Fatalf("COPY after a check: %v", err)
		}
		if err := run(t, app, "COMMIT"); err != nil {
			t.Fatal(err)
		}
		var n int
		app.QueryRow(t.Context(), "SELECT count(*) FROM jobs").Scan(&n)
		if n != 2 {
			t.Fatalf("rows = %d, want 2", n)
		}
	})
}

// TestCheckStates covers the ways a check can be in effect or not: first
// token (insert), equal token (lock only), rising token (update), in a
// released savepoint, undone by ROLLBACK TO, a check for another resource,
// a check-only call, a later transaction, and REPEATABLE READ.
func TestCheckStates(t *testing.T) {
	eachImpl(t, func(t *testing.T, e env) {
		e.protect(t, guard.Options{})
		app := e.connect(t, e.app)
		ins := "INSERT INTO jobs VALUES ((SELECT coalesce(max(id), 0) + 1 FROM jobs), 0)"
		cases := []struct {
			name   string
			script []string
			ok     bool
		}{
			{"no check", []string{"BEGIN", ins, "COMMIT"}, false},
			{"first token inserts the mark", []string{"BEGIN", check(5, "jobs"), ins, "COMMIT"}, true},
			{"equal token only locks", []string{"BEGIN", check(5, "jobs"), ins, "COMMIT"}, true},
			{"rising token updates", []string{"BEGIN", check(6, "jobs"), ins, "COMMIT"}, true},
			{"check committed earlier", []string{"BEGIN", ins, "COMMIT"}, false},
			{"other resource", []string{"BEGIN", check(6, "other"), ins, "COMMIT"}, false},
			{"check only", []string{"BEGIN", "CALL fence.check('6', 'jobs', '', '', false, false)", ins, "COMMIT"}, false},
			{"released savepoint, equal", []string{"BEGIN", "SAVEPOINT a", check(6, "jobs"), "RELEASE a", ins, "COMMIT"}, true},
			{"released savepoint, rising", []string{"BEGIN", "SAVEPOINT a", check(7, "jobs"), "RELEASE a", ins, "COMMIT"}, true},
			{"rolled back, equal", []string{"BEGIN", "SAVEPOINT a", check(7, "jobs"), "ROLLBACK TO a", ins, "COMMIT"}, false},
			{"rolled back, rising", []string{"BEGIN", "SAVEPOINT a", check(8, "jobs"), "ROLLBACK TO a", ins, "COMMIT"}, false},
			{"rolled back, first token", []string{"BEGIN", "SAVEPOINT a", check(1, "fresh"), "ROLLBACK TO a", "INSERT INTO \"Mixed\" VALUES (1)", "COMMIT"}, false},
			{"inner savepoint", []string{"BEGIN", "SAVEPOINT a", check(7, "jobs"), "SAVEPOINT b", ins, "ROLLBACK TO b", ins, "COMMIT"}, true},
			{"check then savepoint rollback of a later one", []string{"BEGIN", check(7, "jobs"), "SAVEPOINT b", check(7, "jobs"), "ROLLBACK TO b", ins, "COMMIT"}, true},
			{"repeatable read", []string{"BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT 1", check(9, "jobs"), ins, "COMMIT"}, true},
			{"repeatable read, equal", []string{"BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT 1", check(9, "jobs"), ins, "COMMIT"}, true},
			{"autocommit after a transaction's check", []string{ins}, false},
			// The C guard remembers a fast-path answer for the rest of its
			// transaction: for that resource only, and not into the next.
			{"a write passed, then another resource", []string{"BEGIN", check(9, "jobs"), ins, "INSERT INTO \"Mixed\" VALUES (1)", "COMMIT"}, false},
			{"a write passed, then a savepoint rolled back", []string{"BEGIN", check(9, "jobs"), ins, "SAVEPOINT a", ins, "ROLLBACK TO a", ins, "COMMIT"}, true},
			{"after a passed write's transaction rolled back", []string{"BEGIN", check(9, "jobs"), ins, "ROLLBACK", "BEGIN", "INSERT INTO softt VALUES (1)", ins, "COMMIT"}, false},
			{"after a passed write's transaction committed", []string{"BEGIN", check(9, "jobs"), ins, "COMMIT", "BEGIN", "INSERT INTO softt VALUES (1)", ins, "COMMIT"}, false},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				err := run(t, app, c.script...)
				switch {
				case c.ok && err != nil:
					t.Fatalf("refused: %v", err)
				case !c.ok && code(t, errors.Unwrap(err)) != "55Z02":
					t.Fatalf("got %v, want 55Z02", err)
				}
			})
		}
	})
}

// TestAnotherHolder: while another transaction holds the mark's lock, a
// write without a check of its own is refused at once (NOWAIT), not
// blocked, and not let through.
func TestAnotherHolder(t *testing.T) {
	eachImpl(t, func(t *testing.T, e env) {
		e.protect(t, guard.Options{})
		holder, app := e.connect(t, e.app), e.connect(t, e.app)
		if err := run(t, holder, "BEGIN", check(4, "jobs")); err != nil {
			t.Fatal(err)
		}
		defer run(t, holder, "ROLLBACK")
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := app.Exec(ctx, "INSERT INTO jobs VALUES (77, 0)")
		if code(t, err) != "55Z02" || time.Since(start) > 2*time.Second {
			t.Fatalf("got %v after %v, want 55Z02 at once", err, time.Since(start))
		}
	})
}

// TestDDL needs the event triggers (the test's protect runs as a
// superuser): DDL on a protected table, also through its schema, needs a
// check; new partitions get the guard.
func TestDDL(t *testing.T) {
	e := newEnv(t)
	super := e.connect(t, pgcluster.Superuser)
	if _, err := super.Exec(t.Context(), "CREATE SCHEMA s; CREATE TABLE s.kept (id int); ALTER SCHEMA s OWNER TO "+e.app+"; GRANT CREATE ON DATABASE "+e.name+" TO "+e.app+"; ALTER TABLE s.kept OWNER TO "+e.app+"; ALTER TABLE jobs OWNER TO "+e.app+
		"; CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'"); err != nil {
		t.Fatal(err)
	}
	entries2 := append(entries[:len(entries):len(entries)], guard.Entry{Schema: "s", Name: "kept", Resource: "s", Where: "t.yaml:6"})
	if _, err := guard.Protect(t.Context(), fencestorepgx.Querier{Conn: super}, entries2, guard.Options{}); err != nil {
		t.Fatal(err)
	}
	app := e.connect(t, e.app)
	ddl := []struct{ stmt, resource string }{
		{"ALTER TABLE jobs ADD COLUMN note text", "jobs"},
		{"COMMENT ON TABLE jobs IS 'x'", "jobs"},
		{"ALTER TABLE jobs RENAME TO jobs2", "jobs"},
		{"ALTER TABLE jobs DISABLE TRIGGER fence_guard", "jobs"},
		{"DROP TRIGGER fence_guard ON jobs", "jobs"},
		{"CREATE INDEX ON jobs (v)", "jobs"},
		// A trigger can drop or change what a checked write lands; CREATE
		// OR REPLACE TRIGGER fence_guard would replace the guard itself.
		{"CREATE TRIGGER drop_rows BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION noop()", "jobs"},
		{"CREATE OR REPLACE TRIGGER fence_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobs FOR EACH STATEMENT EXECUTE FUNCTION noop()", "jobs"},
		{"CREATE OR REPLACE TRIGGER fence_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobs FOR EACH STATEMENT EXECUTE FUNCTION fence.guard('s')", "jobs"},
		// The guard's own function and resources, narrowed: never fires, or
		// not for an UPDATE of v.
		{"CREATE OR REPLACE TRIGGER fence_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobs FOR EACH STATEMENT WHEN (false) EXECUTE FUNCTION fence.guard('jobs')", "jobs"},
		{"CREATE OR REPLACE TRIGGER fence_guard BEFORE INSERT OR UPDATE OF id OR DELETE OR TRUNCATE ON jobs FOR EACH STATEMENT EXECUTE FUNCTION fence.guard('jobs')", "jobs"},
		{"ALTER SCHEMA s RENAME TO s2", "s"},
		{"DROP SCHEMA s CASCADE", "s"},
		{"DROP TABLE jobs CASCADE", "jobs"},
		{"DROP OWNED BY " + e.app + " CASCADE", "jobs"},
	}
	for _, d := range ddl {
		err := run(t, app, "BEGIN", d.stmt, "ROLLBACK")
		if code(t, errors.Unwrap(err)) != "55Z02" {
			t.Errorf("%s without a check: %v, want 55Z02", d.stmt, err)
		}
		if strings.HasPrefix(d.stmt, "DROP OWNED") {
			continue // also drops s.kept, whose resource it did not check
		}
		if err := run(t, app, "BEGIN", check(2, d.resource), d.stmt, "ROLLBACK"); err != nil {
			t.Errorf("%s after a check: %v", d.stmt, err)
		}
	}
	// The guard replaced by a trigger that does nothing, then a write: in
	// one transaction without a check, nothing of it may land.
	err := run(t, app, "BEGIN",
		"CREATE OR REPLACE TRIGGER fence_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobs FOR EACH STATEMENT EXECUTE FUNCTION noop()",
		"INSERT INTO jobs VALUES (1, 1)", "COMMIT")
	if code(t, errors.Unwrap(err)) != "55Z02" {
		t.Errorf("replacing the guard without a check: %v, want 55Z02", err)
	}
	// GRANT, REVOKE and DROP INDEX change no row and need no check (see
	// the README); a role the GRANT lets write is still refused.
	stranger := e.app + "_stranger"
	if err := run(t, super, "CREATE ROLE "+stranger+" LOGIN", "BEGIN", check(2, "jobs"), "CREATE INDEX jobs_v_idx ON jobs (v)", "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := run(t, app, "GRANT INSERT, UPDATE ON jobs TO "+stranger, "REVOKE UPDATE ON jobs FROM "+stranger, "DROP INDEX jobs_v_idx"); err != nil {
		t.Fatalf("GRANT, REVOKE, DROP INDEX without a check: %v", err)
	}
	if _, err := e.connect(t, stranger).Exec(t.Context(), "INSERT INTO jobs VALUES (5, 5)"); code(t, err) != "55Z02" {
		t.Errorf("insert by the granted role without a check: %v, want 55Z02", err)
	}
	var n int
	if err := super.QueryRow(t.Context(), "SELECT count(*) FROM jobs").Scan(&n); err != nil || n != 0 {
		t.Fatalf("jobs has %d rows (%v), want 0", n, err)
	}
	// A new partition gets the guard, without a check to create it.
	if _, err := super.Exec(t.Context(), "CREATE TABLE events_2 PARTITION OF events FOR VALUES FROM (100) TO (200); GRANT ALL ON events_2 TO "+e.app); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec(t.Context(), "INSERT INTO events_2 VALUES (1, 150)"); code(t, err) != "55Z02" {
		t.Fatalf("new partition: %v, want 55Z02", err)
	}
	v, err := guard.Verify(t.Context(), fencestorepgx.Querier{Conn: super}, entries2)
	if err != nil || !v.OK() || len(v.Notes) != 0 {
		t.Fatalf("Verify after DDL: %+v, %v", v, err)
	}
}

// TestGuardIgnoresSearchPath: fence.guard has no pinned search_path (it
// runs on every write and is kept cheap), so it qualifies every operator.
// A writer whose search_path puts its own "=" (always true) and "-" (which
// would make the loop over the resources empty) before pg_catalog's is
// still refused without a check, and allowed after one.
func TestGuardIgnoresSearchPath(t *testing.T) {
	eachImpl(t, func(t *testing.T, e env) {
		e.protect(t, guard.Options{})
		super := e.connect(t, pgcluster.Superuser)
		if _, err := super.Exec(t.Context(), "GRANT CREATE ON DATABASE "+e.name+" TO "+e.app); err != nil {
			t.Fatal(err)
		}
		app := e.connect(t, e.app)
		err := run(t, app, "CREATE SCHEMA evil",
			"CREATE FUNCTION evil.yes(xid, xid) RETURNS boolean LANGUAGE sql AS 'SELECT true'",
			"CREATE FUNCTION evil.yes(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true'",
			"CREATE FUNCTION evil.yes(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql AS 'SELECT true'",
			"CREATE FUNCTION evil.minus(int, int) RETURNS int LANGUAGE sql AS 'SELECT -1'",
			"CREATE OPERATOR evil.= (LEFTARG = xid, RIGHTARG = xid, FUNCTION = evil.yes)",
			"CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.yes)",
			"CREATE OPERATOR evil.= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.yes)",
			"CREATE OPERATOR evil.- (LEFTARG = int, RIGHTARG = int, FUNCTION = evil.minus)",
			"SET search_path = evil, pg_catalog, public")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"INSERT INTO jobs VALUES (1, 1)", "INSERT INTO \"Mixed\" VALUES (1)"} {
			if err := run(t, app, "BEGIN", s, "COMMIT"); code(t, errors.Unwrap(err)) != "55Z02" {
				t.Errorf("%s with a hostile search_path, without a check: %v, want 55Z02", s, err)
			}
		}
		// A check of another resource locks a row with our xid: still refused.
		if err := run(t, app, "BEGIN", check(1, "kids"), "INSERT INTO jobs VALUES (2, 1)", "COMMIT"); code(t, errors.Unwrap(err)) != "55Z02" {
			t.Errorf("insert after a check of another resource: %v, want 55Z02", err)
		}
		if err := run(t, app, "BEGIN", check(1, "jobs"), "INSERT INTO jobs VALUES (3, 1)", "COMMIT"); err != nil {
			t.Fatalf("insert after the check, same search_path: %v", err)
		}
		var ids []int32
		rows, _ := super.Query(t.Context(), "SELECT id FROM jobs ORDER BY id")
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil || len(ids) != 1 || ids[0] != 3 {
			t.Fatalf("jobs holds ids %v (%v), want [3]", ids, err)
		}
	})
}

// TestNarrowedGuardRepaired: a guard trigger narrowed by a WHEN condition
// or a column list (here by a superuser, after a check) is not the guard:
// Verify reports it and protect puts the real one back.
func TestNarrowedGuardRepaired(t *testing.T) {
	e := newEnv(t)
	e.protect(t, guard.Options{})
	super := e.connect(t, pgcluster.Superuser)
	q := fencestorepgx.Querier{Conn: super}
	for _, narrowed := range []string{
		"CREATE OR REPLACE TRIGGER fence_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobs FOR EACH STATEMENT WHEN (false) EXECUTE FUNCTION fence.guard('jobs')",
		"CREATE OR REPLACE TRIGGER fence_guard BEFORE INSERT OR UPDATE OF id OR DELETE OR TRUNCATE ON jobs FOR EACH STATEMENT EXECUTE FUNCTION fence.guard('jobs')",
	} {
		if err := run(t, super, "BEGIN", check(1, "jobs"), narrowed, "COMMIT"); err != nil {
			t.Fatal(err)
		}
		if v, err := guard.Verify(t.Context(), q, entries); err != nil || v.OK() {
			t.Errorf("Verify after %s: %+v, %v; want a problem", narrowed, v, err)
		}
		e.protect(t, guard.Options{})
		if v, err := guard.Verify(t.Context(), q, entries); err != nil || !v.OK() {
			t.Errorf("Verify after protect repaired %s: %+v, %v", narrowed, v, err)
		}
		if _, err := e.connect(t, e.app).Exec(t.Context(), "UPDATE jobs SET v = 1"); code(t, err) != "55Z02" {
			t.Errorf("update without a check after the repair: %v, want 55Z02", err)
		}
	}
}

// TestProtectIdempotentAndRemove: a second run changes nothing; a dry run
// changes nothing; Verify sees what differs; remove takes it all out.
func TestProtectIdempotentAndRemove(t *testing.T) {
	e := newEnv(t)
	dry := e.protect(t, guard.Options{DryRun: true})
	if len(dry.SQL) == 0 {
		t.Fatal("dry run printed no SQL")
	}
	super := e.connect(t, pgcluster.Superuser)
	q := fencestorepgx.Querier{Conn: super}
	if v, _ := guard.Verify(t.Context(), q, entries); v.OK() {
		t.Fatal("Verify OK after a dry run")
	}
	first := e.protect(t, guard.Options{})
	if len(first.SQL) == 0 || len(first.Notes) != 0 {
		t.Fatalf("first run: %+v", first)
	}
	if again := e.protect(t, guard.Options{}); len(again.SQL) != 0 {
		t.Fatalf("second run changed: %q", again.SQL)
	}
	if v, err := guard.Verify(t.Context(), q, entries); err != nil || !v.OK() || len(v.Notes) != 0 {
		t.Fatalf("Verify: %+v, %v", v, err)
	}
	// Someone with the rights drops a guard: Verify says so, protect puts it back.
	if err := run(t, super, "BEGIN", check(1, "ev"), "DROP TRIGGER fence_guard ON events_1", "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if v, _ := guard.Verify(t.Context(), q, entries); v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "events_1") {
		t.Fatalf("Verify after a dropped trigger: %+v", v)
	}
	if fix := e.protect(t, guard.Options{}); len(fix.SQL) != 1 {
		t.Fatalf("repair ran %q", fix.SQL)
	}
	// A config with one table fewer: Verify reports the extra one.
	if v, _ := guard.Verify(t.Context(), q, entries[1:]); v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "not by the config") {
		t.Fatalf("Verify with a table fewer: %+v", v)
	}
	e.protect(t, guard.Options{Remove: true})
	var n int
	super.QueryRow(t.Context(), "SELECT (SELECT count(*) FROM pg_trigger WHERE tgname = 'fence_guard') + (SELECT count(*) FROM fence.protected) + (SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'fence_guard%')").Scan(&n)
	if n != 0 {
		t.Fatalf("%d guard objects left after remove", n)
	}
	app := e.connect(t, e.app)
	if _, err := app.Exec(t.Context(), "INSERT INTO jobs VALUES (1, 1)"); err != nil {
		t.Fatalf("write after remove: %v", err)
	}
}

// TestProtectRefusesUnknownNames: a name that matches no table is an error
// naming where it was written; nothing is installed.
func TestProtectRefusesUnknownNames(t *testing.T) {
	e := newEnv(t)
	super := e.connect(t, pgcluster.Superuser)
	bad := append(entries[:1:1], guard.Entry{Schema: "public", Name: "jobs_typo", Resource: "x", Where: "proxy.yaml:12"},
		guard.Entry{Schema: "public", Name: "mixed", Resource: "x", Where: "proxy.yaml:13"})
	_, err := guard.Protect(t.Context(), fencestorepgx.Querier{Conn: super}, bad, guard.Options{})
	if err == nil || !strings.Contains(err.Error(), "proxy.yaml:12: table \"public\".\"jobs_typo\" matches no table") {
		t.Fatalf("err = %v", err)
	}
	var n int
	super.QueryRow(t.Context(), "SELECT count(*) FROM pg_trigger WHERE tgname = 'fence_guard'").Scan(&n)
	if n != 0 {
		t.Fatalf("%d triggers installed by a failed run", n)
	}
	_, err = guard.Protect(t.Context(), fencestorepgx.Querier{Conn: super}, []guard.Entry{bad[2]}, guard.Options{})
	if err == nil || !strings.Contains(err.Error(), "proxy.yaml:13") {
		t.Fatalf("lower-case name of \"Mixed\": err = %v", err)
	}
	// A table without require_token gets no trigger, but its name must match.
	unguarded := guard.Entry{Schema: "public", Name: "sofft", Resource: "soft", Where: "proxy.yaml:14", Unguarded: true}
	_, err = guard.Protect(t.Context(), fencestorepgx.Querier{Conn: super}, []guard.Entry{entries[0], unguarded}, guard.Options{})
	if err == nil || !strings.Contains(err.Error(), "proxy.yaml:14") {
		t.Fatalf("unguarded typo: err = %v", err)
	}
	unguarded.Name = "softt"
	if _, err := guard.Protect(t.Context(), fencestorepgx.Querier{Conn: super}, []guard.Entry{entries[0], unguarded}, guard.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := super.QueryRow(t.Context(), "SELECT count(*) FROM pg_trigger WHERE tgname = 'fence_guard' AND tgrelid = 'softt'::regclass").Scan(&n); err != nil || n != 0 {
		t.Fatalf("softt has %d guard triggers (%v), want none", n, err)
	}
}

// TestProtectAsOwner: a role that is not a superuser but owns the tables
// and may write the registry installs the triggers, and says the event
// triggers are missing.
func TestProtectAsOwner(t *testing.T) {
	pg := harness.Postgres(t)
	n := dbSeq.Add(1)
	db, owner := fmt.Sprintf("guard_%d", n), fmt.Sprintf("guard_owner_%d", n)
	ctx := t.Context()
	if err := harness.Exec(ctx, pg.DSN(pgcluster.Superuser, "postgres"), "CREATE DATABASE "+db, "CREATE ROLE "+owner+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	e := env{pg: pg, name: db}
	super := e.connect(t, pgcluster.Superuser)
	if _, err := fencestore.Migrate(ctx, fencestorepgx.Querier{Conn: super}); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Exec(ctx, "GRANT CREATE ON SCHEMA public TO "+owner+"; GRANT ALL ON fence.protected TO "+owner); err != nil {
		t.Fatal(err)
	}
	c := e.connect(t, owner)
	if _, err := c.Exec(ctx, "CREATE TABLE jobs (id int)"); err != nil {
		t.Fatal(err)
	}
	rep, err := guard.Protect(ctx, fencestorepgx.Querier{Conn: c}, entries[:1], guard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Notes) != 2 || !strings.Contains(rep.Notes[0], "fence.guard is PL/pgSQL") || !strings.Contains(rep.Notes[1], "event triggers") {
		t.Fatalf("notes: %q", rep.Notes)
	}
	if _, err := guard.Protect(ctx, fencestorepgx.Querier{Conn: c}, entries[:1], guard.Options{Guard: guard.GuardC}); err == nil || !strings.Contains(err.Error(), "needs a superuser") {
		t.Fatalf("--guard c as the owner: %v, want an error", err)
	}
	// The owner of fence.guard (and of schema fence, as the role that ran
	// migrate is) repairs a no-op one without a superuser.
	if _, err := super.Exec(ctx, "ALTER FUNCTION fence.guard() OWNER TO "+owner+"; GRANT CREATE ON SCHEMA fence TO "+owner+"; CREATE OR REPLACE FUNCTION fence.guard() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'"); err != nil {
		t.Fatal(err)
	}
	if _, err := guard.Protect(ctx, fencestorepgx.Querier{Conn: c}, entries[:1], guard.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO jobs VALUES (1)"); code(t, err) != "55Z02" {
		t.Fatalf("owner's unchecked write: %v", err)
	}
	v, err := guard.Verify(ctx, fencestorepgx.Querier{Conn: c}, entries[:1])
	if err != nil || !v.OK() || len(v.Notes) != 1 {
		t.Fatalf("Verify: %+v, %v", v, err)
	}
}

// TestGuardImplementations: protect chooses fence.guard's implementation
// (auto: C as a superuser with the library installed, as the test
// dependencies install it), a second run changes nothing, either passes
// Verify and Status, and a C function that is not this library's guard is
// reported, not trusted.
func TestGuardImplementations(t *testing.T) {
	e := newEnv(t)
	super := e.connect(t, pgcluster.Superuser)
	q := fencestorepgx.Querier{Conn: super}
	impl := func() string {
		t.Helper()
		var impl string
		var isSuper bool
		if err := super.QueryRow(t.Context(), fencestore.GuardImplQuery).Scan(&impl, &isSuper); err != nil {
			t.Fatal(err)
		}
		return impl
	}
	steps := []struct {
		mode, want string
		changes    int // statements that change fence.guard
	}{
		{guard.GuardAuto, "c", 1},
		{guard.GuardAuto, "c", 0},
		{guard.GuardPLpgSQL, "plpgsql", 1},
		{guard.GuardPLpgSQL, "plpgsql", 0},
		{guard.GuardC, "c", 1},
		{guard.GuardC, "c", 0},
	}
	for i, s := range steps {
		rep := e.protect(t, guard.Options{Guard: s.mode})
		n := 0
		for _, sql := range rep.SQL {
			if strings.Contains(sql, "FUNCTION fence.guard()") {
				n++
			}
		}
		if got := impl(); got != s.want || n != s.changes || len(rep.Notes) != 0 {
			t.Fatalf("step %d (%q): fence.guard is %s after %d changes, notes %q; want %s after %d", i, s.mode, got, n, rep.Notes, s.want, s.changes)
		}
		if v, err := guard.Verify(t.Context(), q, entries); err != nil || !v.OK() {
			t.Fatalf("step %d: Verify: %+v, %v", i, v, err)
		}
		if st, err := fencestore.Status(t.Context(), q); err != nil || !st.OK() {
			t.Fatalf("step %d: Status: %v, %v", i, st, err)
		}
	}
	// The same library under another path, or another symbol: not the guard.
	libdir := "$libdir"
	if err := super.QueryRow(t.Context(), "SELECT setting FROM pg_config() WHERE name = 'PKGLIBDIR'").Scan(&libdir); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Exec(t.Context(), "CREATE OR REPLACE FUNCTION fence.guard() RETURNS trigger LANGUAGE c AS '"+libdir+"/fence_guard', '"+fencestore.CGuardSymbol+"'"); err != nil {
		t.Fatal(err)
	}
	if st, err := fencestore.Status(t.Context(), q); err != nil || st.OK() || !strings.Contains(st.String(), "fence.guard") {
		t.Fatalf("Status with fence.guard from another path: %v, %v; want a problem", st, err)
	}
	if got := impl(); got != "other" {
		t.Fatalf("fence.guard from another path is %q, want other", got)
	}
	e.protect(t, guard.Options{})
	if got := impl(); got != "c" {
		t.Fatalf("after protect: fence.guard is %q, want c", got)
	}
	// fence.guard gone (as after restoring a dump with the C guard where
	// the library is missing): protect creates it again, and the triggers.
	if err := run(t, super, "BEGIN", check(1, "jobs"), check(1, "kids"), check(1, "ev"), check(1, "base"), check(1, "mixed"),
		"DROP FUNCTION fence.guard() CASCADE", "COMMIT"); err != nil {
		t.Fatal(err)
	}
	e.protect(t, guard.Options{Guard: guard.GuardPLpgSQL})
	if got := impl(); got != "plpgsql" {
		t.Fatalf("after protect: the dropped fence.guard is %q, want plpgsql", got)
	}
	// A new session: fence.sync's plans in older ones hold the dropped
	// function's oid.
	if v, err := guard.Verify(t.Context(), fencestorepgx.Querier{Conn: e.connect(t, pgcluster.Superuser)}, entries); err != nil || !v.OK() {
		t.Fatalf("Verify after fence.guard was created again: %+v, %v", v, err)
	}
	if _, err := e.connect(t, e.app).Exec(t.Context(), "INSERT INTO jobs VALUES (1, 1)"); code(t, err) != "55Z02" {
		t.Fatalf("unchecked insert after fence.guard was created again: %v, want 55Z02", err)
	}
	// A fence.guard that lets everything through: Verify reports it, and
	// protect in any mode puts a real one back.
	noop := "CREATE OR REPLACE FUNCTION fence.guard() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'"
	for _, mode := range []string{guard.GuardPLpgSQL, guard.GuardC, guard.GuardAuto} {
		if _, err := super.Exec(t.Context(), noop); err != nil {
			t.Fatal(err)
		}
		if v, err := guard.Verify(t.Context(), q, entries); err != nil || v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "fence.guard is neither") {
			t.Fatalf("Verify with a no-op fence.guard: %+v, %v; want a problem", v, err)
		}
		e.protect(t, guard.Options{Guard: mode})
		if got := impl(); got == "other" {
			t.Fatalf("protect --guard %q left the no-op fence.guard", mode)
		}
		if _, err := e.connect(t, e.app).Exec(t.Context(), "INSERT INTO jobs VALUES (1, 1)"); code(t, err) != "55Z02" {
			t.Fatalf("after protect --guard %q: unchecked insert: %v, want 55Z02", mode, err)
		}
	}
}

// TestStartEventTriggerVerifiedAndRepaired: the ddl_command_start event
// trigger (version 5) is part of what Verify checks: disabled, narrowed to
// a tag, or missing (a guard installed by an older protect has only the
// other two), Verify notes it and protect puts it back.
func TestStartEventTriggerVerifiedAndRepaired(t *testing.T) {
	e := newEnv(t)
	e.protect(t, guard.Options{})
	super := e.connect(t, pgcluster.Superuser)
	q := fencestorepgx.Querier{Conn: super}
	for _, weaken := range []string{
		"ALTER EVENT TRIGGER " + fencestore.StartEventTrigger + " DISABLE",
		"DROP EVENT TRIGGER " + fencestore.StartEventTrigger + "; CREATE EVENT TRIGGER " + fencestore.StartEventTrigger +
			" ON ddl_command_start WHEN TAG IN ('CREATE INDEX') EXECUTE FUNCTION fence.ddl_start()",
		"DROP EVENT TRIGGER " + fencestore.StartEventTrigger,
	} {
		if _, err := super.Exec(t.Context(), weaken); err != nil {
			t.Fatal(err)
		}
		if v, err := guard.Verify(t.Context(), q, entries); err != nil || len(v.Notes) != 1 || !strings.Contains(v.Notes[0], fencestore.StartEventTrigger) {
			t.Errorf("Verify after %s: %+v, %v; want a note naming %s", weaken, v, err, fencestore.StartEventTrigger)
		}
		if rep := e.protect(t, guard.Options{}); !strings.Contains(strings.Join(rep.SQL, "\n"), "CREATE EVENT TRIGGER "+fencestore.StartEventTrigger+" ON ddl_command_start") {
			t.Errorf("protect after %s ran %q", weaken, rep.SQL)
		}
		if v, err := guard.Verify(t.Context(), q, entries); err != nil || !v.OK() || len(v.Notes) != 0 {
			t.Errorf("Verify after the repair: %+v, %v", v, err)
		}
		app := e.connect(t, e.app)
		if _, err := app.Exec(t.Context(), "ALTER TABLE events DETACH PARTITION events_1 CONCURRENTLY"); code(t, err) != "55Z02" {
			t.Errorf("concurrent detach after the repair: %v, want 55Z02", err)
		}
	}
}
