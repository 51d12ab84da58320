package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
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

// TestTokenSources sends a stale token through every source and checks each
// is refused, after a higher mark was set.
func TestTokenSources(t *testing.T) {
	e := newFencedEnv(t, nil)
	setup := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, setup, "/* fencing_token=100 resource=acct/1 */ SELECT 1")
	if m := e.mark(t, "acct/1"); m != 100 {
		t.Fatalf("a read with a comment token did not advance the mark: %d", m)
	}
	update := "UPDATE accounts SET balance = balance + $1 WHERE id = 1"
	cases := []struct {
		name    string
		options string
		pre     []string
		stmt    string
	}{
		{name: "comment", stmt: "/* fencing_token=99 resource=acct/1 */ " + update},
		{name: "comment comma separated", stmt: update + " /* fencing_token=99,resource=acct/1 */"},
		{name: "sqlcommenter", stmt: update + " /*fencing_token='99',resource='acct%2F1'*/"},
		{name: "SET", pre: []string{"SET lock.fencing_token = 99", "SET lock.resource = 'acct/1'"}, stmt: update},
		{name: "set_config", pre: []string{"SELECT set_config('lock.fencing_token', '99', false), set_config('lock.resource', 'acct/1', false)"}, stmt: update},
		{name: "startup options", options: "-c lock.fencing_token=99 -c lock.resource=acct/1", stmt: update},
		{name: "default resource from comment token only", pre: []string{"SET lock.resource = 'acct/1'"}, stmt: "/* fencing_token=99 */ " + update},
	}
	for _, tc := range cases {
		for mname, mode := range modes {
			t.Run(tc.name+"/"+mname, func(t *testing.T) {
				cfg, _ := pgx.ParseConfig(e.viaProxy())
				cfg.DefaultQueryExecMode = mode
				if tc.options != "" {
					cfg.RuntimeParams["options"] = tc.options
				}
				c, err := pgx.ConnectConfig(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close(context.Background())
				for _, p := range tc.pre {
					mustExec(t, c, p)
				}
				before := e.balance(t)
				_, err = c.Exec(t.Context(), tc.stmt, 1)
				wantCode(t, err, "55Z01")
				if after := e.balance(t); after != before {
					t.Errorf("the refused statement ran: balance %d → %d", before, after)
				}
			})
		}
	}
}

func TestSettingSemantics(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "SET lock.resource = 'acct/1'")
	mustExec(t, c, "SET lock.fencing_token = 10")
	mustExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	// RESET: no token any more, so the statement is unfenced and the mark stays.
	mustExec(t, c, "RESET lock.fencing_token")
	mustExec(t, c, "UPDATE accounts SET balance = 2 WHERE id = 1")
	if m := e.mark(t, "acct/1"); m != 10 {
		t.Fatalf("mark %d after RESET, want 10", m)
	}
	// A SET undone by ROLLBACK leaves no token behind.
	mustExec(t, c, "BEGIN")
	mustExec(t, c, "SET lock.fencing_token = 20")
	mustExec(t, c, "ROLLBACK")
	mustExec(t, c, "UPDATE accounts SET balance = 3 WHERE id = 1")
	if m := e.mark(t, "acct/1"); m != 10 {
		t.Fatalf("mark %d after a rolled-back SET, want 10", m)
	}
	// SET LOCAL lasts one transaction.
	mustExec(t, c, "BEGIN")
	mustExec(t, c, "SET LOCAL lock.fencing_token = 30")
	mustExec(t, c, "UPDATE accounts SET balance = 4 WHERE id = 1")
	mustExec(t, c, "COMMIT")
	if m := e.mark(t, "acct/1"); m != 30 {
		t.Fatalf("mark %d after SET LOCAL 30, want 30", m)
	}
	mustExec(t, c, "SET lock.fencing_token = 5") // stale now
	_, err := c.Exec(t.Context(), "UPDATE accounts SET balance = 5 WHERE id = 1")
	wantCode(t, err, "55Z01")
	// DISCARD ALL drops the token.
	mustExec(t, c, "DISCARD ALL")
	mustExec(t, c, "UPDATE accounts SET balance = 6 WHERE id = 1")
	if got := e.balance(t); got != 6 {
		t.Fatalf("balance %d after DISCARD ALL, want 6", got)
	}
}

func TestRolledBackWorkNeverAdvances(t *testing.T) {
	e := newFencedEnv(t, nil)
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			c := connect(t, e.viaProxy(), mode)
			tx, err := c.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(t.Context(), "/* fencing_token=500 resource=rb */ UPDATE accounts SET balance = $1 WHERE id = 1", 77); err != nil {
				t.Fatal(err)
			}
			tx.Rollback(t.Context())
			if m := e.mark(t, "rb"); m != 0 {
				t.Errorf("mark %d after rollback, want none", m)
			}
		})
	}
}

// TestSavepointRollbackChecksAgain: a ROLLBACK TO SAVEPOINT undoes the
// advance made after the savepoint, so the next statement must check again.
func TestSavepointRollbackChecksAgain(t *testing.T) {
	e := newFencedEnv(t, nil)
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			c := connect(t, e.viaProxy(), mode)
			res := "sp/" + name
			mustExec(t, c, "SET lock.resource = '"+res+"'")
			mustExec(t, c, "BEGIN")
			mustExec(t, c, "SAVEPOINT s1")
			mustExec(t, c, "SET lock.fencing_token = 50")
			mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 0)
			mustExec(t, c, "ROLLBACK TO SAVEPOINT s1")
			// SET inside the savepoint was undone too; set it again.
			mustExec(t, c, "SET lock.fencing_token = 50")
			mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
			mustExec(t, c, "COMMIT")
			if m := e.mark(t, res); m != 50 {
				t.Fatalf("mark %d, want 50: the write after ROLLBACK TO ran unchecked", m)
			}
		})
	}
}

func TestPipelines(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeCacheStatement)
	batch := &pgx.Batch{}
	for i := 1; i <= 20; i++ {
		batch.Queue(fmt.Sprintf("/* fencing_token=%d resource=pipe */ INSERT INTO log (resource, token) VALUES ('pipe', %d)", i, i))
	}
	if err := c.SendBatch(t.Context(), batch).Close(); err != nil {
		t.Fatal(err)
	}
	if m := e.mark(t, "pipe"); m != 20 {
		t.Fatalf("mark %d after a batch up to 20, want 20", m)
	}
	// A batch whose middle statement is stale: the batch is one implicit
	// transaction, so nothing of it stays.
	batch = &pgx.Batch{}
	batch.Queue("/* fencing_token=21 resource=pipe */ INSERT INTO log (resource, token) VALUES ('pipe', 21)")
	batch.Queue("/* fencing_token=3 resource=pipe */ INSERT INTO log (resource, token) VALUES ('pipe', 3)")
	batch.Queue("/* fencing_token=22 resource=pipe */ INSERT INTO log (resource, token) VALUES ('pipe', 22)")
	err := c.SendBatch(t.Context(), batch).Close()
	wantCode(t, err, "55Z01")
	var n int
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM log WHERE resource = 'pipe'").Scan(&n); err != nil || n != 20 {
		t.Fatalf("log has %d rows (%v), want 20", n, err)
	}
	if m := e.mark(t, "pipe"); m != 20 {
		t.Fatalf("mark %d, want 20 (the failed batch rolled back)", m)
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

func TestCopyFromFenced(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, c, "SET lock.resource = 'copy'")
	mustExec(t, c, "SET lock.fencing_token = 9")
	n, err := c.CopyFrom(t.Context(), pgx.Identifier{"invoices"}, []string{"amount"}, pgx.CopyFromRows([][]any{{1}, {2}, {3}}))
	if err != nil || n != 3 {
		t.Fatalf("CopyFrom = %d, %v", n, err)
	}
	if m := e.mark(t, "copy"); m != 9 {
		t.Fatalf("mark %d, want 9", m)
	}
	mustExec(t, c, "SET lock.fencing_token = 8")
	_, err = c.CopyFrom(t.Context(), pgx.Identifier{"invoices"}, []string{"amount"}, pgx.CopyFromRows([][]any{{4}}))
	wantCode(t, err, "55Z01")
	var count int
	direct := connect(t, e.direct(), pgx.QueryExecModeExec)
	if err := direct.QueryRow(t.Context(), "SELECT count(*) FROM invoices").Scan(&count); err != nil || count != 3 {
		t.Fatalf("invoices has %d rows (%v), want 3", count, err)
	}
}

func TestMalformedTokens(t *testing.T) {
	e := newFencedEnv(t, nil)
	for _, tok := range []string{"abc", "0", "-1", "9223372036854775808", "1.5"} {
		for name, mode := range modes {
			t.Run(tok+"/"+name, func(t *testing.T) {
				c := connect(t, e.viaProxy(), mode)
				_, err := c.Exec(t.Context(), "/* fencing_token="+tok+" resource=acct/1 */ UPDATE accounts SET balance = $1 WHERE id = 1", -1)
				wantCode(t, err, "22023")
				mustExec(t, c, "SET lock.resource = 'acct/1'")
				mustExec(t, c, "SET lock.fencing_token = '"+tok+"'")
				_, err = c.Exec(t.Context(), "UPDATE accounts SET balance = $1 WHERE id = 1", -1)
				wantCode(t, err, "22023")
				if b := e.balance(t); b == -1 {
					t.Fatal("a statement with a malformed token ran")
				}
			})
		}
	}
	c := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	_, err := c.Exec(t.Context(), "/* fencing_token=5 */ UPDATE accounts SET balance = -1 WHERE id = 1")
	pgErr := wantCode(t, err, "22023")
	if !strings.Contains(pgErr.Message, "has no resource") {
		t.Errorf("token without resource: %q", pgErr.Message)
	}
}

func TestLegacyGuard(t *testing.T) {
	e := newFencedEnv(t, &gate.Config{Tables: map[gate.TableRef]gate.Protection{
		{Schema: "public", Name: "invoices"}: {Resource: "billing", RequireToken: true},
	}})
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			c := connect(t, e.viaProxy(), mode)
			for _, stmt := range []string{
				"INSERT INTO invoices (amount) VALUES ($1)",
				"UPDATE invoices SET amount = $1",
				"DELETE FROM invoices WHERE amount <> $1",
				"WITH x AS (INSERT INTO invoices (amount) VALUES ($1) RETURNING id) SELECT count(*) FROM x",
			} {
				_, err := c.Exec(t.Context(), stmt, 1)
				wantCode(t, err, "55Z02")
			}
			for _, stmt := range []string{
				"TRUNCATE invoices",
				"ALTER TABLE invoices ADD COLUMN note text",
				"MERGE INTO invoices i USING (VALUES (1)) v(x) ON i.id = v.x WHEN NOT MATCHED THEN INSERT (amount) VALUES (1)",
				"SELECT 1 AS amount INTO public.invoices",
				"DROP TABLE invoices",
			} {
				_, err := c.Exec(t.Context(), stmt)
				wantCode(t, err, "55Z02")
			}
			var n int
			if err := c.QueryRow(t.Context(), "SELECT count(*) FROM invoices").Scan(&n); err != nil {
				t.Fatalf("a read of a protected table was refused: %v", err)
			}
			mustExec(t, c, "/* fencing_token=3 */ INSERT INTO invoices (amount) VALUES ($1)", 1)
			if m := e.mark(t, "billing"); m < 3 {
				t.Fatalf("mark for billing %d, want ≥ 3", m)
			}
		})
	}
	// COPY FROM through psql's \copy is a write too.
	out, err := e.psql(t, "\\copy invoices (amount) FROM STDIN\n5\n\\.\n")
	if err == nil || !strings.Contains(out, "55Z02") && !strings.Contains(out, "fencing token required") {
		t.Fatalf("\\copy into a protected table without a token: %v\n%s", err, out)
	}
}

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

func TestNoTxnBlockStatementWithTokenRefused(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	_, err := c.Exec(t.Context(), "/* fencing_token=5 resource=r */ VACUUM accounts")
	pgErr := wantCode(t, err, "0A000")
	if !strings.Contains(pgErr.Message, "VACUUM") {
		t.Errorf("message %q does not name the statement", pgErr.Message)
	}
	mustExec(t, c, "VACUUM accounts") // without a token it runs

	// A token in the session's setting refuses it too, through a pre-check
	// of its own (VACUUM cannot share a transaction with the check).
	mustExec(t, c, "SET lock.fencing_token = 5")
	_, err = c.Exec(t.Context(), "VACUUM accounts")
	pgErr = wantCode(t, err, "0A000")
	if !strings.Contains(pgErr.Message, "VACUUM") || pgErr.Where != "" {
		t.Errorf("refusal %q (where %q)", pgErr.Message, pgErr.Where)
	}
	if err := c.Ping(t.Context()); err != nil {
		t.Fatalf("connection unusable after the refusal: %v", err)
	}
	// Once the setting is empty again, VACUUM runs (the session still
	// counts as one that may carry a token, so the pre-check runs and passes).
	mustExec(t, c, "RESET lock.fencing_token")
	mustExec(t, c, "VACUUM accounts")
	mustExec(t, c, "CREATE INDEX CONCURRENTLY accounts_balance ON accounts (balance)")
	// And ordinary statements still work and are fenced as before.
	mustExec(t, c, "SET lock.fencing_token = 6")
	mustExec(t, c, "SET lock.resource = 'vac'")
	mustExec(t, c, "UPDATE accounts SET balance = balance WHERE id = 1")
	if m := e.mark(t, "vac"); m != 6 {
		t.Fatalf("mark %d, want 6", m)
	}
	// psql, which waits for each reply, sees the same.
	out, _ := e.psql(t, "SET lock.resource = 'vac';\nSET lock.fencing_token = 7;\nVACUUM accounts;\nSELECT 'still here';\n", "-v", "ON_ERROR_STOP=0")
	if !strings.Contains(out, "cannot run inside a transaction block") || !strings.Contains(out, "still here") {
		t.Errorf("psql output:\n%s", out)
	}
}

// TestTokenChangedMidTransaction: a transaction that switches to another
// token is checked again, under the new one.
func TestTokenChangedMidTransaction(t *testing.T) {
	e := newFencedEnv(t, nil)
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			c := connect(t, e.viaProxy(), mode)
			res := "mid/" + name
			mustExec(t, c, "SET lock.resource = '"+res+"'")
			mustExec(t, c, "BEGIN")
			mustExec(t, c, "SET LOCAL lock.fencing_token = 5")
			mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 0)
			mustExec(t, c, "SET LOCAL lock.fencing_token = 3")
			_, err := c.Exec(t.Context(), "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 0)
			wantCode(t, err, "55Z01")
			mustExec(t, c, "ROLLBACK")
			// A switch of resource is checked under the new resource.
			mustExec(t, c, "BEGIN")
			mustExec(t, c, "SET LOCAL lock.fencing_token = 8")
			mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 0)
			mustExec(t, c, "SET LOCAL lock.resource = '"+res+"/b'")
			mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 0)
			mustExec(t, c, "COMMIT")
			if m1, m2 := e.mark(t, res), e.mark(t, res+"/b"); m1 != 8 || m2 != 8 {
				t.Fatalf("marks %d and %d, want 8 and 8", m1, m2)
			}
		})
	}
}

// TestPreparedStatementAcrossTransactions: a statement prepared once and
// executed in many transactions is checked in each.
func TestPreparedStatementAcrossTransactions(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeCacheStatement)
	mustExec(t, c, "SET lock.resource = 'prep'")
	for _, tok := range []int{1, 2, 3} {
		mustExec(t, c, fmt.Sprintf("SET lock.fencing_token = %d", tok))
		mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
		if m := e.mark(t, "prep"); m != int64(tok) {
			t.Fatalf("mark %d after token %d", m, tok)
		}
	}
	mustExec(t, c, "SET lock.fencing_token = 2")
	_, err := c.Exec(t.Context(), "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
	wantCode(t, err, "55Z01")
}

func harnessExec(t testing.TB, dsn string, stmts ...string) {
	t.Helper()
	if err := harness.Exec(context.Background(), dsn, stmts...); err != nil {
		t.Fatal(err)
	}
}

// TestDeallocateAllKeepsFencing: DEALLOCATE ALL drops the proxy's prepared
// check statement too; fencing goes on (the check is prepared again).
func TestDeallocateAllKeepsFencing(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, c, "SET lock.resource = 'dealloc'")
	mustExec(t, c, "SET lock.fencing_token = 3")
	mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
	mustExec(t, c, "BEGIN")
	mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
	mustExec(t, c, "DEALLOCATE ALL")
	mustExec(t, c, "COMMIT")
	mustExec(t, c, "SET lock.fencing_token = 4")
	mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
	if m := e.mark(t, "dealloc"); m != 4 {
		t.Fatalf("mark %d after DEALLOCATE ALL, want 4", m)
	}
	mustExec(t, c, "SET lock.fencing_token = 2")
	_, err := c.Exec(t.Context(), "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
	wantCode(t, err, "55Z01")
}
