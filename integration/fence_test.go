package integration

import (
	"context"
	"errors"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// newFencedEnv is a database with the fence store installed, a table
// accounts(id, balance) with one row, and a proxy with the given policy.
func newFencedEnv(t testing.TB, fencing *gate.Config) *env {
	t.Helper()
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	if fencing == nil {
		fencing = &gate.Config{}
	}
	fencing.Analyzer = gate.NewAnalyzer(1024)
	e := &env{pg: pg, db: db, proxy: harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Fencing: fencing})}
	harness.Migrate(t, e.direct())
	if err := harness.Exec(context.Background(), e.direct(),
		"CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)",
		"INSERT INTO accounts VALUES (1, 0)",
		"CREATE TABLE invoices (id serial PRIMARY KEY, amount int)",
		"CREATE TABLE log (id bigserial PRIMARY KEY, resource text, token bigint, client int)",
	); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) mark(t testing.TB, resource string) int64 {
	return harness.Mark(t, e.direct(), resource)
}

func (e *env) balance(t testing.TB) int {
	t.Helper()
	conn := connect(t, e.direct(), pgx.QueryExecModeExec)
	var b int
	if err := conn.QueryRow(context.Background(), "SELECT balance FROM accounts WHERE id = 1").Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// count returns the first column of the first row of sql, an integer,
// straight from the server.
func (e *env) count(t testing.TB, sql string) int {
	t.Helper()
	conn := connect(t, e.direct(), pgx.QueryExecModeExec)
	var n int
	if err := conn.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantCode fails unless err is a PostgreSQL error with code.
func wantCode(t testing.TB, err error, code string) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != code {
		t.Fatalf("got error %v, want SQLSTATE %s", err, code)
	}
	return pgErr
}

var modes = map[string]pgx.QueryExecMode{
	"simple":   pgx.QueryExecModeSimpleProtocol,
	"extended": pgx.QueryExecModeExec,
	"prepared": pgx.QueryExecModeCacheStatement,
}

// TestPauseAndTakeover is the story fencing exists for: holder A (token 41)
// writes, pauses; B (token 42) takes over and only *reads*, which already
// moves the mark; A wakes and writes late: refused. B's update survives.
func TestPauseAndTakeover(t *testing.T) {
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			e := newFencedEnv(t, nil)
			a := connect(t, e.viaProxy(), mode)
			b := connect(t, e.viaProxy(), mode)
			mustExec(t, a, "SET lock.resource = 'acct/1'")
			mustExec(t, a, "SET lock.fencing_token = 41")
			mustExec(t, a, "UPDATE accounts SET balance = $1 WHERE id = 1", 100)

			mustExec(t, b, "SET lock.resource = 'acct/1'")
			mustExec(t, b, "SET lock.fencing_token = 42")
			var seen int
			if err := b.QueryRow(t.Context(), "SELECT balance FROM accounts WHERE id = 1").Scan(&seen); err != nil || seen != 100 {
				t.Fatalf("B read %d, %v", seen, err)
			}
			if m := e.mark(t, "acct/1"); m != 42 {
				t.Fatalf("mark after B's read = %d, want 42", m)
			}
			_, err := a.Exec(t.Context(), "UPDATE accounts SET balance = $1 WHERE id = 1", 50)
			pgErr := wantCode(t, err, "55Z01")
			if want := `stale fencing token 41 for resource "acct/1": high-water mark is 42`; pgErr.Message != want {
				t.Errorf("message %q, want %q", pgErr.Message, want)
			}
			if pgErr.Where != "" || pgErr.InternalQuery != "" {
				t.Errorf("error leaks the proxy's internals: where %q, internal query %q", pgErr.Where, pgErr.InternalQuery)
			}
			mustExec(t, b, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
			if got := e.balance(t); got != 101 {
				t.Errorf("balance = %d, want 101 (B's update on top of A's first write)", got)
			}
			// A's connection is still usable.
			if err := a.Ping(t.Context()); err != nil {
				t.Fatalf("A's connection unusable after the refusal: %v", err)
			}
		})
	}
}

func TestEqualTokenAcceptedTwice(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	for i := 0; i < 2; i++ {
		mustExec(t, c, "/* fencing_token=7 resource=acct/1 */ UPDATE accounts SET balance = balance + 1 WHERE id = 1")
	}
	if got, m := e.balance(t), e.mark(t, "acct/1"); got != 2 || m != 7 {
		t.Errorf("balance %d, mark %d; want 2, 7", got, m)
	}
}

func TestReadOnlyChecksWithoutAdvancing(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, c, "/* fencing_token=70 resource=ro */ SELECT 1")
	tx, err := c.BeginTx(t.Context(), pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(t.Context(), "/* fencing_token=60 resource=ro */ SELECT balance FROM accounts")
	wantCode(t, err, "55Z01")
	tx.Rollback(t.Context())
	tx, _ = c.BeginTx(t.Context(), pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if _, err := tx.Exec(t.Context(), "/* fencing_token=80 resource=ro */ SELECT balance FROM accounts"); err != nil {
		t.Fatal(err)
	}
	tx.Commit(t.Context())
	if m := e.mark(t, "ro"); m != 70 {
		t.Fatalf("mark %d after a read-only transaction with 80, want 70", m)
	}
}

func harnessExec(t testing.TB, dsn string, stmts ...string) {
	t.Helper()
	if err := harness.Exec(context.Background(), dsn, stmts...); err != nil {
		t.Fatal(err)
	}
}
