package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/prometheus/client_golang/prometheus"
)

// reuseEnv is newFencedEnv's database behind a proxy in session mode with
// server connection reuse (pgwire.Config.Reuse), clients let in by trust;
// accounts requires a token for resource acct/1.
type reuseEnv struct {
	*env
	reg *prometheus.Registry
}

// The event loops a reusing proxy can relay with.
var reuseLoops = map[string]bool{"io_uring": false, "epoll": true}

func newReuseEnv(t *testing.T, epoll bool) *reuseEnv {
	t.Helper()
	return newReuseEnvWith(t, func(c *pgwire.Config) { c.EpollLoop = epoll })
}

// newReuseEnvWith is newReuseEnv with the proxy's configuration changed by
// set.
func newReuseEnvWith(t *testing.T, set func(*pgwire.Config)) *reuseEnv {
	t.Helper()
	e := newFencedEnv(t, nil) // its database and fence store; its own proxy is not used
	reg := prometheus.NewRegistry()
	fencing := &gate.Config{Analyzer: gate.NewAnalyzer(1024), Tables: map[gate.TableRef]gate.Protection{
		{Schema: "public", Name: "accounts"}: {Resource: "acct/1", RequireToken: true},
	}}
	cfg := pgwire.Config{Upstream: e.pg.Addr(), Fencing: fencing, Metrics: reg, Reuse: &pgwire.PoolConfig{AuthMethod: clientauth.Trust}}
	set(&cfg)
	e.proxy = harness.StartProxy(t, cfg)
	return &reuseEnv{env: e, reg: reg}
}

// reuses returns fenceproxy_server_reuse_total for event.
func (e *reuseEnv) reuses(t *testing.T, event string) int {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "fenceproxy_server_reuse_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == event {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	t.Fatalf("no fenceproxy_server_reuse_total{event=%q}", event)
	return 0
}

// settle waits until the proxy has kept or closed n server connections in
// all: a client's leaving is handled after the client is gone.
func (e *reuseEnv) settle(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.reuses(t, "kept")+e.reuses(t, "closed") < n; {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not handle %d leaving clients (kept %d, closed %d)", n, e.reuses(t, "kept"), e.reuses(t, "closed"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func backendPID(t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var pid int
	if err := c.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestSessionModeReusesAServerConnectionAClientLeftIdle: the next client
// of the same database, user and startup parameters gets the backend an
// earlier client left, in every protocol mode, and the client is told the
// backend's PID.
func TestSessionModeReusesAServerConnectionAClientLeftIdle(t *testing.T) {
	for loop, epoll := range reuseLoops {
		t.Run(loop, func(t *testing.T) {
			e := newReuseEnv(t, epoll)
			pids := map[int]bool{}
			i := 0
			for name, mode := range modes {
				c := connect(t, e.viaProxy(), mode)
				pid := backendPID(t, c)
				if told := int(c.PgConn().PID()); told != pid {
					t.Errorf("%s: the client was told PID %d, its backend is %d", name, told, pid)
				}
				mustExec(t, c, "SELECT $1::int", 1)
				pids[pid] = true
				c.Close(t.Context())
				i++
				e.settle(t, i)
			}
			if len(pids) != 1 || e.reuses(t, "opened") != 1 || e.reuses(t, "reused") != 2 || e.reuses(t, "kept") != 3 {
				t.Errorf("backends %v; opened %d, reused %d, kept %d; want one backend, opened once, reused twice, kept 3 times",
					pids, e.reuses(t, "opened"), e.reuses(t, "reused"), e.reuses(t, "kept"))
			}
		})
	}
}

// TestTheGoroutineRelayKeepsNoServerConnection: only the event loop keeps
// a server connection; a session relayed by two goroutines ends its own.
func TestTheGoroutineRelayKeepsNoServerConnection(t *testing.T) {
	e := newReuseEnvWith(t, func(c *pgwire.Config) { c.GoroutineRelay = true })
	a := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	pid := backendPID(t, a)
	a.Close(t.Context())
	e.settle(t, 1)
	b := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	if got := backendPID(t, b); got == pid || e.reuses(t, "closed") != 1 {
		t.Errorf("B got backend %d (A had %d), closed %d; want another backend, 1 closed", got, pid, e.reuses(t, "closed"))
	}
}

// TestAReusedServerConnectionKeepsNothingOfTheLastClient: whatever the
// last client set or left at session level (a fencing token and resource
// set every way, settings, prepared statements, cursors, temporary tables,
// advisory locks, LISTEN) is gone for the next one: a write without a
// token is refused as in a new session, a stale one too.
func TestAReusedServerConnectionKeepsNothingOfTheLastClient(t *testing.T) {
	for loop, epoll := range reuseLoops {
		t.Run(loop, func(t *testing.T) {
			e := newReuseEnv(t, epoll)
			a := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
			for _, sql := range []string{
				"SET lock.fencing_token = 42",
				"SET lock.resource = 'acct/1'",
				"UPDATE accounts SET balance = balance + 1 WHERE id = 1",
				"SELECT set_config('lock.fencing_token', '43', false)",
				"SET application_name = 'holder-a'",
				"SET search_path = pg_catalog",
				"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
				"PREPARE p AS SELECT 1",
				"CREATE TEMP TABLE scratch (x int)",
				"SELECT pg_advisory_lock(7)",
				"LISTEN jobs",
				"BEGIN", "DECLARE held CURSOR WITH HOLD FOR SELECT 1", "COMMIT",
			} {
				mustExec(t, a, sql)
			}
			pid := backendPID(t, a)
			a.Close(t.Context())
			e.settle(t, 1)

			b := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
			if got := backendPID(t, b); got != pid {
				t.Fatalf("B has backend %d, A had %d: not reused, nothing tested", got, pid)
			}
			if app := b.PgConn().ParameterStatus("application_name"); app == "holder-a" {
				t.Errorf("B was told application_name %q, A's SET", app)
			}
			var leftovers string
			err := b.QueryRow(t.Context(), `SELECT concat_ws(',',
				nullif(current_setting('lock.fencing_token', true), ''),
				nullif(current_setting('lock.resource', true), ''),
				nullif(current_setting('application_name'), ''),
				CASE WHEN current_setting('search_path') = 'pg_catalog' THEN 'search_path' END,
				CASE WHEN current_setting('transaction_isolation') <> 'read committed' THEN 'isolation' END,
				(SELECT 'prepared' FROM pg_prepared_statements LIMIT 1),
				(SELECT 'cursor' FROM pg_cursors LIMIT 1),
				CASE WHEN to_regclass('pg_temp.scratch') IS NOT NULL THEN 'temp table' END,
				(SELECT 'advisory lock' FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() LIMIT 1),
				(SELECT 'listen' FROM pg_listening_channels() LIMIT 1))`).Scan(&leftovers)
			if err != nil {
				t.Fatal(err)
			}
			if leftovers != "" {
				t.Errorf("B's session holds A's %s", leftovers)
			}
			_, err = b.Exec(t.Context(), "UPDATE accounts SET balance = balance + 100 WHERE id = 1")
			wantCode(t, err, "55Z02")
			mustExec(t, b, "SET lock.fencing_token = 41")
			_, err = b.Exec(t.Context(), "UPDATE accounts SET balance = balance + 100 WHERE id = 1")
			wantCode(t, err, "55Z01")
			if got, m := e.balance(t), e.mark(t, "acct/1"); got != 1 || m != 43 {
				t.Errorf("balance %d, mark %d; want A's 1 and 43 (A's statements after its set_config)", got, m)
			}
		})
	}
}

// TestAServerConnectionIsReusedOnlyForTheSameStartupParameters: startup
// parameters are the session's defaults (RESET goes back to them): a
// client gets a backend only another client with the same ones left.
func TestAServerConnectionIsReusedOnlyForTheSameStartupParameters(t *testing.T) {
	e := newReuseEnv(t, false)
	params := func(app string) map[string]string {
		return map[string]string{"user": pgcluster.Superuser, "database": e.db, "application_name": app, "DateStyle": "SQL, DMY"}
	}
	a := openWire(t, e.proxy.Addr, params("a"))
	a.send(&pgproto3.Terminate{})
	a.flush()
	e.settle(t, 1)
	b := openWire(t, e.proxy.Addr, params("b"))
	if b.key.ProcessID == a.key.ProcessID {
		t.Fatalf("application_name b got backend %d, which application_name a left", b.key.ProcessID)
	}
	again := openWire(t, e.proxy.Addr, params("a"))
	if again.key.ProcessID != a.key.ProcessID {
		t.Errorf("the same startup parameters got backend %d, not %d", again.key.ProcessID, a.key.ProcessID)
	}
}

// TestAServerConnectionWhoseDefaultsHoldATokenIsNotKept: a session whose
// defaults hold a fencing token (startup options, or a database or role
// setting) leaves its backend to end: no other client gets a token it did
// not set, and a setting withdrawn by ALTER … RESET is not brought back by
// DISCARD ALL on an old backend.
func TestAServerConnectionWhoseDefaultsHoldATokenIsNotKept(t *testing.T) {
	t.Run("startup options", func(t *testing.T) {
		e := newReuseEnv(t, false)
		tokened := map[string]string{"user": pgcluster.Superuser, "database": e.db, "options": "-c lock.fencing_token=42 -c lock.resource=acct/1"}
		a := openWire(t, e.proxy.Addr, tokened)
		a.query("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
		a.send(&pgproto3.Terminate{})
		a.flush()
		e.settle(t, 1)
		again := openWire(t, e.proxy.Addr, tokened)
		plain := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
		if pid := backendPID(t, plain); pid == int(a.key.ProcessID) || again.key.ProcessID == a.key.ProcessID {
			t.Fatalf("backend %d, whose defaults hold token 42, was given again", a.key.ProcessID)
		}
		_, err := plain.Exec(t.Context(), "UPDATE accounts SET balance = balance + 100 WHERE id = 1")
		wantCode(t, err, "55Z02")
		if got, closed := e.balance(t), e.reuses(t, "closed"); got != 1 || closed != 1 {
			t.Errorf("balance %d, closed %d; want 1 and 1", got, closed)
		}
	})
	t.Run("database setting", func(t *testing.T) {
		e := newReuseEnv(t, false)
		if err := harness.Exec(context.Background(), e.direct(), "ALTER DATABASE "+e.db+" SET lock.fencing_token = 42", "ALTER DATABASE "+e.db+" SET lock.resource = 'acct/1'"); err != nil {
			t.Fatal(err)
		}
		a := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
		pid := backendPID(t, a)
		a.Close(t.Context())
		e.settle(t, 1)
		if err := harness.Exec(context.Background(), e.direct(), "ALTER DATABASE "+e.db+" RESET ALL"); err != nil {
			t.Fatal(err)
		}
		b := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
		if got := backendPID(t, b); got == pid {
			t.Fatalf("B got backend %d, whose database default token was withdrawn", pid)
		}
		_, err := b.Exec(t.Context(), "UPDATE accounts SET balance = balance + 100 WHERE id = 1")
		wantCode(t, err, "55Z02")
	})
	t.Run("database resource withdrawn while connected", func(t *testing.T) {
		// default_resource names acct/1; a lock.resource the backend
		// started with would override it, and DISCARD ALL brings it back.
		e := newReuseEnvWith(t, func(c *pgwire.Config) {
			c.Fencing = &gate.Config{Analyzer: gate.NewAnalyzer(1024), DefaultResource: "acct/1"}
		})
		if err := harness.Exec(context.Background(), e.direct(), "ALTER DATABASE "+e.db+" SET lock.resource = 'other'"); err != nil {
			t.Fatal(err)
		}
		a := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
		pid := backendPID(t, a)
		if err := harness.Exec(context.Background(), e.direct(), "ALTER DATABASE "+e.db+" RESET lock.resource"); err != nil {
			t.Fatal(err)
		}
		a.Close(t.Context())
		e.settle(t, 1)
		holder := connect(t, e.viaProxy()+"&application_name=holder", pgx.QueryExecModeExec)
		mustExec(t, holder, "SET lock.fencing_token = 50")
		mustExec(t, holder, "UPDATE accounts SET balance = balance + 1 WHERE id = 1")
		stale := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
		if got := int(stale.PgConn().PID()); got == pid {
			t.Errorf("the stale holder got backend %d, which started with lock.resource 'other'", pid)
		}
		mustExec(t, stale, "SET lock.fencing_token = 42")
		_, err := stale.Exec(t.Context(), "UPDATE accounts SET balance = balance + 100 WHERE id = 1")
		wantCode(t, err, "55Z01")
		if got := e.balance(t); got != 1 {
			t.Errorf("balance %d: the stale write landed", got)
		}
	})
	t.Run("database setting added while kept", func(t *testing.T) { settingAddedWhileKept(t, nil) })
	t.Run("database setting added while kept, operators shadowed", func(t *testing.T) {
		// The user's search_path puts an = on oids that is never true
		// before pg_catalog's: the proxy's lookup must not use it.
		settingAddedWhileKept(t, []string{
			"CREATE FUNCTION public.never(oid, oid) RETURNS bool LANGUAGE sql AS 'SELECT false'",
			"CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = public.never)",
		})
	})
}

// settingAddedWhileKept: a backend is kept, then its database gets a
// default token, stale since a holder advanced the mark: the next client
// gets a new backend, whose default token is refused as stale. setup runs
// first, with the database's search_path public, pg_catalog.
func settingAddedWhileKept(t *testing.T, setup []string) {
	e := newReuseEnv(t, false)
	if len(setup) > 0 {
		setup = append(setup, "ALTER DATABASE "+e.db+" SET search_path = public, pg_catalog")
		if err := harness.Exec(context.Background(), e.direct(), setup...); err != nil {
			t.Fatal(err)
		}
	}
	a := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	pid := backendPID(t, a)
	a.Close(t.Context())
	e.settle(t, 1)
	holder := connect(t, e.viaProxy()+"&application_name=holder", pgx.QueryExecModeExec) // another key: A's backend stays kept
	mustExec(t, holder, "SET lock.resource = 'acct/1'")
	mustExec(t, holder, "SET lock.fencing_token = 50")
	mustExec(t, holder, "UPDATE accounts SET balance = balance + 1 WHERE id = 1")
	if err := harness.Exec(context.Background(), e.direct(), "ALTER DATABASE "+e.db+" SET lock.fencing_token = 42", "ALTER DATABASE "+e.db+" SET lock.resource = 'acct/1'"); err != nil {
		t.Fatal(err)
	}
	b := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	if got := int(b.PgConn().PID()); got == pid {
		t.Fatalf("B got backend %d, kept from before its database's default token 42", pid)
	}
	_, err := b.Exec(t.Context(), "UPDATE accounts SET balance = balance + 100 WHERE id = 1")
	wantCode(t, err, "55Z01") // the stale default, as a new backend has it
}

// TestACancelOfUnknownFateKeepsTheServerConnectionFromBeingKept: a cancel
// request still being forwarded when its client leaves, whose delivery
// then stays unknown (the server never closes its connection), may still
// signal the backend: the connection is closed, not kept for the next
// client.
func TestACancelOfUnknownFateKeepsTheServerConnectionFromBeingKept(t *testing.T) {
	e := newReuseEnvWith(t, func(c *pgwire.Config) {
		c.Upstream = holdCancels(t, c.Upstream)
		c.DialTimeout = 700 * time.Millisecond
	})
	a := readyConn(t, e.env, "")
	go sendCancel(t, e.proxy.Addr, a.key.ProcessID, a.key.SecretKey)
	time.Sleep(100 * time.Millisecond) // the proxy is forwarding it
	a.send(&pgproto3.Terminate{})
	a.flush()
	a.Close()
	e.settle(t, 1)
	if k := e.reuses(t, "kept"); k != 0 {
		t.Errorf("kept %d: a connection whose cancel request's delivery is unknown was kept", k)
	}
}

// holdCancels relays connections to target, but holds a cancel request's
// connection open without relaying it, for 3 s: its fate stays unknown to
// the proxy until its DialTimeout.
func holdCancels(t *testing.T, target string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relayHoldingCancels(c, target)
		}
	}()
	return ln.Addr().String()
}

func relayHoldingCancels(c net.Conn, target string) {
	defer c.Close()
	head := make([]byte, 8)
	if _, err := io.ReadFull(c, head); err != nil {
		return
	}
	if binary.BigEndian.Uint32(head[4:]) == 80877102 { // CancelRequest
		time.Sleep(3 * time.Second)
		return
	}
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	u.Write(head)
	go func() { io.Copy(u, c); u.Close() }()
	io.Copy(c, u)
}

// TestAServerConnectionLeftBusyIsNotReused: a client that leaves inside a
// transaction, in the middle of an extended-protocol sequence, of a COPY
// or of a query leaves its backend to end: the next client gets another,
// and nothing of the unfinished transaction, sequence or COPY lands.
func TestAServerConnectionLeftBusyIsNotReused(t *testing.T) {
	cases := map[string][]pgproto3.FrontendMessage{
		"transaction": {&pgproto3.Query{String: "BEGIN; INSERT INTO invoices (amount) VALUES (1)"}},
		"extended":    {&pgproto3.Parse{Query: "INSERT INTO invoices (amount) VALUES (2)"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Flush{}},
		"copy":        {&pgproto3.Query{String: "COPY invoices (amount) FROM STDIN"}, &pgproto3.CopyData{Data: []byte("3\n")}},
		"query":       {&pgproto3.Query{String: "SELECT pg_sleep(0.3)"}},
	}
	for name, msgs := range cases {
		for loop, epoll := range reuseLoops {
			t.Run(name+"/"+loop, func(t *testing.T) { leftBusy(t, newReuseEnv(t, epoll), msgs) })
		}
	}
}

func leftBusy(t *testing.T, e *reuseEnv, msgs []pgproto3.FrontendMessage) {
	a := readyConn(t, e.env, "")
	a.send(msgs...)
	a.flush()
	time.Sleep(50 * time.Millisecond) // the server has begun
	a.send(&pgproto3.Terminate{})
	a.flush()
	a.Close()
	e.settle(t, 1)
	b := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	if pid := backendPID(t, b); pid == int(a.key.ProcessID) {
		t.Errorf("B got backend %d, which A left busy", pid)
	}
	if e.reuses(t, "kept") != 0 {
		t.Errorf("kept %d server connections, want 0", e.reuses(t, "kept"))
	}
	if n := e.count(t, "SELECT count(*) FROM invoices"); n != 0 {
		t.Errorf("%d invoices: A's unfinished work landed", n)
	}
}

// TestALeftClientsCancelKeyCancelsNothing: once a client is gone, its
// cancel key reaches nothing, not the next client's statement on the same
// backend.
func TestALeftClientsCancelKeyCancelsNothing(t *testing.T) {
	e := newReuseEnv(t, false)
	a := readyConn(t, e.env, "")
	a.send(&pgproto3.Terminate{})
	a.flush()
	e.settle(t, 1)
	b := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	if pid := backendPID(t, b); pid != int(a.key.ProcessID) {
		t.Fatalf("B got backend %d, not A's %d: nothing tested", pid, a.key.ProcessID)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Exec(context.Background(), "SELECT pg_sleep(0.5)")
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	sendCancel(t, e.proxy.Addr, a.key.ProcessID, a.key.SecretKey)
	if err := <-done; err != nil {
		t.Errorf("B's statement: %v; A's cancel key must reach nothing", err)
	}
}

// TestServerReuseAuthenticatesClients: with server connections reused,
// the proxy checks each client's password itself (SCRAM-SHA-256 against
// the auth file; the server saw only the proxy's login): a wrong one, or
// a user the file lacks, is refused with 28P01, also when an idle backend
// of the user is there to take.
func TestServerReuseAuthenticatesClients(t *testing.T) {
	pg, db, role, users := appRole(t)
	reg := prometheus.NewRegistry()
	p := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Metrics: reg, Reuse: &pgwire.PoolConfig{AuthMethod: clientauth.SCRAMSHA256, Auth: users}})
	e := &reuseEnv{env: &env{pg: pg, proxy: p, db: db}, reg: reg}
	c := connect(t, p.DSN(role, "app-secret", db), pgx.QueryExecModeExec)
	wantUser(t, c, role)
	pid := backendPID(t, c)
	c.Close(t.Context())
	e.settle(t, 1)
	// The role, no superuser, reads what it must to have its backend kept
	// and given again.
	again := connect(t, p.DSN(role, "app-secret", db), pgx.QueryExecModeExec)
	if got := backendPID(t, again); got != pid {
		t.Errorf("the role's second session got backend %d, not the kept %d", got, pid)
	}
	wantPasswordsChecked(t, p, role, db)
}

// TestAKeptServerConnectionThatEndedIsNotGiven: a backend that ends while
// its connection is kept (pg_terminate_backend here; idle_session_timeout
// or a server restart alike) leaves its FATAL error and its end unread on
// it: the next client gets a new backend and never sees them.
func TestAKeptServerConnectionThatEndedIsNotGiven(t *testing.T) {
	e := newReuseEnv(t, false)
	a := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	pid := backendPID(t, a)
	a.Close(t.Context())
	e.settle(t, 1)
	if n := e.count(t, fmt.Sprintf("SELECT pg_terminate_backend(%d)::int", pid)); n != 1 {
		t.Fatalf("backend %d not terminated", pid)
	}
	time.Sleep(100 * time.Millisecond) // its FATAL error reaches the proxy's socket
	b := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	if got := backendPID(t, b); got == pid {
		t.Fatalf("B got the terminated backend %d", pid)
	}
	if e.reuses(t, "opened") != 2 || e.reuses(t, "reused") != 0 {
		t.Errorf("opened %d, reused %d; want 2 and 0", e.reuses(t, "opened"), e.reuses(t, "reused"))
	}
}

// TestAtMostPoolSizeServerConnectionsAreKeptIdle: clients of many startup
// parameters leave at most pool_size backends idle, all keys together;
// the one idle longest is closed first.
func TestAtMostPoolSizeServerConnectionsAreKeptIdle(t *testing.T) {
	e := newReuseEnvWith(t, func(c *pgwire.Config) { c.Reuse.Size = 2 })
	var pids []int
	for i := range 4 {
		c := connect(t, e.viaProxy()+fmt.Sprintf("&application_name=client%d", i), pgx.QueryExecModeExec)
		pids = append(pids, backendPID(t, c))
		c.Close(t.Context())
		e.settle(t, i+1)
	}
	want := fmt.Sprintf("%d,%d", pids[2], pids[3])
	var got string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		conn := connect(t, e.direct(), pgx.QueryExecModeExec)
		err := conn.QueryRow(t.Context(), `SELECT coalesce(string_agg(pid::text, ',' ORDER BY backend_start), '') FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&got)
		conn.Close(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got == want || time.Now().After(deadline) {
			break
		}
	}
	if got != want {
		t.Errorf("idle backends %q, want the last two clients' %q", got, want)
	}
}

// TestPoolsLogInWithTheReloadedAuthFile: the server login of a pool (a
// transaction pool's, server_reuse's) uses the password of the auth file
// a reload put in force, not the file the proxy started with.
func TestPoolsLogInWithTheReloadedAuthFile(t *testing.T) {
	for name, pooled := range map[string]bool{"transaction": true, "server_reuse": false} {
		t.Run(name, func(t *testing.T) {
			pg := harness.Postgres(t)
			db := harness.CreateDB(t, pg)
			file := func(password string) *clientauth.File {
				f, err := clientauth.Parse(strings.NewReader(`"` + harness.ScramUser + `" "` + password + `"` + "\n"))
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
			cfg := func(password string) pgwire.Config {
				pc := &pgwire.PoolConfig{Size: 1, AuthMethod: clientauth.Trust, Auth: file(password)}
				if pooled {
					return pgwire.Config{Upstream: pg.Addr(), Pool: pc}
				}
				return pgwire.Config{Upstream: pg.Addr(), Reuse: pc}
			}
			p := harness.StartProxy(t, cfg("rotated-away"))
			p.Reload(cfg(harness.ScramPassword))
			c := connect(t, p.DSN(harness.ScramUser, "", db), pgx.QueryExecModeExec)
			wantUser(t, c, harness.ScramUser)
		})
	}
}
