package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
)

// pooledEnv is a proxy in transaction pool mode over a fresh PostgreSQL
// with the fence store and newFencedEnv's tables: app reaches the proxy,
// direct PostgreSQL.
type pooledEnv struct {
	app, direct, db string
	proxy           *harness.Proxy
}

// newPooledEnv starts PostgreSQL and a proxy lending at most size server
// connections per (database, user), clients let in by trust.
func newPooledEnv(t *testing.T, size int, fencing *gate.Config) *pooledEnv {
	t.Helper()
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	e := &pooledEnv{db: db, direct: pg.DSN(pgcluster.Superuser, db)}
	harness.Migrate(t, e.direct)
	if err := harness.Exec(context.Background(), e.direct,
		"CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)",
		"INSERT INTO accounts VALUES (1, 0)",
	); err != nil {
		t.Fatal(err)
	}
	if fencing == nil {
		fencing = &gate.Config{}
	}
	fencing.Analyzer = gate.NewAnalyzer(1024)
	e.proxy = harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Fencing: fencing,
		Pool: &pgwire.PoolConfig{Size: size, AuthMethod: clientauth.Trust}})
	e.app = e.proxy.DSN(pgcluster.Superuser, "", db)
	return e
}

// backends counts the server connections of the proxy's pool: the
// backends of the test database other than the one asking.
func (e *pooledEnv) backends(t *testing.T) int {
	t.Helper()
	var n int
	err := connect(t, e.direct, pgx.QueryExecModeExec).QueryRow(t.Context(),
		"SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", e.db).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pooledModes are the protocol modes of pgx that transaction pool mode
// serves, named statements included.
var pooledModes = map[string]pgx.QueryExecMode{
	"simple":    pgx.QueryExecModeSimpleProtocol,
	"extended":  pgx.QueryExecModeExec,
	"described": pgx.QueryExecModeDescribeExec,
	"prepared":  pgx.QueryExecModeCacheStatement,
}

// TestPooledClientsShareServerConnections: many clients, each running
// transactions and autocommit statements in every protocol mode, are
// served by the one server connection the pool may open, and each sees
// its own results.
func TestPooledClientsShareServerConnections(t *testing.T) {
	e := newPooledEnv(t, 1, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		for name, mode := range pooledModes {
			c := connect(t, e.app, mode)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 20 {
					var got int
					if err := c.QueryRow(t.Context(), "SELECT $1::int + $2::int", i, j).Scan(&got); err != nil || got != i+j {
						errs <- fmt.Errorf("%s client %d: got %d, %v", name, i, got, err)
						return
					}
					tx, err := c.Begin(t.Context())
					if err == nil {
						_, err = tx.Exec(t.Context(), "SELECT pg_advisory_xact_lock(1)")
					}
					if err == nil {
						err = tx.Commit(t.Context())
					}
					if err != nil {
						errs <- fmt.Errorf("%s client %d: transaction: %v", name, i, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := e.backends(t); n != 1 {
		t.Errorf("%d server connections for 32 clients, want the pool's 1", n)
	}
}

// TestPooledReportedSettingsArePerClient: settings PostgreSQL reports
// (TimeZone, DateStyle, application_name, standard_conforming_strings)
// that one client changes for its session never reach another sharing the
// server connection, and each client keeps its own across transactions.
func TestPooledReportedSettingsArePerClient(t *testing.T) {
	e := newPooledEnv(t, 1, nil)
	a := connect(t, e.app, pgx.QueryExecModeExec) // pgx's simple protocol needs standard_conforming_strings on
	b := connect(t, e.app, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, a, "SET TimeZone = 'Asia/Tokyo'")
	mustExec(t, a, "SET DateStyle = 'SQL, DMY'")
	mustExec(t, a, "SET application_name = 'client a'")
	mustExec(t, a, "SET standard_conforming_strings = off")
	show := func(c *pgx.Conn, name string) string {
		t.Helper()
		var v string
		if err := c.QueryRow(t.Context(), "SELECT current_setting($1)", name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for range 3 {
		for name, want := range map[string][2]string{
			"TimeZone":                    {"Asia/Tokyo", "UTC"},
			"DateStyle":                   {"SQL, DMY", "ISO, MDY"},
			"application_name":            {"client a", ""},
			"standard_conforming_strings": {"off", "on"},
		} {
			if got := show(a, name); got != want[0] {
				t.Errorf("client a: %s is %q, want %q", name, got, want[0])
			}
			if got := show(b, name); got != want[1] && !(name == "TimeZone" && got != want[0]) {
				t.Errorf("client b: %s is %q, want its own %q", name, got, want[1])
			}
		}
	}
}

// TestPooledStaleHolderNeverLands: over one shared server connection,
// old holder B (token 41) and new holder A (token 42) interleave
// session-level SET and RESET, SET LOCAL, comments and startup options;
// B's writes are refused with 55Z01 once A has written, whichever form
// either uses, and A's value stays.
func TestPooledStaleHolderNeverLands(t *testing.T) {
	e := newPooledEnv(t, 1, nil)
	forms := []string{"session", "set local", "comment"}
	for mode, qm := range pooledModes {
		for _, fa := range forms {
			for _, fb := range forms {
				t.Run(mode+"/"+fa+"/"+fb, func(t *testing.T) {
					res := strings.ReplaceAll(fmt.Sprintf("acct/%s/%s/%s", mode, fa, fb), " ", "-") // a comment's resource has no spaces
					a := connect(t, e.app, qm)
					b := connect(t, e.app, qm)
					if fb == "session" {
						// B sets its session token first, then A writes.
						mustExec(t, b, "SET lock.resource = '"+res+"'")
						mustExec(t, b, "SET lock.fencing_token = 41")
					}
					if err := fencedWrite(t, a, fa, res, 42, 42); err != nil {
						t.Fatalf("new holder A: %v", err)
					}
					wantCode(t, fencedWrite(t, b, fb, res, 41, 41), "55Z01")
					if fb == "session" {
						// B's session token still counts for B alone.
						_, err := b.Exec(t.Context(), "UPDATE accounts SET balance = 41 WHERE id = 1")
						wantCode(t, err, "55Z01")
					}
					var bal int
					if err := connect(t, e.direct, pgx.QueryExecModeExec).QueryRow(t.Context(), "SELECT balance FROM accounts WHERE id = 1").Scan(&bal); err != nil {
						t.Fatal(err)
					}
					if bal != 42 {
						t.Fatalf("balance %d, want A's 42", bal)
					}
				})
			}
		}
	}
}
