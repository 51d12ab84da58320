package fencestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// session adapts a pgx connection to fencestore.Querier, as cmd/fenceproxy does.
type session struct{ c *pgx.Conn }

func (s session) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := s.c.Exec(ctx, sql, args...)
	return err
}

func (s session) QueryRow(ctx context.Context, sql string, args ...any) fencestore.Row {
	return s.c.QueryRow(ctx, sql, args...)
}

var dbSeq atomic.Int64

// testDB is a fresh database of the package's cluster.
type testDB struct {
	pg   *pgcluster.Cluster
	name string
}

// newDB creates an empty database for t.
func newDB(t testing.TB) testDB {
	t.Helper()
	pg := harness.Postgres(t)
	name := fmt.Sprintf("hwm_%d", dbSeq.Add(1))
	if err := harness.Exec(t.Context(), pg.DSN(pgcluster.Superuser, "postgres"), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return testDB{pg: pg, name: name}
}

// newStore creates a database with the fence store installed by the superuser.
func newStore(t testing.TB) testDB {
	t.Helper()
	db := newDB(t)
	if _, err := fencestore.Migrate(t.Context(), session{db.connect(t, pgcluster.Superuser)}); err != nil {
		t.Fatal(err)
	}
	return db
}

// connect opens a connection as user, closed when t ends.
func (db testDB) connect(t testing.TB, user string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), db.pg.DSN(user, db.name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// super is a superuser connection.
func (db testDB) super(t testing.TB) *pgx.Conn { return db.connect(t, pgcluster.Superuser) }

// mark returns the token of resource, 0 when it has none.
func mark(t *testing.T, c *pgx.Conn, resource string) int64 {
	t.Helper()
	var tok int64
	err := c.QueryRow(t.Context(), "SELECT COALESCE((SELECT token FROM fence.hwm WHERE resource = $1), 0)", resource).Scan(&tok)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// setMark sets resource's mark directly.
func setMark(t *testing.T, c *pgx.Conn, resource string, token int64) {
	t.Helper()
	if _, err := fencestore.Set(t.Context(), session{c}, resource, token); err != nil {
		t.Fatal(err)
	}
}

// pgErr returns err's SQLSTATE and message; "" and "" for nil.
func pgErr(t *testing.T, err error) (code, msg string) {
	t.Helper()
	if err == nil {
		return "", ""
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("not a server error: %v", err)
	}
	return pe.Code, pe.Message
}

// call runs fence.check with a through the extended protocol, exactly as the
// proxy binds it.
func call(ctx context.Context, c *pgx.Conn, a fencestore.CheckArgs) error {
	p := fencestore.Params(a)
	rr := c.PgConn().ExecParams(ctx, fencestore.CheckStatement, p, nil, nil, nil).Read()
	return rr.Err
}

// callLiteral runs fence.check with a through the simple protocol.
func callLiteral(ctx context.Context, c *pgx.Conn, a fencestore.CheckArgs) error {
	_, err := c.PgConn().Exec(ctx, string(fencestore.AppendLiteralCall(nil, a))).ReadAll()
	return err
}

// dropVersion8 puts fence.hwm's triggers back as versions 2 to 7 had them
// and takes migration 8's schema_version row out (fence.check keeps its
// version 8 body: the upgrade replaces it).
const dropVersion8 = `; DROP TRIGGER hwm_never_delete ON fence.hwm; DROP TRIGGER hwm_never_lower ON fence.hwm;
	CREATE TRIGGER hwm_never_lower BEFORE UPDATE OR DELETE ON fence.hwm FOR EACH ROW EXECUTE FUNCTION fence.refuse_lowering();
	ALTER TABLE fence.hwm ENABLE ALWAYS TRIGGER hwm_never_lower;
	DELETE FROM fence.schema_version WHERE version = 8`

// dropVersion7 takes migration 7's schema_version row out (the routines
// keep their version 7 bodies: the upgrade replaces them).
const dropVersion7 = dropVersion8 + `; DELETE FROM fence.schema_version WHERE version = 7`

// dropVersion6 takes migration 6's table out, with its schema_version row
// (fence.check keeps its version 6 body: the upgrade replaces it).
const dropVersion6 = dropVersion7 + `; DROP TABLE fence.token_ceiling; DELETE FROM fence.schema_version WHERE version = 6`

// dropVersion5 takes the objects of migration 5 and later out, with their
// schema_version rows.
const dropVersion5 = dropVersion6 + `; DROP FUNCTION fence.ddl_named(text, text), fence.ddl_start();
	DELETE FROM fence.schema_version WHERE version = 5`

// dropVersion3 takes the objects of migration 3 and later out, with their
// schema_version rows (fence_client stays: roles belong to the cluster).
const dropVersion3 = dropVersion5 + `; DROP TABLE fence.protected; DROP FUNCTION fence.passed(text), fence.guard(), fence.refresh(),
	fence.sync(boolean), fence.ddl_relations(oid, oid), fence.ddl_require(oid[], text), fence.ddl_guard(), fence.drop_guard();
	DELETE FROM fence.schema_version WHERE version IN (3, 4)`
