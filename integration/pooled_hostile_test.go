package integration

import (
	"context"
	"encoding/binary"
	"io"
	"net"
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
	"github.com/jackc/pgx/v5/pgproto3"
)

// Transaction pool mode against hostile or odd clients: every test here
// shares one server connection between its clients (pool size 1) and
// checks that nothing one client sends, leaves or half-sends reaches
// another's transaction, that no client can make the proxy run SQL of its
// choosing unchecked, and that none blocks or breaks the others.

// hostileEnv is a pooledEnv whose proxy reaches PostgreSQL at upstream
// (a forwarder in front of it, or "" for PostgreSQL itself), with pc's
// pool settings (Size 1 and trust when zero).
func hostileEnv(t *testing.T, pc pgwire.PoolConfig, upstream func(pgAddr string) string) *pooledEnv {
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
	if pc.Size == 0 {
		pc.Size = 1
	}
	pc.AuthMethod = clientauth.Trust
	addr := pg.Addr()
	if upstream != nil {
		addr = upstream(addr)
	}
	e.proxy = harness.StartProxy(t, pgwire.Config{Upstream: addr, Fencing: &gate.Config{Analyzer: gate.NewAnalyzer(1024)}, Pool: &pc})
	e.app = e.proxy.DSN(pgcluster.Superuser, "", db)
	return e
}

// pooledWire opens a raw session through e's proxy with extra startup
// parameters.
func (e *pooledEnv) wire(t *testing.T, params map[string]string) *wireConn {
	t.Helper()
	p := map[string]string{"user": pgcluster.Superuser, "database": e.db}
	for k, v := range params {
		p[k] = v
	}
	return openWire(t, e.proxy.Addr, p)
}

// balance reads account 1's balance straight from PostgreSQL.
func (e *pooledEnv) balance(t *testing.T) int {
	t.Helper()
	var bal int
	if err := connect(t, e.direct, pgx.QueryExecModeExec).QueryRow(t.Context(), "SELECT balance FROM accounts WHERE id = 1").Scan(&bal); err != nil {
		t.Fatal(err)
	}
	return bal
}

// TestPooledStartupValuesRunNoSQL: the values a client sends at startup
// are restored on every lent connection by SQL the proxy writes, hidden
// from the gate. In a client encoding whose multibyte characters may end
// in a backslash byte (SJIS), a value ending such a character must not
// close the literal the proxy wrote and run the rest as SQL unchecked.
func TestPooledStartupValuesRunNoSQL(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, nil)
	// 0x83 0x5C is one SJIS character (ソ); a backslash-escaping writer
	// doubles its second byte.
	payload := "\x83\x5c'; UPDATE accounts SET balance = 666 WHERE id = 1; --"
	conn := dialBare(t, e.proxy.Addr)
	if _, err := conn.Write(startupPacket(t, map[string]string{"user": pgcluster.Superuser, "database": e.db,
		"client_encoding": "SJIS", "application_name": payload})); err != nil {
		t.Fatal(err)
	}
	fe := pgproto3.NewFrontend(conn, conn)
	for {
		msg, err := fe.Receive()
		if err != nil {
			break // the proxy may refuse such a value; it must not run it
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	conn.Close()
	if bal := e.balance(t); bal != 0 {
		t.Fatalf("balance %d: a startup value ran as SQL on the shared connection", bal)
	}
}

// TestPooledSetupQuotesValuesUnderAnyEncoding: a client whose reported
// settings hold quotes and backslashes, in a client-only encoding, gets
// them back exactly on every lending, however the previous client left
// standard_conforming_strings.
func TestPooledSetupQuotesValuesUnderAnyEncoding(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, nil)
	const name = `it's a \ test`
	a := e.wire(t, map[string]string{"client_encoding": "SJIS", "application_name": name})
	b := e.wire(t, nil)
	b.query("SET standard_conforming_strings = off")
	for range 2 {
		b.query("SELECT 1")
		got := a.transcript(1, &pgproto3.Query{String: "SELECT current_setting('application_name')"})
		if got != "TDCZ" {
			t.Fatalf("client a after b: %s", got)
		}
	}
	c := rawConnectParams(t, e.app, map[string]string{"client_encoding": "SJIS", "application_name": name})
	res, err := c.Exec(t.Context(), "SELECT current_setting('application_name')").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res[0].Rows[0][0]); got != name {
		t.Fatalf("application_name %q, want %q", got, name)
	}
}

// TestPooledHalfSentMessageStaysWithItsClient: a client that has sent the
// header and part of a message the server does not answer (CopyData
// outside COPY) when its transaction's ReadyForQuery arrives, and then
// leaves, must not hand the server connection on with the server waiting
// for the rest of that message: the next client's bytes would be read as
// it.
func TestPooledHalfSentMessageStaysWithItsClient(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, nil)
	b := e.wire(t, nil)
	a := e.wire(t, nil)
	a.send(&pgproto3.Query{String: "SELECT pg_sleep(0.3)"})
	a.flush()
	time.Sleep(50 * time.Millisecond) // the Query is read (and flushed) alone
	// CopyData of 100 bytes, 10 of them sent.
	half := []byte{'d', 0, 0, 0, 104}
	half = append(half, strings.Repeat("x", 10)...)
	if _, err := a.Write(half); err != nil {
		t.Fatal(err)
	}
	a.SetDeadline(time.Now().Add(5 * time.Second))
	receiveUntil[*pgproto3.ReadyForQuery](t, a.fe)
	time.Sleep(100 * time.Millisecond) // the proxy waits for the message to end before it releases
	a.Close()
	if got := b.transcript(1, &pgproto3.Query{String: "SELECT 1"}); got != "TDCZ" {
		t.Fatalf("client b after a left mid-message: %s", got)
	}
}

// TestPooledUnnamedStatementSurvivesOtherLogins: a client's unnamed
// statement, prepared in one unit and bound in the next, runs even when
// another client logged in with other settings in between (the setup of
// a login's settings is a Query, which drops the unnamed statement).
func TestPooledUnnamedStatementSurvivesOtherLogins(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, nil)
	a := e.wire(t, nil)
	if got := a.transcript(1, &pgproto3.Parse{Query: "SELECT 'a'"}, &pgproto3.Sync{}); got != "1Z" {
		t.Fatalf("parse: %s", got)
	}
	e.wire(t, map[string]string{"TimeZone": "Asia/Tokyo"})
	a.send(&pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	a.flush()
	types, msgs := a.until('Z')
	if types != "2DCZ" {
		t.Fatalf("bind of the unnamed statement after another login: %s %v", types, msgs)
	}
	if got := string(msgs[1].(*pgproto3.DataRow).Values[0]); got != "a" {
		t.Fatalf("the unnamed statement returned %q, want a's", got)
	}
}

// delayCancels starts a TCP forwarder to target that holds each
// connection whose first packet is a CancelRequest for delay before
// forwarding it, and returns its address: a cancel still on its way when
// the statement it was sent for ends.
func delayCancels(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			go func() {
				defer c.Close()
				var head [8]byte
				if _, err := io.ReadFull(c, head[:]); err != nil {
					return
				}
				if binary.BigEndian.Uint32(head[:4]) == 16 && binary.BigEndian.Uint32(head[4:]) == 80877102 {
					time.Sleep(delay)
				}
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				track(up)
				defer up.Close()
				if _, err := up.Write(head[:]); err != nil {
					return
				}
				go func() {
					io.Copy(up, c)
					up.Close()
				}()
				io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestPooledLateCancelSparesNextClient: a cancel request that reaches the
// server after the statement it was sent for ended (it was forwarded to
// the backend lent then) must not cancel the next client's statement on
// that backend.
func TestPooledLateCancelSparesNextClient(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, func(pg string) string { return delayCancels(t, pg, 600*time.Millisecond) })
	a := e.wire(t, nil)
	b := e.wire(t, nil)
	a.send(&pgproto3.Query{String: "SELECT pg_sleep(0.4)"})
	a.flush()
	time.Sleep(100 * time.Millisecond)
	go sendCancel(t, e.proxy.Addr, a.key.ProcessID, a.key.SecretKey) // reaches the server at about 0.7 s
	a.SetDeadline(time.Now().Add(5 * time.Second))
	receiveUntil[*pgproto3.ReadyForQuery](t, a.fe)
	if got := b.transcript(1, &pgproto3.Query{String: "SELECT pg_sleep(1)"}); got != "TDCZ" {
		t.Fatalf("client b's statement after a's late cancel: %s", got)
	}
}
