package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Raw connections: every test that speaks the protocol itself, to send
// exactly the messages it wants (a pipeline no driver sends, bytes no
// driver writes), opens its connection here. Two levels:
//
//   - wireConn: a TCP connection past startup with a pgproto3 Frontend;
//     the test sends frontend messages and reads the replies itself or as
//     a transcript of reply types ("TDCZ", "E{55Z01}Z").
//   - rawConnect/rawExec/rawSetup: a pgconn session, simple protocol, no
//     driver-side encoding or statement cache.

// wireConn is a raw protocol session. It is a net.Conn (for tests that
// write bytes) with the Frontend that read its startup.
type wireConn struct {
	net.Conn
	t       *testing.T
	fe      *pgproto3.Frontend
	startup []string // the ParameterStatus of the startup, "name=value"
	key     *pgproto3.BackendKeyData
}

// dialBare opens a TCP connection to addr and sends nothing; it is closed
// at the end of the test, and its reads and writes give up after 10 s.
func dialBare(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn
}

// startupPacket is the StartupMessage with params.
func startupPacket(t *testing.T, params map[string]string) []byte {
	b, err := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: params}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openWire opens a session at addr with the startup parameters params and
// reads up to its first ReadyForQuery, failing on an error.
func openWire(t *testing.T, addr string, params map[string]string) *wireConn {
	t.Helper()
	c := &wireConn{Conn: dialBare(t, addr), t: t}
	c.fe = pgproto3.NewFrontend(c.Conn, c.Conn)
	if _, err := c.Write(startupPacket(t, params)); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			t.Fatalf("startup: %v", err)
		}
		switch m := msg.(type) {
		case *pgproto3.ParameterStatus:
			c.startup = append(c.startup, m.Name+"="+m.Value)
		case *pgproto3.BackendKeyData:
			c.key = &pgproto3.BackendKeyData{ProcessID: m.ProcessID, SecretKey: append([]byte(nil), m.SecretKey...)}
		case *pgproto3.ErrorResponse:
			t.Fatalf("startup: %s %s", m.Code, m.Message)
		case *pgproto3.ReadyForQuery:
			return c
		}
	}
}

// readyConn is a raw session through e's proxy; a non-empty app tags its
// backend (application_name) so the test can watch the upstream side.
func readyConn(t *testing.T, e *env, app string) *wireConn {
	t.Helper()
	params := map[string]string{"user": pgcluster.Superuser, "database": e.db}
	if app != "" {
		params["application_name"] = app
	}
	return openWire(t, e.proxy.Addr, params)
}

// directConn is a raw session straight to e's PostgreSQL.
func directConn(t *testing.T, e *env) *wireConn {
	t.Helper()
	return openWire(t, e.pg.Addr(), map[string]string{"user": pgcluster.Superuser, "database": e.db})
}

// send buffers msgs; flush sends them.
func (c *wireConn) send(msgs ...pgproto3.FrontendMessage) {
	for _, m := range msgs {
		c.fe.Send(m)
	}
}

func (c *wireConn) flush() {
	c.t.Helper()
	if err := c.fe.Flush(); err != nil {
		c.t.Fatal(err)
	}
}

// transcript sends msgs and reads replies until ready ReadyForQuery
// arrived, the connection ends (" CLOSED") or 5 s pass (" TIMEOUT"),
// answering a CopyInResponse with CopyDone. It returns the reply types,
// each error's SQLSTATE in braces: "TDCZ", "E{55Z01}Z".
func (c *wireConn) transcript(ready int, msgs ...pgproto3.FrontendMessage) string {
	c.t.Helper()
	return c.transcriptCopy(ready, nil, []pgproto3.FrontendMessage{&pgproto3.CopyDone{}}, msgs...)
}

// transcriptWithCopy is transcript answering a CopyInResponse with lines
// as CopyData, then CopyDone.
func (c *wireConn) transcriptWithCopy(ready int, lines []string, msgs ...pgproto3.FrontendMessage) string {
	c.t.Helper()
	return c.transcriptCopy(ready, lines, []pgproto3.FrontendMessage{&pgproto3.CopyDone{}}, msgs...)
}

// transcriptCopy is transcript answering a CopyInResponse with lines as
// CopyData, then end.
func (c *wireConn) transcriptCopy(ready int, lines []string, end []pgproto3.FrontendMessage, msgs ...pgproto3.FrontendMessage) string {
	c.t.Helper()
	c.send(msgs...)
	c.flush()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	var b strings.Builder
	for ready > 0 {
		msg, err := c.fe.Receive()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				b.WriteString(" TIMEOUT")
			} else {
				b.WriteString(" CLOSED")
			}
			return b.String()
		}
		writeReply(c.t, &b, msg)
		switch msg.(type) {
		case *pgproto3.ReadyForQuery:
			ready--
		case *pgproto3.CopyInResponse:
			for _, line := range lines {
				c.fe.Send(&pgproto3.CopyData{Data: []byte(line + "\n")})
			}
			c.send(end...)
			c.flush()
		}
	}
	return b.String()
}

// drain sends msgs and reads replies for d: a transcript of a pipeline
// ended by Flush, which has no ReadyForQuery to count.
func (c *wireConn) drain(d time.Duration, msgs ...pgproto3.FrontendMessage) string {
	c.t.Helper()
	c.send(msgs...)
	c.flush()
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	var b strings.Builder
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				b.WriteString(" CLOSED")
			}
			return b.String()
		}
		writeReply(c.t, &b, msg)
	}
}

// writeReply appends msg's type letter to b, and an error's SQLSTATE in
// braces (logging its message).
func writeReply(t *testing.T, b *strings.Builder, msg pgproto3.BackendMessage) {
	buf, _ := msg.Encode(nil)
	b.WriteByte(buf[0])
	if m, ok := msg.(*pgproto3.ErrorResponse); ok {
		fmt.Fprintf(b, "{%s}", m.Code)
		t.Logf("error %s %s", m.Code, m.Message)
	}
}

// readyCount reads replies until n ReadyForQuery arrived or d passes, and
// returns the error codes and rows seen and whether it timed out.
func (c *wireConn) readyCount(n int, d time.Duration) (codes []string, rows int, timedOut bool) {
	c.t.Helper()
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	for ready := 0; ready < n; {
		msg, err := c.fe.Receive()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return codes, rows, true
			}
			c.t.Fatalf("after %d ReadyForQuery: %v", ready, err)
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			codes = append(codes, m.Code)
		case *pgproto3.DataRow:
			rows++
		case *pgproto3.ReadyForQuery:
			ready++
		}
	}
	return codes, rows, false
}

// await flushes what was sent and waits up to 10 s for n ReadyForQuery,
// failing on a timeout (a hang); it returns the error codes and rows seen.
func (c *wireConn) await(n int) (codes []string, rows int) {
	c.t.Helper()
	c.flush()
	codes, rows, to := c.readyCount(n, 10*time.Second)
	if to {
		c.t.Fatalf("timed out: codes %v rows %d", codes, rows)
	}
	c.t.Logf("codes %v rows %d", codes, rows)
	return codes, rows
}

// wantUsable fails unless the session answers SELECT 1 with one row.
func (c *wireConn) wantUsable() {
	c.t.Helper()
	if got := c.transcript(1, &pgproto3.Query{String: "SELECT 1"}); got != "TDCZ" {
		c.t.Fatalf("SELECT 1 afterwards: %s", got)
	}
}

// query sends a simple Query and reads to its ReadyForQuery, failing on
// an error; it returns the transaction status.
func (c *wireConn) query(sql string) byte {
	c.t.Helper()
	c.send(&pgproto3.Query{String: sql})
	c.flush()
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			c.t.Fatalf("%s: %v", sql, err)
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			c.t.Fatalf("%s: %s %s", sql, m.Code, m.Message)
		case *pgproto3.ReadyForQuery:
			return m.TxStatus
		}
	}
}

// until receives messages up to and including one of type typ and returns
// them all, as their type letters and copies of the decoded values.
func (c *wireConn) until(typ byte) (string, []pgproto3.BackendMessage) {
	c.t.Helper()
	var types strings.Builder
	var msgs []pgproto3.BackendMessage
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			c.t.Fatalf("receive after %q: %v", types.String(), err)
		}
		b, _ := msg.Encode(nil)
		types.WriteByte(b[0])
		msgs = append(msgs, copyMsg(msg)) // Receive reuses message values
		if b[0] == typ {
			return types.String(), msgs
		}
	}
}

func copyMsg(m pgproto3.BackendMessage) pgproto3.BackendMessage {
	switch m := m.(type) {
	case *pgproto3.DataRow:
		vals := make([][]byte, len(m.Values))
		for i, v := range m.Values {
			vals[i] = append([]byte(nil), v...)
		}
		return &pgproto3.DataRow{Values: vals}
	case *pgproto3.CommandComplete:
		return &pgproto3.CommandComplete{CommandTag: append([]byte(nil), m.CommandTag...)}
	case *pgproto3.FunctionCallResponse:
		return &pgproto3.FunctionCallResponse{Result: append([]byte(nil), m.Result...)}
	case *pgproto3.ErrorResponse:
		c := *m
		return &c
	}
	return m
}

// receiveUntil reads fe's messages up to the first of type T and returns it.
func receiveUntil[T pgproto3.BackendMessage](t *testing.T, fe *pgproto3.Frontend) T {
	t.Helper()
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := msg.(T); ok {
			return m
		}
	}
}

// expectFatal reads the session's messages until an ErrorResponse, checks
// it is FATAL with code, and then expects the proxy to close the
// connection.
func (c *wireConn) expectFatal(code string) *pgproto3.ErrorResponse {
	c.t.Helper()
	return expectFatalFE(c.t, c.fe, c.Conn, code)
}

// expectFatal is wireConn.expectFatal on a bare connection.
func expectFatal(t *testing.T, conn net.Conn, code string) *pgproto3.ErrorResponse {
	t.Helper()
	return expectFatalFE(t, pgproto3.NewFrontend(conn, conn), conn, code)
}

func expectFatalFE(t *testing.T, fe *pgproto3.Frontend, conn net.Conn, code string) *pgproto3.ErrorResponse {
	t.Helper()
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("want ErrorResponse %s, got %v", code, err)
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			if e.Code != code || e.Severity != "FATAL" {
				t.Fatalf("got %s %s %q, want FATAL %s", e.Severity, e.Code, e.Message, code)
			}
			c := *e
			expectClosed(t, conn)
			return &c
		}
	}
}

// expectClosed reads until the proxy closes conn.
func expectClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %d more bytes", n)
	}
}

// pbe is Parse, Bind and Execute of text as the unnamed statement and
// portal.
func pbe(text string) []pgproto3.FrontendMessage {
	return []pgproto3.FrontendMessage{&pgproto3.Parse{Query: text}, &pgproto3.Bind{}, &pgproto3.Execute{}}
}

// pipeline joins message lists.
func pipeline(parts ...[]pgproto3.FrontendMessage) []pgproto3.FrontendMessage {
	var out []pgproto3.FrontendMessage
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// rawConnect opens a pgconn session at dsn, closed at the end of the test.
func rawConnect(t *testing.T, dsn string) *pgconn.PgConn {
	t.Helper()
	return rawConnectParams(t, dsn, nil)
}

// rawConnectParams is rawConnect with extra startup parameters.
func rawConnectParams(t *testing.T, dsn string, params map[string]string) *pgconn.PgConn {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	c, err := pgconn.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("connect with %v: %v", params, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// rawExec runs sql with the simple protocol on a low-level connection (no
// driver-side encoding) and returns the first error.
func rawExec(t *testing.T, c *pgconn.PgConn, sql string) error {
	t.Helper()
	_, err := c.Exec(t.Context(), sql).ReadAll()
	return err
}

// rawSetup runs each statement on c, failing on any error.
func rawSetup(t *testing.T, c *pgconn.PgConn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if err := rawExec(t, c, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// errCode is err's SQLSTATE, "" for no error and "? message" for an error
// without one.
func errCode(err error) string {
	if err == nil {
		return ""
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return "? " + err.Error()
}
