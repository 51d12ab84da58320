package integration

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
	return newPooledEnvRelay(t, size, fencing, relayLoop)
}

// The relays a pooled session can be served by.
const (
	relayLoop       = "loop"       // the io_uring event loop, the default
	relayGoroutines = "goroutines" // Config.GoroutineRelay
)

// newPooledEnvRelay is newPooledEnv with the proxy relaying its sessions
// as relay says.
func newPooledEnvRelay(t *testing.T, size int, fencing *gate.Config, relay string) *pooledEnv {
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
	e.proxy = harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Fencing: fencing, GoroutineRelay: relay == relayGoroutines,
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
	for _, relay := range []string{relayLoop, relayGoroutines} {
		t.Run(relay, func(t *testing.T) { clientsShareServerConnections(t, newPooledEnvRelay(t, 1, nil, relay)) })
	}
}

func clientsShareServerConnections(t *testing.T, e *pooledEnv) {
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

// TestPooledLoginGetsTheServersDefaultsNotTheLastBorrowers: a client that
// logs in on a server connection another client left with its session
// SETs of reported settings starts with the server's defaults (reported
// at login and in force), not with what the other client set.
func TestPooledLoginGetsTheServersDefaultsNotTheLastBorrowers(t *testing.T) {
	e := newPooledEnv(t, 1, nil)
	a := connect(t, e.app, pgx.QueryExecModeExec)
	mustExec(t, a, "SET TimeZone = 'Asia/Tokyo'")
	mustExec(t, a, "SET application_name = 'client a'")
	mustExec(t, a, "SET standard_conforming_strings = off")
	b := connect(t, e.app, pgx.QueryExecModeExec) // logs in on the connection a left
	direct := connect(t, e.direct, pgx.QueryExecModeExec)
	for _, name := range []string{"TimeZone", "application_name", "standard_conforming_strings"} {
		want := direct.PgConn().ParameterStatus(name)
		if got := b.PgConn().ParameterStatus(name); got != want {
			t.Errorf("client b logged in with %s %q reported, want the server's %q", name, got, want)
		}
		var got string
		if err := b.QueryRow(t.Context(), "SELECT current_setting($1)", name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("client b runs with %s %q, want the server's %q", name, got, want)
		}
	}
}

// TestPooledStaleHolderNeverLands: over one shared server connection,
// old holder B (token 41) and new holder A (token 42) interleave
// session-level SET and RESET, SET LOCAL, comments and startup options;
// B's writes are refused with 55Z01 once A has written, whichever form
// either uses, and A's value stays.
func TestPooledStaleHolderNeverLands(t *testing.T) {
	for _, relay := range []string{relayLoop, relayGoroutines} {
		t.Run(relay, func(t *testing.T) { staleHolderNeverLands(t, newPooledEnvRelay(t, 1, nil, relay)) })
	}
}

func staleHolderNeverLands(t *testing.T, e *pooledEnv) {
	forms := []string{"session", "set local", "set_config", "comment"}
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

// TestPooledCancelReachesTheLentBackend: a cancel request with the key the
// proxy gave a pooled client stops the statement that client runs, on
// whichever server connection it was lent; another client's statement on
// another connection runs on.
func TestPooledCancelReachesTheLentBackend(t *testing.T) {
	e := newPooledEnv(t, 2, nil)
	a := connect(t, e.app, pgx.QueryExecModeExec)
	b := connect(t, e.app, pgx.QueryExecModeExec)
	bDone := make(chan error, 1)
	go func() {
		_, err := b.Exec(t.Context(), "SELECT pg_sleep(1)")
		bDone <- err
	}()
	aDone := make(chan error, 1)
	go func() {
		_, err := a.Exec(t.Context(), "SELECT pg_sleep(30)")
		aDone <- err
	}()
	time.Sleep(300 * time.Millisecond) // both statements running
	if err := a.PgConn().CancelRequest(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-aDone:
		wantCode(t, err, "57014")
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled statement still runs")
	}
	if err := <-bDone; err != nil {
		t.Errorf("the other client's statement: %v", err)
	}
	// The cancelled client goes on, on a connection of the pool.
	mustExec(t, a, "SELECT 1")
}

// TestPooledWaitTimeout: with the one server connection held by a client
// in a transaction, another client waits query_wait_timeout and is then
// refused 53300 and closed; the holder is not disturbed, and a new client
// gets the connection once it is free.
func TestPooledWaitTimeout(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	p := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(),
		Pool: &pgwire.PoolConfig{Size: 1, WaitTimeout: 300 * time.Millisecond, AuthMethod: clientauth.Trust}})
	app := p.DSN(pgcluster.Superuser, "", db)
	a := connect(t, app, pgx.QueryExecModeExec)
	b := connect(t, app, pgx.QueryExecModeExec)
	mustExec(t, a, "BEGIN")
	mustExec(t, a, "SELECT 1")
	start := time.Now()
	_, err := b.Exec(t.Context(), "SELECT 2")
	wantCode(t, err, "53300")
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("refused after %v, before query_wait_timeout", waited)
	}
	mustExec(t, a, "SELECT 3")
	mustExec(t, a, "COMMIT")
	mustExec(t, connect(t, app, pgx.QueryExecModeExec), "SELECT 4")
}

// TestPooledStartupParameters: startup parameters a pool cannot keep per
// client are refused 0A000 with a hint; the fencing settings given at
// startup (as options, as PGOPTIONS carries them) are the client's
// session settings, kept by the proxy, and fence its writes.
func TestPooledStartupParameters(t *testing.T) {
	e := newPooledEnv(t, 1, nil)
	for name, params := range map[string]map[string]string{
		"options":     {"options": "-c work_mem=64MB"},
		"search_path": {"search_path": "public"},
		"float":       {"extra_float_digits": "0"},
	} {
		cfg, err := pgx.ParseConfig(e.app)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range params {
			cfg.RuntimeParams[k] = v
		}
		_, err = pgx.ConnectConfig(t.Context(), cfg)
		if pe := wantCode(t, err, "0A000"); pe != nil && pe.Hint == "" {
			t.Errorf("%s: refusal without a hint", name)
		}
	}
	startup := func(token int) *pgx.Conn {
		cfg, err := pgx.ParseConfig(e.app)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["options"] = fmt.Sprintf("-c lock.fencing_token=%d -c lock.resource=acct/startup", token)
		cfg.RuntimeParams["extra_float_digits"] = "3" // as pgjdbc sends it
		cfg.RuntimeParams["application_name"] = "startup"
		c, err := pgx.ConnectConfig(t.Context(), cfg)
		if err != nil {
			t.Fatalf("connect with token %d: %v", token, err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	old, cur := startup(41), startup(42)
	mustExec(t, cur, "UPDATE accounts SET balance = 42 WHERE id = 1")
	_, err := old.Exec(t.Context(), "UPDATE accounts SET balance = 41 WHERE id = 1")
	wantCode(t, err, "55Z01")
	var app string
	if err := cur.QueryRow(t.Context(), "SELECT current_setting('application_name')").Scan(&app); err != nil || app != "startup" {
		t.Errorf("application_name %q, %v; want the startup value", app, err)
	}
}

// TestPooledClientAuthentication: the proxy itself checks a pooled
// client's password (SCRAM-SHA-256 against the auth file), refuses a wrong
// one with 28P01, and logs in to PostgreSQL with the file's password.
func TestPooledClientAuthentication(t *testing.T) {
	pg, db, role, users := appRole(t)
	p := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(),
		Pool: &pgwire.PoolConfig{Size: 1, AuthMethod: clientauth.SCRAMSHA256, Auth: users}})
	c := connect(t, p.DSN(role, "app-secret", db), pgx.QueryExecModeExec)
	wantUser(t, c, role)
	wantPasswordsChecked(t, p, role, db)
}

// appRole starts PostgreSQL with a new database and a login role of
// password app-secret, and returns them with an auth file holding it.
func appRole(t *testing.T) (pg *pgcluster.Cluster, db, role string, users *clientauth.File) {
	t.Helper()
	pg = harness.Postgres(t)
	db = harness.CreateDB(t, pg)
	role = "app_" + db // roles are the cluster's, shared by the tests
	if err := harness.Exec(context.Background(), pg.DSN(pgcluster.Superuser, db), "CREATE ROLE "+role+" LOGIN PASSWORD 'app-secret'"); err != nil {
		t.Fatal(err)
	}
	users, err := clientauth.Parse(strings.NewReader(`"` + role + `" "app-secret"` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return pg, db, role, users
}

func wantUser(t *testing.T, c *pgx.Conn, role string) {
	t.Helper()
	var user string
	if err := c.QueryRow(t.Context(), "SELECT current_user").Scan(&user); err != nil || user != role {
		t.Fatalf("current_user %q, %v", user, err)
	}
}

// wantPasswordsChecked fails unless p refuses role with a wrong password,
// and a user its auth file lacks, with 28P01.
func wantPasswordsChecked(t *testing.T, p *harness.Proxy, role, db string) {
	t.Helper()
	_, err := pgx.Connect(t.Context(), p.DSN(role, "wrong", db))
	wantCode(t, err, "28P01")
	_, err = pgx.Connect(t.Context(), p.DSN("nobody", "app-secret", db))
	wantCode(t, err, "28P01")
}

// TestPooledStatementsFollowTheClient: a client's named prepared
// statements work on whichever server connection it is lent, prepared
// there again under the proxy's names; pg_prepared_statements never shows
// the client's own names, two clients' statements of one name stay apart,
// and a client's Close leaves the other's.
func TestPooledStatementsFollowTheClient(t *testing.T) {
	e := newPooledEnv(t, 2, nil)
	a := connect(t, e.app, pgx.QueryExecModeCacheStatement)
	b := connect(t, e.app, pgx.QueryExecModeCacheStatement)
	holder := connect(t, e.app, pgx.QueryExecModeExec)
	for i := range 10 {
		if i%2 == 1 {
			// Hold one connection, so that a and b get the other.
			mustExec(t, holder, "BEGIN")
			mustExec(t, holder, "SELECT 1")
		}
		var x, y int
		if err := a.QueryRow(t.Context(), "SELECT $1::int * 2", i).Scan(&x); err != nil || x != 2*i {
			t.Fatalf("a, round %d: %d, %v", i, x, err)
		}
		if err := b.QueryRow(t.Context(), "SELECT $1::int * 3", i).Scan(&y); err != nil || y != 3*i {
			t.Fatalf("b, round %d: %d, %v", i, y, err)
		}
		if i%2 == 1 {
			mustExec(t, holder, "COMMIT")
		}
	}
	var own int
	if err := a.QueryRow(t.Context(), "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'stmtcache%'").Scan(&own); err != nil || own != 0 {
		t.Errorf("pg_prepared_statements shows %d statements under a client's name (%v)", own, err)
	}
	if _, err := a.Prepare(t.Context(), "same", "SELECT 'a'"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Prepare(t.Context(), "same", "SELECT 'b'"); err != nil {
		t.Fatal(err)
	}
	one := func(c *pgx.Conn, want string) {
		t.Helper()
		var got string
		if err := c.QueryRow(t.Context(), "same").Scan(&got); err != nil || got != want {
			t.Fatalf("statement \"same\": %q, %v; want %q", got, err, want)
		}
	}
	one(a, "a")
	one(b, "b")
	if err := a.Deallocate(t.Context(), "same"); err != nil {
		t.Fatal(err)
	}
	one(b, "b")
	_, err := a.Prepare(t.Context(), "same", "SELECT 'a2'")
	if err != nil {
		t.Fatal(err)
	}
	one(a, "a2")
	one(b, "b")
}

// TestPooledParseOfANameInUseFailsAsOnPostgreSQL: a Parse of a statement
// name the client already has fails with 42P05 and leaves the first
// statement, alone or after the first Parse in one pipeline, as it does
// straight to PostgreSQL (the server sees names of the proxy's, so the
// proxy must refuse it); once closed, the name can be prepared again.
func TestPooledParseOfANameInUseFailsAsOnPostgreSQL(t *testing.T) {
	e := newPooledEnv(t, 1, nil)
	for name, dsn := range map[string]string{"direct": e.direct, "proxy": e.app} {
		c := connect(t, dsn, pgx.QueryExecModeExec).PgConn()
		ctx := t.Context()
		duplicate := func(what string, err error) {
			t.Helper()
			if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "42P05" {
				t.Errorf("%s: %s: %v, want 42P05", name, what, err)
			}
		}
		runs := func(stmt, want string) {
			t.Helper()
			res := c.ExecPrepared(ctx, stmt, nil, nil, nil).Read()
			if res.Err != nil || len(res.Rows) != 1 || string(res.Rows[0][0]) != want {
				t.Errorf("%s: statement %s: %v %q, want %q", name, stmt, res.Err, res.Rows, want)
			}
		}
		if _, err := c.Prepare(ctx, "dup", "SELECT 1", nil); err != nil {
			t.Fatal(err)
		}
		_, err := c.Prepare(ctx, "dup", "SELECT 2", nil)
		duplicate("second Parse of dup", err)
		runs("dup", "1")

		p := c.StartPipeline(ctx)
		p.SendPrepare("twice", "SELECT 3", nil)
		p.SendPrepare("twice", "SELECT 4", nil)
		p.Sync()
		if _, err := p.GetResults(); err != nil {
			t.Errorf("%s: first Parse of twice: %v", name, err)
		}
		_, err = p.GetResults()
		duplicate("second Parse of twice in the pipeline", err)
		if err := p.Close(); err != nil {
			t.Fatalf("%s: pipeline: %v", name, err)
		}
		runs("twice", "3")

		if err := c.Deallocate(ctx, "dup"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Prepare(ctx, "dup", "SELECT 5", nil); err != nil {
			t.Errorf("%s: Parse of dup after its Close: %v", name, err)
		}
		runs("dup", "5")
	}
}

// TestPooledClientsLeavingKeepTheConnectionsGood: 64 pgbench clients over
// 16 server connections each leave (Terminate) right after their last
// reply, while the connection they were lent is going back to the pool;
// none of them, and none of the clients given that connection next, loses
// its connection.
func TestPooledClientsLeavingKeepTheConnectionsGood(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	pgbench := harness.Tool(t, pg, "pgbench")
	port := strconv.Itoa(pg.Port)
	if out, err := exec.Command(pgbench, "-i", "-s", "1", "-h", "127.0.0.1", "-p", port, "-U", pgcluster.Superuser, db).CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	p := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Pool: &pgwire.PoolConfig{Size: 16, AuthMethod: clientauth.Trust}})
	for round := range 3 {
		out, err := exec.Command(pgbench, "-S", "-t", "200", "-M", "simple", "-c", "64", "-j", "2", "-n",
			"-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", pgcluster.Superuser, db).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "processed: 12800/12800") {
			t.Fatalf("round %d: pgbench: %v\n%s", round, err, out)
		}
	}
}

// TestPooledOperatorsSeeThePool: the admin view (Server.PoolList, served
// as GET /admin/pools) and the metrics show a pool's server connections,
// active and idle, and the clients waiting for one.
func TestPooledOperatorsSeeThePool(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	reg := prometheus.NewRegistry()
	p := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Metrics: reg,
		Pool: &pgwire.PoolConfig{Size: 1, AuthMethod: clientauth.Trust}})
	app := p.DSN(pgcluster.Superuser, "", db)
	holder, waiter := connect(t, app, pgx.QueryExecModeExec), connect(t, app, pgx.QueryExecModeExec)
	mustExec(t, holder, "BEGIN")
	mustExec(t, holder, "SELECT 1")
	waited := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(context.Background(), "SELECT 2")
		waited <- err
	}()
	var got pgwire.PoolInfo
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if l := p.Server().PoolList(); len(l) == 1 && l[0].Waiting == 1 {
			got = l[0]
			break
		}
	}
	if got.Database != db || got.User != pgcluster.Superuser || got.Active != 1 || got.Idle != 0 || got.Waiting != 1 {
		t.Fatalf("pool while one client holds the connection and one waits: %+v", got)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP fenceproxy_pool_clients_waiting Clients queued now for a server connection of the transaction pool.
# TYPE fenceproxy_pool_clients_waiting gauge
fenceproxy_pool_clients_waiting{database=%q,user=%q} 1
`, db, pgcluster.Superuser)), "fenceproxy_pool_clients_waiting"); err != nil {
		t.Error(err)
	}
	mustExec(t, holder, "COMMIT")
	if err := <-waited; err != nil {
		t.Fatalf("the waiting client: %v", err)
	}
	// The connection goes back as the last ReadyForQuery goes out (just
	// after it, when the client reader was still busy with its message).
	var l []pgwire.PoolInfo
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if l = p.Server().PoolList(); len(l) == 1 && l[0].Active == 0 {
			break
		}
	}
	if len(l) != 1 || l[0].Active != 0 || l[0].Idle != 1 || l[0].Waits < 1 {
		t.Fatalf("pool once both are idle: %+v", l)
	}
}

// TestPooledShutdown: a graceful shutdown in transaction pool mode ends
// idle clients at once with 57P01, lets a transaction finish on its lent
// connection, then ends that client too; an administrator's terminate of
// an idle pooled client does the same.
func TestPooledShutdown(t *testing.T) {
	pg := harness.Postgres(t)
	e := &env{pg: pg, db: harness.CreateDB(t, pg)}
	e.proxy = harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Pool: &pgwire.PoolConfig{Size: 1, AuthMethod: clientauth.Trust}})
	killed := readyConn(t, e, "pooled_killed")
	for _, s := range e.proxy.Server().Sessions() {
		if s.ApplicationName == "pooled_killed" && !e.proxy.Server().Terminate(s.ID) {
			t.Fatal("terminate found no session")
		}
	}
	expectFatal(t, killed, "57P01")
	shutdownLetsTransactionsFinish(t, e)
}
