package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/prometheus/client_golang/prometheus"
)

// Transaction pool mode in the event loop: pooled sessions are relayed by
// the io_uring loop (the default relay), wait there for a connection
// without a goroutine, and leave it for the goroutine relay, in the middle
// of a transaction too, with their lending intact.

// pooledLoopEnv is a proxy in transaction pool mode with a metrics
// registry, over a fresh PostgreSQL with one accounts row.
type pooledLoopEnv struct {
	app, direct string
	reg         *prometheus.Registry
	proxy       *harness.Proxy
}

func newPooledLoopEnv(t *testing.T, size int) *pooledLoopEnv {
	t.Helper()
	return newPooledLoopEnvWith(t, size, pgwire.UpstreamTLSDisable, relayLoop)
}

// newPooledLoopEnvWith is newPooledLoopEnv with the pool's connections
// over TLS as upstream says (the harness's server has ssl=on), relayed as
// relay names (relayLoop, relayGoroutines).
func newPooledLoopEnvWith(t *testing.T, size int, upstream pgwire.UpstreamTLS, relay string) *pooledLoopEnv {
	t.Helper()
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	e := &pooledLoopEnv{direct: pg.DSN(pgcluster.Superuser, db), reg: prometheus.NewRegistry()}
	if err := harness.Exec(context.Background(), e.direct,
		"CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)",
		"INSERT INTO accounts VALUES (1, 0)",
	); err != nil {
		t.Fatal(err)
	}
	e.proxy = harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Metrics: e.reg, UpstreamTLS: upstream,
		GoroutineRelay: relay == relayGoroutines, Pool: &pgwire.PoolConfig{Size: size, AuthMethod: clientauth.Trust}})
	e.app = e.proxy.DSN(pgcluster.Superuser, "", db)
	return e
}

// holdTheConnection returns a client holding the pool's only connection in
// an open transaction, and a second client, logged in (with
// application_name app, when not empty) while the connection was free,
// hijacked to write raw messages.
func (e *pooledLoopEnv) holdTheConnection(t *testing.T, app string) (*pgx.Conn, *pgconn.HijackedConn) {
	t.Helper()
	holder := connect(t, e.app, pgx.QueryExecModeExec)
	dsn := e.app
	if app != "" {
		dsn += "&application_name=" + app
	}
	queued, err := pgconn.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, holder, "BEGIN")
	mustExec(t, holder, "SELECT 1")
	hc, err := queued.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	return holder, hc
}

// counter returns a counter's value from the registry: name{label="value"}.
func (e *pooledLoopEnv) counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// waitPool waits until the pool has no connection lent and no client
// queued, and returns its numbers.
func (e *pooledLoopEnv) waitPool(t *testing.T) pgwire.PoolInfo {
	t.Helper()
	var l []pgwire.PoolInfo
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if l = e.proxy.Server().PoolList(); len(l) == 1 && l[0].Active == 0 && l[0].Waiting == 0 {
			return l[0]
		}
	}
	t.Fatalf("pool never idle: %+v", l)
	return pgwire.PoolInfo{}
}

// TestPooledSessionsAreRelayedByTheEventLoop: every pooled client is
// relayed by the event loop, where eight of them take turns on one server
// connection, each queued in the pool while another holds it.
func TestPooledSessionsAreRelayedByTheEventLoop(t *testing.T) {
	e := newPooledLoopEnv(t, 1)
	const clients = 8
	errs := make(chan error, clients)
	for i := range clients {
		c := connect(t, e.app, pgx.QueryExecModeCacheStatement)
		go func() {
			for j := range 25 {
				tx, err := c.Begin(t.Context())
				if err != nil {
					errs <- err
					return
				}
				var got int
				if err := tx.QueryRow(t.Context(), "SELECT $1::int * 100 + $2::int", i, j).Scan(&got); err != nil || got != i*100+j {
					errs <- fmt.Errorf("client %d: got %d, %v", i, got, err)
					return
				}
				if err := tx.Commit(t.Context()); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := e.counter(t, "fenceproxy_relayed_sessions_total", "relay", "loop"); n != clients {
		t.Errorf("fenceproxy_relayed_sessions_total{relay=loop} = %v, want %d", n, clients)
	}
	if p := e.waitPool(t); p.Idle != 1 || p.Waits == 0 {
		t.Errorf("pool after the clients: %+v, want its one connection idle and waits counted", p)
	}
}

// TestPooledSessionLeavesTheLoopWithItsTransaction: a row larger than the
// loop's buffer in the middle of a transaction moves the session to the
// goroutine relay with its lent connection: the transaction goes on there
// and commits, and the connection then serves the next client. A long
// statement text between transactions moves a session over too.
func TestPooledSessionLeavesTheLoopWithItsTransaction(t *testing.T) {
	e := newPooledLoopEnv(t, 1)
	a := connect(t, e.app, pgx.QueryExecModeExec)
	mustExec(t, a, "BEGIN")
	mustExec(t, a, "UPDATE accounts SET balance = 5 WHERE id = 1")
	var big string
	if err := a.QueryRow(t.Context(), "SELECT repeat('x', 200000)").Scan(&big); err != nil || len(big) != 200000 {
		t.Fatalf("large row in the transaction: %d bytes, %v", len(big), err)
	}
	mustExec(t, a, "UPDATE accounts SET balance = balance + 1 WHERE id = 1")
	mustExec(t, a, "COMMIT")
	if n := e.counter(t, "fenceproxy_event_loop_leaves_total", "reason", "large_message"); n != 1 {
		t.Errorf("leaves for a large message: %v, want 1", n)
	}
	b := connect(t, e.app, pgx.QueryExecModeExec)
	long := "SELECT balance FROM accounts WHERE id = 1 /* " + strings.Repeat("x", 5000) + " */"
	var bal int
	if err := b.QueryRow(t.Context(), long).Scan(&bal); err != nil || bal != 6 {
		t.Fatalf("next client: balance %d, %v; want 6", bal, err)
	}
	if n := e.counter(t, "fenceproxy_event_loop_leaves_total", "reason", "long_text"); n != 1 {
		t.Errorf("leaves for a long text: %v, want 1", n)
	}
	if err := a.QueryRow(t.Context(), "SELECT balance FROM accounts WHERE id = 1").Scan(&bal); err != nil || bal != 6 {
		t.Fatalf("the first client, back in the goroutine relay: balance %d, %v", bal, err)
	}
	if p := e.waitPool(t); p.Idle != 1 || p.Dials != 1 {
		t.Errorf("pool: %+v, want the one connection dialled once and idle", p)
	}
}

// TestPooledClientLeavingWhileQueuedFreesItsPlace: a client that leaves
// while queued for the pool's only connection (with a Terminate, or just
// closing its socket) takes no connection or slot with it, and nothing it
// sent runs; the next client is served. In either relay.
func TestPooledClientLeavingWhileQueuedFreesItsPlace(t *testing.T) {
	for _, tc := range []struct{ relay, how string }{
		{relayLoop, "terminate"}, {relayLoop, "close"}, {relayGoroutines, "terminate"}, {relayGoroutines, "close"},
	} {
		how := tc.how
		t.Run(tc.relay+"/"+how, func(t *testing.T) {
			e := newPooledLoopEnvWith(t, 1, pgwire.UpstreamTLSDisable, tc.relay)
			holder, hc := e.holdTheConnection(t, "")
			msg := []byte{'Q', 0, 0, 0, 0}
			msg = append(msg, "UPDATE accounts SET balance = 7 WHERE id = 1\x00"...)
			binary.BigEndian.PutUint32(msg[1:], uint32(len(msg)-1))
			if how == "terminate" {
				msg = append(msg, 'X', 0, 0, 0, 4)
			}
			if _, err := hc.Conn.Write(msg); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // queued
			if how == "close" {
				hc.Conn.Close()
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if l := e.proxy.Server().PoolList(); len(l) == 1 && l[0].Waiting == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the client that left is still queued: %+v", e.proxy.Server().PoolList())
				}
			}
			hc.Conn.Close()
			mustExec(t, holder, "COMMIT")
			next := connect(t, e.app, pgx.QueryExecModeExec)
			var bal int
			if err := next.QueryRow(t.Context(), "SELECT balance FROM accounts WHERE id = 1").Scan(&bal); err != nil || bal != 0 {
				t.Fatalf("the next client: balance %d, %v; want 0: the queued UPDATE must not run", bal, err)
			}
			if p := e.waitPool(t); p.Idle != 1 || p.Dials != 1 {
				t.Errorf("pool: %+v, want its one connection idle, dialled once", p)
			}
		})
	}
}

// TestPooledCommitSentWithTheTerminateCommits: a client that sends COMMIT
// and its Terminate in one write, and leaves, has its transaction
// committed, in either relay, as it would be direct.
func TestPooledCommitSentWithTheTerminateCommits(t *testing.T) {
	for _, relay := range []string{relayLoop, relayGoroutines} {
		t.Run(relay, func(t *testing.T) {
			e := newPooledEnvRelay(t, 1, nil, relay)
			c, err := pgconn.Connect(t.Context(), e.app)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Exec(t.Context(), "BEGIN; UPDATE accounts SET balance = 9 WHERE id = 1").Close(); err != nil {
				t.Fatal(err)
			}
			hc, err := c.Hijack()
			if err != nil {
				t.Fatal(err)
			}
			msg := []byte{'Q', 0, 0, 0, 4 + 7, 'C', 'O', 'M', 'M', 'I', 'T', 0, 'X', 0, 0, 0, 4}
			if _, err := hc.Conn.Write(msg); err != nil {
				t.Fatal(err)
			}
			hc.Conn.Close()
			var bal int
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if err := connect(t, e.direct, pgx.QueryExecModeExec).QueryRow(t.Context(), "SELECT balance FROM accounts WHERE id = 1").Scan(&bal); err != nil {
					t.Fatal(err)
				}
				if bal == 9 {
					return
				}
			}
			t.Fatalf("balance %d after COMMIT and Terminate in one write, want 9", bal)
		})
	}
}

// TestPooledSessionLentATLSConnectionLeavesTheLoop: with the pool's server
// connections over TLS (upstream_tls prefer against a server with ssl on),
// which the ring cannot relay, each client leaves the loop at its first
// lending, with it, and is served by the goroutine relay.
func TestPooledSessionLentATLSConnectionLeavesTheLoop(t *testing.T) {
	e := newPooledLoopEnvWith(t, 1, pgwire.UpstreamTLSPrefer, relayLoop)
	const clients = 3
	for i := range clients {
		c := connect(t, e.app, pgx.QueryExecModeExec)
		mustExec(t, c, "BEGIN")
		mustExec(t, c, "UPDATE accounts SET balance = balance + 1 WHERE id = 1")
		mustExec(t, c, "COMMIT")
		var ssl bool
		if err := c.QueryRow(t.Context(), "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
			t.Fatalf("client %d: the lent connection is not over TLS (%v, %v)", i, ssl, err)
		}
	}
	var bal int
	if err := connect(t, e.direct, pgx.QueryExecModeExec).QueryRow(t.Context(), "SELECT balance FROM accounts WHERE id = 1").Scan(&bal); err != nil || bal != clients {
		t.Fatalf("balance %d, %v; want %d", bal, err, clients)
	}
	if n := e.counter(t, "fenceproxy_event_loop_leaves_total", "reason", "upstream_tls"); n != clients {
		t.Errorf("leaves for a lent connection over TLS: %v, want %d", n, clients)
	}
}

// TestPooledTerminateWhileQueuedRunsNothing: an administrator's terminate
// of a client queued for the pool's only connection tells it 57P01 and
// takes it out of the queue with nothing it sent run, in either relay;
// the client holding the connection goes on.
func TestPooledTerminateWhileQueuedRunsNothing(t *testing.T) {
	for _, relay := range []string{relayLoop, relayGoroutines} {
		t.Run(relay, func(t *testing.T) {
			e := newPooledLoopEnvWith(t, 1, pgwire.UpstreamTLSDisable, relay)
			holder, hc := e.holdTheConnection(t, "queued")
			defer hc.Conn.Close()
			fe := pgproto3.NewFrontend(hc.Conn, hc.Conn)
			fe.Send(&pgproto3.Query{String: "UPDATE accounts SET balance = 7 WHERE id = 1"})
			if err := fe.Flush(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if l := e.proxy.Server().PoolList(); len(l) == 1 && l[0].Waiting == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the client never queued: %+v", e.proxy.Server().PoolList())
				}
			}
			terminated := false
			for _, s := range e.proxy.Server().Sessions() {
				if s.ApplicationName == "queued" {
					terminated = e.proxy.Server().Terminate(s.ID)
				}
			}
			if !terminated {
				t.Fatal("terminate found no queued session")
			}
			hc.Conn.SetReadDeadline(time.Now().Add(5 * time.Second)) // told at once, not when the connection is free
			expectFatalFE(t, fe, hc.Conn, "57P01")
			mustExec(t, holder, "COMMIT")
			var bal int
			if err := holder.QueryRow(t.Context(), "SELECT balance FROM accounts WHERE id = 1").Scan(&bal); err != nil || bal != 0 {
				t.Fatalf("balance %d, %v; want 0: the queued UPDATE must not run", bal, err)
			}
			if p := e.waitPool(t); p.Idle != 1 || p.Waiting != 0 {
				t.Errorf("pool: %+v, want its one connection idle, no one queued", p)
			}
		})
	}
}
