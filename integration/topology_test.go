package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
)

// topology is one deployment of the proxy beside PgBouncer, set up on a
// fresh PostgreSQL with the fence store and the accounts table of
// newFencedEnv: clients connect to app, and direct reaches PostgreSQL.
type topology struct {
	app, direct string
	// pooler is PgBouncer's own address where it lends server connections
	// that clients share (a transaction-mode pooler), "" otherwise.
	pooler string
	db     string
}

// topologyKinds are the deployments the README names, each with the token
// scope that is safe in it.
var topologyKinds = []struct {
	name     string
	place    string // "behind": proxy → PgBouncer → PostgreSQL; "front": PgBouncer → proxy → PostgreSQL; "" no PgBouncer
	poolMode string
	scope    string
}{
	{"proxy to PostgreSQL", "", "", "session"},
	{"proxy to PgBouncer in session mode", "behind", "session", "session"},
	{"PgBouncer in session mode to proxy", "front", "session", "session"},
	{"proxy to PgBouncer in transaction mode", "behind", "transaction", "transaction"},
	{"PgBouncer in transaction mode to proxy", "front", "transaction", "transaction"},
}

// newTopology starts PostgreSQL, the proxy with the given token scope and,
// where place says, PgBouncer in poolMode with one server connection per
// pool, so that every client of a transaction-mode pool shares it.
func newTopology(t *testing.T, place, poolMode, scope string) *topology {
	t.Helper()
	poolSize := 4 // session mode: one server connection per client
	if poolMode == "transaction" {
		poolSize = 1
	}
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	top := &topology{db: db, direct: pg.DSN(pgcluster.Superuser, db)}
	harness.Migrate(t, top.direct)
	if err := harness.Exec(context.Background(), top.direct,
		"CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)",
		"INSERT INTO accounts VALUES (1, 0)",
	); err != nil {
		t.Fatal(err)
	}
	fencing := &gate.Config{Analyzer: gate.NewAnalyzer(1024), TransactionTokens: scope == "transaction"}
	dsn := func(addr string) string {
		return "postgres://" + pgcluster.Superuser + "@" + addr + "/" + db + "?sslmode=disable"
	}
	switch place {
	case "":
		top.app = harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Fencing: fencing}).DSN(pgcluster.Superuser, "", db)
	case "behind":
		b := harness.StartPgBouncerWith(t, harness.PgBouncerConfig{Upstream: pg.Addr(), PoolMode: poolMode, PoolSize: poolSize})
		top.app = harness.StartProxy(t, pgwire.Config{Upstream: b.Addr(), Fencing: fencing}).DSN(pgcluster.Superuser, "", db)
		if poolMode == "transaction" {
			top.pooler = dsn(b.Addr())
		}
	case "front":
		p := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Fencing: fencing})
		b := harness.StartPgBouncerWith(t, harness.PgBouncerConfig{Upstream: p.Addr, PoolMode: poolMode, PoolSize: poolSize})
		top.app = dsn(b.Addr())
	}
	return top
}

func (top *topology) balance(t *testing.T) int {
	t.Helper()
	var b int
	if err := connect(t, top.direct, pgx.QueryExecModeExec).QueryRow(t.Context(), "SELECT balance FROM accounts WHERE id = 1").Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// topologyModes are the protocol modes a transaction-mode pooler serves:
// PgBouncer 1.18 keeps no named prepared statement across transactions.
var topologyModes = map[string]pgx.QueryExecMode{
	"simple":   pgx.QueryExecModeSimpleProtocol,
	"extended": pgx.QueryExecModeExec,
}

// TestTopologiesRefuseTheStaleHolder: in every deployment the README lists,
// with the token scope it names, old holder B (token 41) cannot write once
// new holder A (token 42) has written, whichever token form each uses that
// the topology supports: the setting for the session where the proxy owns
// its server connection, SET LOCAL and a comment everywhere. B's refused
// write leaves A's value in the table.
func TestTopologiesRefuseTheStaleHolder(t *testing.T) {
	for _, k := range topologyKinds {
		t.Run(k.name, func(t *testing.T) {
			top := newTopology(t, k.place, k.poolMode, k.scope)
			for mode, qm := range topologyModes {
				forms := []string{"set local", "comment"}
				if k.scope == "session" {
					forms = append(forms, "session")
				}
				for _, form := range forms {
					t.Run(mode+"/"+form, func(t *testing.T) {
						res := fmt.Sprintf("acct/%s/%s", mode, form)
						a := connect(t, top.app, qm)
						b := connect(t, top.app, qm)
						write := func(c *pgx.Conn, token, value int) error {
							return fencedWrite(t, c, form, res, token, value)
						}
						if err := write(a, 42, 42); err != nil {
							t.Fatalf("new holder A: %v", err)
						}
						wantCode(t, write(b, 41, 41), "55Z01")
						if got := top.balance(t); got != 42 {
							t.Fatalf("balance %d after the stale holder's write, want A's 42", got)
						}
					})
				}
			}
		})
	}
}

// fencedWrite sets the balance to value in one transaction carrying token
// for resource in the given form: "session" (SET for the session first),
// "set local", "set_config" (set_config(…, true) with the values as
// parameters, which pgx binds in the extended protocol) or "comment".
func fencedWrite(t *testing.T, c *pgx.Conn, form, resource string, token, value int) error {
	t.Helper()
	ctx := t.Context()
	update := fmt.Sprintf("UPDATE accounts SET balance = %d WHERE id = 1", value)
	switch form {
	case "session":
		for _, q := range []string{"SET lock.resource = '" + resource + "'", fmt.Sprintf("SET lock.fencing_token = %d", token)} {
			if _, err := c.Exec(ctx, q); err != nil {
				return err
			}
		}
		_, err := c.Exec(ctx, update)
		return err
	case "comment":
		_, err := c.Exec(ctx, fmt.Sprintf("/* fencing_token=%d resource=%s */ %s", token, resource, update))
		return err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if form == "set_config" {
		const set = "SELECT set_config('lock.resource', $1, true), set_config('lock.fencing_token', $2, true)"
		if _, err := tx.Exec(ctx, set, resource, strconv.Itoa(token)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, update); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	for _, q := range []string{
		"SET LOCAL lock.resource = '" + resource + "'",
		fmt.Sprintf("SET LOCAL lock.fencing_token = %d", token),
		update,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// TestSessionTokenBehindTransactionPoolerIsRefused: with a transaction-mode
// pooler beside the proxy, a value set for the session stays on a server
// connection that the next client gets. Under token_scope: transaction
// every way of setting the token or resource for the session is refused
// (55Z05) with a hint naming SET LOCAL and the comment; under the default
// scope the same deployment lets the old holder's write land, which is why
// the scope exists.
func TestSessionTokenBehindTransactionPoolerIsRefused(t *testing.T) {
	for _, place := range []string{"behind", "front"} {
		t.Run(place, func(t *testing.T) {
			top := newTopology(t, place, "transaction", "transaction")
			for mode, qm := range topologyModes {
				c := connect(t, top.app, qm)
				for _, q := range []string{
					"SET lock.fencing_token = 41",
					"SET SESSION lock.resource = 'acct/1'",
					"SELECT set_config('lock.fencing_token', '41', false)",
					"SELECT pg_catalog.set_config('lock.resource', 'acct/1', false)",
					"SELECT set_config('lock.fencing_token', '41', 'off')",
				} {
					_, err := c.Exec(t.Context(), q)
					if e := wantCode(t, err, "55Z05"); !strings.Contains(e.Hint, "SET LOCAL") {
						t.Errorf("%s %s: hint %q names no fix", mode, q, e.Hint)
					}
				}
				// What is set for the transaction only still works, and so
				// does setting back to the default.
				mustExec(t, c, "RESET lock.fencing_token")
				mustExec(t, c, "BEGIN")
				mustExec(t, c, "SELECT set_config('lock.fencing_token', '7', true), set_config('lock.resource', 'acct/"+mode+"', true)")
				mustExec(t, c, "UPDATE accounts SET balance = 7 WHERE id = 1")
				mustExec(t, c, "COMMIT")
			}
			// is_local sent as a parameter: the proxy cannot know it is
			// true, so it counts as set for the session.
			_, err := connect(t, top.app, pgx.QueryExecModeExec).Exec(t.Context(), "SELECT set_config('lock.fencing_token', '41', $1)", true)
			wantCode(t, err, "55Z05")
			if place == "behind" {
				// A startup option reaches the proxy; in front, PgBouncer
				// drops it (ignore_startup_parameters) before the proxy sees it.
				cfg, err := pgx.ParseConfig(top.app)
				if err != nil {
					t.Fatal(err)
				}
				cfg.RuntimeParams["options"] = "-c lock.fencing_token=41"
				_, err = pgx.ConnectConfig(t.Context(), cfg)
				if e := wantCode(t, err, "55Z05"); !strings.Contains(e.Hint, "SET LOCAL") {
					t.Errorf("startup refusal: hint %q names no fix", e.Hint)
				}
			}
		})
	}
	t.Run("session scope lets the stale write land", func(t *testing.T) {
		top := newTopology(t, "behind", "transaction", "session")
		a := connect(t, top.app, pgx.QueryExecModeSimpleProtocol)
		b := connect(t, top.app, pgx.QueryExecModeSimpleProtocol)
		mustExec(t, b, "SET lock.resource = 'acct/1'")
		mustExec(t, b, "SET lock.fencing_token = 41")
		mustExec(t, a, "SET lock.resource = 'acct/1'")
		mustExec(t, a, "SET lock.fencing_token = 42")
		mustExec(t, a, "UPDATE accounts SET balance = 42 WHERE id = 1")
		// B's own token is 41, but the one server connection carries A's 42.
		mustExec(t, b, "UPDATE accounts SET balance = 41 WHERE id = 1")
		if got := top.balance(t); got != 41 {
			t.Fatalf("balance %d: the hazard token_scope: transaction guards against did not show", got)
		}
	})
}

// TestTokenLeftOnPooledConnectionIsNeverRead: a client that reaches the
// transaction pooler without the proxy leaves lock.fencing_token and
// lock.resource set for the session on the one server connection. Under
// token_scope: transaction no check through the proxy reads them: a write
// that would have to (its comment names no resource, or it sets only the
// token with SET LOCAL) is refused (55Z05), and one whose transaction sets
// both itself is checked with its own. Once the settings are reset, the
// same writes pass.
func TestTokenLeftOnPooledConnectionIsNeverRead(t *testing.T) {
	top := newTopology(t, "behind", "transaction", "transaction")
	other := connect(t, top.pooler, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, other, "SET lock.fencing_token = 99")
	mustExec(t, other, "SET lock.resource = 'acct/1'")
	for mode, qm := range topologyModes {
		c := connect(t, top.app, qm)
		_, err := c.Exec(t.Context(), "/* fencing_token=5 */ UPDATE accounts SET balance = 5 WHERE id = 1")
		wantCode(t, err, "55Z05")
		tx, err := c.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(t.Context(), "SET LOCAL lock.fencing_token = 5"); err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(t.Context(), "UPDATE accounts SET balance = 5 WHERE id = 1")
		wantCode(t, err, "55Z05")
		tx.Rollback(t.Context())
		// Its own token and resource, both set in the transaction: checked
		// against its own resource's mark, not the 99 left behind.
		if err := fencedWrite(t, c, "set local", "own/"+mode, 5, 5); err != nil {
			t.Fatalf("%s: own token and resource: %v", mode, err)
		}
	}
	if m := harness.Mark(t, top.direct, "acct/1"); m != 0 {
		t.Fatalf("mark of acct/1 is %d: a check read the token left on the connection", m)
	}
	mustExec(t, other, "RESET ALL")
	c := connect(t, top.app, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "/* fencing_token=5 resource=acct/1 */ UPDATE accounts SET balance = 5 WHERE id = 1")
}

// TestDefaultTokenIsNeverReadThroughLookalikeSettings: behind a
// transaction-mode pooler, with a database default for lock.fencing_token
// and lock.resource (99 for acct/1) on every server connection, a
// transaction whose own settings the server does not apply to the real ones
// never gets a check that reads the default: a name with a Kelvin sign or a
// long s (another setting for PostgreSQL), a set_config that LIMIT 0 never
// evaluates, a NULL value (a reset to the default), another schema's
// set_config. Nor does the second check of a statement recalled after code
// the proxy could not see. Each is refused (55Z05) and the mark of acct/1
// stays untouched.
func TestDefaultTokenIsNeverReadThroughLookalikeSettings(t *testing.T) {
	top := newTopology(t, "behind", "transaction", "transaction")
	if err := harness.Exec(t.Context(), top.direct,
		"ALTER DATABASE "+pgx.Identifier{top.db}.Sanitize()+" SET lock.fencing_token = '99'",
		"ALTER DATABASE "+pgx.Identifier{top.db}.Sanitize()+" SET lock.resource = 'acct/1'",
		"CREATE SCHEMA app",
		"CREATE FUNCTION app.set_config(text, text, boolean) RETURNS text LANGUAGE sql AS 'SELECT $2'",
	); err != nil {
		t.Fatal(err)
	}
	sets := map[string][]string{
		"Kelvin sign": {`SET LOCAL "loc` + "\u212A" + `.fencing_token" = 5`, "SET LOCAL lock.resource = 'own'"},
		"long s":      {"SET LOCAL lock.fencing_token = 5", "SELECT set_config('lock.re\u017Fource', 'own', true)"},
		"LIMIT 0":     {"SELECT set_config('lock.fencing_token', '5', true), set_config('lock.resource', 'own', true) LIMIT 0"},
		"NULL value":  {"SET LOCAL lock.fencing_token = 5", "SELECT set_config('lock.resource', NULL, true)"},
		"app schema":  {"SELECT app.set_config('lock.fencing_token', '5', true), app.set_config('lock.resource', 'own', true)"},
	}
	for mode, qm := range topologyModes {
		c := connect(t, top.app, qm)
		for name, stmts := range sets {
			tx, err := c.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range append(stmts, "UPDATE accounts SET balance = 5 WHERE id = 1") {
				if _, err = tx.Exec(t.Context(), q); err != nil {
					break
				}
			}
			if e := wantCode(t, err, "55Z05"); e == nil {
				t.Errorf("%s %s: not refused", mode, name)
			}
			tx.Rollback(t.Context())
		}
	}
	c := connect(t, top.app, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "PREPARE p AS /* fencing_token=5 resource=own */ UPDATE accounts SET balance = 5 WHERE id = 1")
	// Code the proxy cannot see (checked with its own comment's token).
	mustExec(t, c, "/* fencing_token=5 resource=own */ DO $$BEGIN END$$")
	_, err := c.Exec(t.Context(), "EXECUTE p")
	wantCode(t, err, "55Z05")
	if m := harness.Mark(t, top.direct, "acct/1"); m != 0 {
		t.Fatalf("mark of acct/1 is %d: a check read the database default", m)
	}
	if got := top.balance(t); got != 0 {
		t.Fatalf("balance %d, want 0: a write landed", got)
	}
}

// TestSavepointRollbackKeepsTheTransactionsToken: behind a transaction
// pooler, with a database default for the settings on the server
// connection, a transaction that set its own token and resource keeps them
// across a failed savepoint block (Django's atomic, SQLAlchemy's
// begin_nested): PostgreSQL restores them at ROLLBACK TO, and the proxy
// checks its write with them, not the default. What was set after the
// savepoint is undone, and the write after it is refused (55Z05).
func TestSavepointRollbackKeepsTheTransactionsToken(t *testing.T) {
	top := newTopology(t, "behind", "transaction", "transaction")
	if err := harness.Exec(t.Context(), top.direct,
		"ALTER DATABASE "+pgx.Identifier{top.db}.Sanitize()+" SET lock.fencing_token = '99'",
		"ALTER DATABASE "+pgx.Identifier{top.db}.Sanitize()+" SET lock.resource = 'acct/1'",
	); err != nil {
		t.Fatal(err)
	}
	for mode, qm := range topologyModes {
		c := connect(t, top.app, qm)
		own := "own/" + mode
		mustExec(t, c, "BEGIN")
		mustExec(t, c, "SET LOCAL lock.fencing_token = 5")
		mustExec(t, c, "SET LOCAL lock.resource = '"+own+"'")
		mustExec(t, c, "UPDATE accounts SET balance = 5 WHERE id = 1")
		mustExec(t, c, `SAVEPOINT "s1_x1"`)
		_, err := c.Exec(t.Context(), "INSERT INTO accounts VALUES (1, 0)") // duplicate key
		wantCode(t, err, "23505")
		mustExec(t, c, `ROLLBACK TO SAVEPOINT "s1_x1"`)
		mustExec(t, c, `RELEASE SAVEPOINT "s1_x1"`)
		mustExec(t, c, "SAVEPOINT b")
		mustExec(t, c, "RESET lock.resource")
		mustExec(t, c, "ROLLBACK TO b")
		mustExec(t, c, "UPDATE accounts SET balance = 6 WHERE id = 1")
		// Set after the savepoint, undone by the rollback: the default is back.
		mustExec(t, c, "RESET lock.resource")
		mustExec(t, c, "SAVEPOINT c")
		mustExec(t, c, "SET LOCAL lock.resource = '"+own+"'")
		mustExec(t, c, "ROLLBACK TO c")
		_, err = c.Exec(t.Context(), "UPDATE accounts SET balance = 7 WHERE id = 1")
		wantCode(t, err, "55Z05")
		mustExec(t, c, "ROLLBACK")
		if m := harness.Mark(t, top.direct, "acct/1"); m != 0 {
			t.Fatalf("%s: mark of acct/1 is %d: a check read the database default", mode, m)
		}
	}
}
