package integration

import (
	"context"
	"encoding/binary"
	"fmt"
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

// TestPooledSessionTokenLeftByFunctionIsNeverRead: a function that sets
// lock.fencing_token and lock.resource for the session (opaque code the
// gate cannot see into) leaves them on the shared connection; another
// client's checks never take them as its own, and its writes in every
// form pass or are refused on its own tokens alone.
func TestPooledSessionTokenLeftByFunctionIsNeverRead(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, nil)
	if err := harness.Exec(t.Context(), e.direct,
		`CREATE FUNCTION leave_token(tok text, res text) RETURNS text LANGUAGE sql AS
		 $$ SELECT set_config('lock.fencing_token', tok, false) || set_config('lock.resource', res, false) $$`,
	); err != nil {
		t.Fatal(err)
	}
	a := connect(t, e.app, pgx.QueryExecModeExec)
	for _, form := range []string{"session", "set local", "comment"} {
		t.Run(form, func(t *testing.T) {
			res := "acct/left/" + strings.ReplaceAll(form, " ", "-")
			// The current holder is 42; a's function leaves a newer token
			// (99) for the resource on the connection.
			mark := connect(t, e.app, pgx.QueryExecModeExec)
			if err := fencedWrite(t, mark, "comment", res, 42, 42); err != nil {
				t.Fatalf("holder 42: %v", err)
			}
			if _, err := a.Exec(t.Context(), "SELECT leave_token('99', $1)", res); err != nil {
				t.Logf("a's function refused: %v", err)
			}
			b := connect(t, e.app, pgx.QueryExecModeExec)
			wantCode(t, fencedWrite(t, b, form, res, 41, 41), "55Z01")
			if bal := e.balance(t); bal != 42 {
				t.Fatalf("balance %d: stale b landed", bal)
			}
			if err := fencedWrite(t, b, form, res, 43, 43); err != nil {
				t.Fatalf("b with the newest token 43: %v", err)
			}
		})
	}
}

// TestPooledProxyNamesAreRefused: a client cannot Parse, Bind, Describe,
// Close or Execute a name under the proxy's reserved prefix, the prefix
// of every other client's statement on the shared connection.
func TestPooledProxyNamesAreRefused(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, nil)
	a := connect(t, e.app, pgx.QueryExecModeCacheStatement)
	var n int
	if err := a.QueryRow(t.Context(), "SELECT 41 + $1::int", 1).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var names []string
	rows, err := connect(t, e.app, pgx.QueryExecModeSimpleProtocol).Query(t.Context(), "SELECT name FROM pg_prepared_statements")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		names = append(names, s)
	}
	t.Logf("server statements: %q", names)
	b := e.wire(t, nil)
	for _, name := range append(names, "fenceproxy\x1fs1", "fenceproxy\x1fcheck") {
		for _, msgs := range [][]pgproto3.FrontendMessage{
			{&pgproto3.Bind{PreparedStatement: name}, &pgproto3.Execute{}},
			{&pgproto3.Describe{ObjectType: 'S', Name: name}},
			{&pgproto3.Close{ObjectType: 'S', Name: name}},
			{&pgproto3.Parse{Name: name, Query: "SELECT 666"}},
			{&pgproto3.Bind{DestinationPortal: name}, &pgproto3.Execute{Portal: name}},
		} {
			got := replyTypes(b.transcript(1, append(msgs, &pgproto3.Sync{})...))
			if got != "EZ" {
				t.Errorf("%T of %q: %s", msgs[0], name, got)
			}
		}
	}
	if err := a.QueryRow(t.Context(), "SELECT 41 + $1::int", 1).Scan(&n); err != nil || n != 42 {
		t.Fatalf("a's statement afterwards: %d %v", n, err)
	}
}

// TestPooledForeignUnnamedStatementNeverRuns: a client that never
// prepared the unnamed statement binds it on the connection where another
// client's is: it gets the server's error, never the other's rows.
func TestPooledForeignUnnamedStatementNeverRuns(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, nil)
	a := e.wire(t, nil)
	b := e.wire(t, nil)
	if got := a.transcript(1, &pgproto3.Parse{Query: "SELECT 'secret of a'"}, &pgproto3.Sync{}); got != "1Z" {
		t.Fatalf("a's parse: %s", got)
	}
	for _, msgs := range [][]pgproto3.FrontendMessage{
		{&pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}},
		{&pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Sync{}},
		{&pgproto3.Execute{}, &pgproto3.Sync{}},
		{&pgproto3.Close{ObjectType: 'S'}, &pgproto3.Sync{}},
	} {
		if got := replyTypes(b.transcript(1, msgs...)); strings.ContainsAny(got, "DTt2") {
			t.Errorf("b's %T of the unnamed statement: %s", msgs[0], got)
		}
	}
	a.send(&pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	a.flush()
	if types, _ := a.until('Z'); types != "2DCZ" {
		t.Fatalf("a's own unnamed statement afterwards: %s", types)
	}
}

// TestPooledWaiterTimesOutAlone: while one client holds the only server
// connection in a transaction, another waits query_wait_timeout, is told
// 53300 and closed; the holder goes on, and a later client is served.
func TestPooledWaiterTimesOutAlone(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{WaitTimeout: 300 * time.Millisecond}, nil)
	holder := e.wire(t, nil)
	waiters := make([]*wireConn, 4)
	for i := range waiters {
		waiters[i] = e.wire(t, nil)
	}
	holder.query("BEGIN")
	var wg sync.WaitGroup
	for _, w := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.send(&pgproto3.Query{String: "SELECT 1"})
			if err := w.fe.Flush(); err != nil {
				t.Error(err)
				return
			}
			w.SetDeadline(time.Now().Add(5 * time.Second))
			for {
				msg, err := w.fe.Receive()
				if err != nil {
					t.Errorf("waiter: %v before 53300", err)
					return
				}
				if m, ok := msg.(*pgproto3.ErrorResponse); ok {
					if m.Code != "53300" {
						t.Errorf("waiter: %s %s", m.Code, m.Message)
					}
					expectClosed(t, w.Conn)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := holder.query("SELECT 1"); got != 'T' {
		t.Fatalf("holder's transaction status %c", got)
	}
	holder.query("COMMIT")
	e.wire(t, nil).wantUsable()
}

// TestPooledCopyThroughLending: COPY FROM STDIN and TO STDOUT run through
// a lent connection, a COPY that fails in its middle leaves the connection
// usable for the next client, and CopyData, CopyDone or CopyFail sent
// outside COPY reach no one.
func TestPooledCopyThroughLending(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, nil)
	if err := harness.Exec(t.Context(), e.direct, "CREATE TABLE items (n int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	a := e.wire(t, nil)
	b := e.wire(t, nil)
	if got := a.transcriptWithCopy(1, []string{"1", "2"}, &pgproto3.Query{String: "COPY items FROM STDIN"}); got != "GCZ" {
		t.Fatalf("copy in: %s", got)
	}
	if got := a.transcriptWithCopy(1, []string{"3", "x"}, &pgproto3.Query{String: "COPY items FROM STDIN"}); got != "GE{22P02}Z" {
		t.Fatalf("failing copy in: %s", got)
	}
	if got := a.transcriptCopy(1, []string{"4"}, []pgproto3.FrontendMessage{&pgproto3.CopyFail{Message: "no"}}, &pgproto3.Query{String: "COPY items FROM STDIN"}); got != "GE{57014}Z" {
		t.Fatalf("copy fail: %s", got)
	}
	b.send(&pgproto3.CopyData{Data: []byte("5\n")}, &pgproto3.CopyDone{}, &pgproto3.CopyFail{Message: "stray"})
	if got := b.transcript(1, &pgproto3.Query{String: "COPY items TO STDOUT"}); got != "HddcCZ" {
		t.Fatalf("copy out after stray copy messages: %s", got)
	}
	// Extended protocol: COPY's Sync ignored in COPY mode, as libpq sends it.
	got := a.transcriptCopy(1, []string{"6"}, []pgproto3.FrontendMessage{&pgproto3.CopyDone{}, &pgproto3.Sync{}},
		pipeline(pbe("COPY items FROM STDIN"), []pgproto3.FrontendMessage{&pgproto3.Sync{}})...)
	if got != "12GCZ" {
		t.Fatalf("extended copy in: %s", got)
	}
	b.wantUsable()
	a.wantUsable()
	var n int
	if err := connect(t, e.direct, pgx.QueryExecModeExec).QueryRow(t.Context(), "SELECT count(*) FROM items").Scan(&n); err != nil || n < 2 {
		t.Fatalf("%d rows, %v", n, err)
	}
}

// TestPooledSettingsOfRolledBackTransactionStayOut: a reported setting
// SET inside a transaction that rolls back is the client's old value
// again, for it and for the next client.
func TestPooledSettingsOfRolledBackTransactionStayOut(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, nil)
	a := e.wire(t, nil)
	b := e.wire(t, nil)
	a.query("SET TimeZone = 'Asia/Tokyo'")
	a.query("BEGIN")
	a.query("SET TimeZone = 'America/New_York'")
	a.query("SET LOCAL DateStyle = 'SQL, DMY'")
	a.query("SET application_name = 'inside'")
	a.query("ROLLBACK")
	show := func(c *wireConn, q string) string {
		t.Helper()
		c.send(&pgproto3.Query{String: q})
		c.flush()
		types, msgs := c.until('Z')
		if types != "TDCZ" {
			t.Fatalf("%s: %s", q, types)
		}
		return string(msgs[1].(*pgproto3.DataRow).Values[0])
	}
	if got := show(a, "SHOW TimeZone"); got != "Asia/Tokyo" {
		t.Errorf("a's TimeZone after rollback: %s", got)
	}
	if got := show(b, "SHOW TimeZone"); got == "Asia/Tokyo" || got == "America/New_York" {
		t.Errorf("b's TimeZone: %s", got)
	}
	if got := show(b, "SHOW application_name"); got != "" {
		t.Errorf("b's application_name: %q", got)
	}
	if got := show(a, "SHOW application_name"); got != "" {
		t.Errorf("a's application_name after rollback: %q", got)
	}
	if got := show(a, "SHOW DateStyle"); got != "ISO, MDY" {
		t.Errorf("a's DateStyle after rollback: %s", got)
	}
}

// replyTypes is a transcript without its SQLSTATEs.
func replyTypes(transcript string) string {
	var b strings.Builder
	skip := false
	for _, r := range transcript {
		switch {
		case r == '{':
			skip = true
		case r == '}':
			skip = false
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestPooledPipelinedUnitsKeepTheirConnection: a client that pipelines
// units (a Sync, then more messages without waiting, Flushes, stray copy
// messages, a lone Sync) while others wait for the one connection gets
// all its own replies, in order, and the others theirs.
func TestPooledPipelinedUnitsKeepTheirConnection(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, nil)
	a := e.wire(t, nil)
	others := make([]*pgx.Conn, 4)
	for i := range others {
		others[i] = connect(t, e.app, pgx.QueryExecModeExec)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i, c := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				var got int
				if err := c.QueryRow(t.Context(), "SELECT $1::int * 1000 + $2::int", i, j).Scan(&got); err != nil || got != i*1000+j {
					t.Errorf("other %d: %d %v", i, got, err)
					return
				}
			}
		}()
	}
	for round := range 30 {
		var msgs []pgproto3.FrontendMessage
		want := ""
		for k := range 4 {
			v := fmt.Sprintf("'%d-%d'", round, k)
			msgs = append(msgs, &pgproto3.Parse{Query: "SELECT " + v}, &pgproto3.Bind{}, &pgproto3.Flush{}, &pgproto3.Execute{}, &pgproto3.Sync{},
				&pgproto3.Flush{}, &pgproto3.CopyData{Data: []byte("x")}, &pgproto3.CopyDone{}, &pgproto3.Sync{},
				&pgproto3.Query{String: "SELECT " + v})
			want += "12DCZ" + "Z" + "TDCZ"
		}
		a.send(msgs...)
		a.flush()
		a.SetDeadline(time.Now().Add(10 * time.Second))
		var b strings.Builder
		var vals []string
		for strings.Count(b.String(), "Z") < 12 {
			msg, err := a.fe.Receive()
			if err != nil {
				t.Fatalf("round %d after %s: %v", round, b.String(), err)
			}
			writeReply(t, &b, msg)
			if d, ok := msg.(*pgproto3.DataRow); ok {
				vals = append(vals, string(d.Values[0]))
			}
		}
		if b.String() != want {
			t.Fatalf("round %d: %s, want %s", round, b.String(), want)
		}
		for k, v := range vals {
			if want := fmt.Sprintf("%d-%d", round, k/2); v != want {
				t.Fatalf("round %d: row %d is %q, want %q", round, k, v, want)
			}
		}
	}
	close(stop)
	wg.Wait()
}

// TestPooledTerminateMidTransactionRollsBack: a client that leaves (or
// sends Terminate) inside a transaction, or in the middle of a message,
// frees the connection for the waiting client, and nothing of its
// transaction is kept.
func TestPooledTerminateMidTransactionRollsBack(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{}, nil)
	b := e.wire(t, nil)
	for _, end := range []string{"terminate", "close", "half message"} {
		a := e.wire(t, nil)
		a.query("BEGIN")
		a.query("UPDATE accounts SET balance = 666 WHERE id = 1")
		a.query("SET TimeZone = 'Asia/Tokyo'")
		done := make(chan string, 1)
		go func() {
			done <- b.transcript(1, &pgproto3.Query{String: "SELECT balance, current_setting('TimeZone') FROM accounts"})
		}()
		time.Sleep(50 * time.Millisecond)
		switch end {
		case "terminate":
			a.send(&pgproto3.Terminate{})
			a.flush()
		case "half message":
			a.Write([]byte{'Q', 0, 0, 0, 100, 'S', 'E'})
			time.Sleep(20 * time.Millisecond)
		}
		a.Close()
		if got := <-done; got != "TDCZ" {
			t.Fatalf("%s: b waiting: %s", end, got)
		}
		if bal := e.balance(t); bal != 0 {
			t.Fatalf("%s: balance %d kept", end, bal)
		}
	}
}

// TestPooledUnreadResultsBlockOnlyTheirPool: a client that holds the
// connection and never reads its results blocks itself and the clients
// of its pool, not the proxy: another database's client is served.
func TestPooledUnreadResultsBlockOnlyTheirPool(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{WaitTimeout: 500 * time.Millisecond}, nil)
	pg := harness.Postgres(t)
	other := harness.CreateDB(t, pg)
	harness.Migrate(t, pg.DSN(pgcluster.Superuser, other))
	a := e.wire(t, nil)
	a.send(&pgproto3.Query{String: "BEGIN; SELECT repeat('x', 1000) FROM generate_series(1, 100000)"})
	a.flush()
	time.Sleep(300 * time.Millisecond)
	c := openWire(t, e.proxy.Addr, map[string]string{"user": pgcluster.Superuser, "database": other})
	c.wantUsable()
	// A client of the blocked pool waits at its login (which needs a
	// server connection for the first parameters) and is told why.
	b := dialBare(t, e.proxy.Addr)
	if _, err := b.Write(startupPacket(t, map[string]string{"user": pgcluster.Superuser, "database": e.db})); err != nil {
		t.Fatal(err)
	}
	expectFatal(t, b, "53300")
	c.wantUsable()
}

// TestPooledStatementPreparedAgainUnderOtherLexingNeverRunsUnchecked: a
// statement the gate read under standard_conforming_strings on is prepared
// again by setup on a new server connection under the client's setting of
// that lending (off), where the server reads other SQL: set_config, then
// a function that writes. The client turns the setting back on inside its
// transaction, so the settings at the Execute are those of the Parse; the
// Execute is refused, and the stale holder's write never lands.
func TestPooledStatementPreparedAgainUnderOtherLexingNeverRunsUnchecked(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{Lifetime: time.Second}, nil)
	if err := harness.Exec(t.Context(), e.direct,
		`CREATE FUNCTION w() RETURNS int LANGUAGE sql AS $$ UPDATE accounts SET balance = 666 WHERE id = 1 RETURNING 1 $$`,
	); err != nil {
		t.Fatal(err)
	}
	const res = "acct/lex"
	holder := connect(t, e.app, pgx.QueryExecModeExec)
	if err := fencedWrite(t, holder, "comment", res, 42, 42); err != nil {
		t.Fatalf("holder 42: %v", err)
	}
	a := e.wire(t, nil)
	a.query("SET lock.resource = '" + res + "'")
	a.query("SET lock.fencing_token = 41")
	// Under standard_conforming_strings on: three set_config calls (a
	// hand-over, which runs without a check). Under off:
	// set_config('x.a', …) AS a, public.w() AS b -- …
	const text = `SELECT pg_catalog.set_config('lock.fencing_token', '41', true), pg_catalog.set_config('x.a', 'v\', true), pg_catalog.set_config(', true) AS a, public.w() AS b --', 'w', true)`
	if got := a.transcript(1, &pgproto3.Parse{Name: "s", Query: text}, &pgproto3.Sync{}); got != "1Z" {
		t.Fatalf("parse: %s", got)
	}
	a.query("SET standard_conforming_strings = off")
	time.Sleep(2500 * time.Millisecond) // past Lifetime: the next lending gets a new server connection
	a.query("BEGIN")
	a.query("SET LOCAL standard_conforming_strings = on")
	if got := a.transcript(1, &pgproto3.Bind{PreparedStatement: "s"}, &pgproto3.Execute{}, &pgproto3.Sync{}); !strings.HasPrefix(got, "2E{0A000}") {
		t.Errorf("Bind, Execute: %s, want the Execute refused (2E{0A000}…)", got)
	}
	a.transcript(1, &pgproto3.Query{String: "COMMIT"})
	if bal := e.balance(t); bal != 42 {
		t.Fatalf("balance %d: a write ran with the stale token 41 and no check", bal)
	}
}

// TestPooledStatementNameTakenByOtherCodeEndsTheSession: code a client ran
// (a DO block's EXECUTE) prepared a statement on a server connection under
// the name the proxy gave another client's statement. When setup prepares
// the client's statement there, the server refuses the name (42P05); the
// connection is closed and the client's session ends, and the Bind never
// runs the other code's statement.
func TestPooledStatementNameTakenByOtherCodeEndsTheSession(t *testing.T) {
	e := hostileEnv(t, pgwire.PoolConfig{Lifetime: time.Second}, nil)
	if err := harness.Exec(t.Context(), e.direct, "CREATE TABLE squat (name text)"); err != nil {
		t.Fatal(err)
	}
	a := e.wire(t, nil)
	if got := a.transcript(1, &pgproto3.Parse{Name: "s", Query: "SELECT 1"}, &pgproto3.Sync{}); got != "1Z" {
		t.Fatalf("parse: %s", got)
	}
	b := e.wire(t, nil)
	b.query("INSERT INTO squat SELECT name FROM pg_prepared_statements WHERE position(chr(31) in name) > 0")
	time.Sleep(2500 * time.Millisecond) // past Lifetime: the next lending gets a new server connection
	b.query(`DO $$BEGIN EXECUTE format('PREP' || 'ARE %I AS UPDATE accounts SET balance = 666 WHERE id = 1', (SELECT name FROM squat LIMIT 1)); END$$`)
	got := a.transcript(1, &pgproto3.Bind{PreparedStatement: "s"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if !strings.Contains(got, "E{XX000}") {
		t.Errorf("Bind of the client's statement on the connection: %s, want the session ended (E{XX000})", got)
	}
	if bal := e.balance(t); bal != 0 {
		t.Fatalf("balance %d: the client's Bind ran a statement other code prepared under its name", bal)
	}
}
