package integration

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func TestProtocolExtended(t *testing.T) {
	e := newEnv(t)
	rc := readyConn(t, e, "")
	rc.SetDeadline(time.Now().Add(20 * time.Second))
	// A named statement, a named portal with a row limit (PortalSuspended),
	// Describe of both, Flush in the middle, then Close and Sync.
	rc.fe.SendParse(&pgproto3.Parse{Name: "s1", Query: "SELECT g FROM generate_series(1, $1::int) g"})
	rc.fe.SendDescribe(&pgproto3.Describe{ObjectType: 'S', Name: "s1"})
	rc.fe.Send(&pgproto3.Flush{})
	rc.flush()
	if got, _ := rc.until('T'); got != "1tT" {
		t.Fatalf("Parse+Describe(S)+Flush replies %q, want 1tT", got)
	}
	rc.fe.SendBind(&pgproto3.Bind{DestinationPortal: "p1", PreparedStatement: "s1", Parameters: [][]byte{[]byte("5")}})
	rc.fe.SendDescribe(&pgproto3.Describe{ObjectType: 'P', Name: "p1"})
	rc.fe.SendExecute(&pgproto3.Execute{Portal: "p1", MaxRows: 2})
	rc.fe.SendExecute(&pgproto3.Execute{Portal: "p1", MaxRows: 2})
	rc.fe.SendExecute(&pgproto3.Execute{Portal: "p1"})
	rc.fe.SendClose(&pgproto3.Close{ObjectType: 'P', Name: "p1"})
	rc.fe.SendClose(&pgproto3.Close{ObjectType: 'S', Name: "s1"})
	rc.fe.SendSync(&pgproto3.Sync{})
	rc.flush()
	got, msgs := rc.until('Z')
	if got != "2TDDsDDsDC33Z" {
		t.Fatalf("replies %q, want 2TDDsDDsDC33Z", got)
	}
	if cc := msgs[len(msgs)-4].(*pgproto3.CommandComplete); string(cc.CommandTag) != "SELECT 1" {
		t.Errorf("last Execute tag %q", cc.CommandTag)
	}
	// The statement is gone: using it is an error, and Sync recovers.
	rc.fe.SendBind(&pgproto3.Bind{PreparedStatement: "s1"})
	rc.fe.SendExecute(&pgproto3.Execute{})
	rc.fe.SendSync(&pgproto3.Sync{})
	rc.flush()
	got, msgs = rc.until('Z')
	if got != "EZ" || msgs[0].(*pgproto3.ErrorResponse).Code != "26000" {
		t.Fatalf("Bind of closed statement: %q %+v, want EZ with 26000", got, msgs[0])
	}
	// Empty query in the extended protocol.
	rc.fe.SendParse(&pgproto3.Parse{Query: ""})
	rc.fe.SendBind(&pgproto3.Bind{})
	rc.fe.SendExecute(&pgproto3.Execute{})
	rc.fe.SendSync(&pgproto3.Sync{})
	rc.flush()
	if got, _ := rc.until('Z'); got != "12IZ" {
		t.Fatalf("empty extended query replies %q, want 12IZ", got)
	}
}

func TestProtocolFunctionCall(t *testing.T) {
	e := newEnv(t)
	rc := readyConn(t, e, "")
	rc.SetDeadline(time.Now().Add(20 * time.Second))
	rc.fe.Send(&pgproto3.Query{String: "SELECT 'pg_catalog.int4pl'::regproc::oid"})
	rc.flush()
	_, msgs := rc.until('Z')
	oid := string(msgs[1].(*pgproto3.DataRow).Values[0])
	var fn uint32
	for _, c := range oid {
		fn = fn*10 + uint32(c-'0')
	}
	rc.fe.Send(&pgproto3.FunctionCall{Function: fn, ArgFormatCodes: []uint16{0}, Arguments: [][]byte{[]byte("40"), []byte("2")}, ResultFormatCode: 0})
	rc.flush()
	got, msgs := rc.until('Z')
	if got != "VZ" || string(msgs[0].(*pgproto3.FunctionCallResponse).Result) != "42" {
		t.Fatalf("FunctionCall replies %q %+v, want V(42)Z", got, msgs[0])
	}
}

func TestUpstreamUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens here now
	proxy := harness.StartProxy(t, pgwire.Config{Upstream: dead, DialTimeout: 2 * time.Second})
	start := time.Now()
	_, err = pgx.Connect(t.Context(), proxy.DSN("postgres", "", "postgres"))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.HasPrefix(pgErr.Code, "08") {
		t.Fatalf("connect through proxy to a dead upstream: %v, want SQLSTATE class 08", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestUpstreamDiesMidSession(t *testing.T) {
	e := newEnv(t)
	conn := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	var pid int
	if err := conn.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	// Kill the backend abruptly (SIGKILL would restart the whole cluster;
	// terminating it closes its socket just the same for the proxy).
	mustExec(t, admin, "SELECT pg_terminate_backend($1)", pid)
	start := time.Now()
	_, err := conn.Exec(t.Context(), "SELECT 1")
	if err == nil {
		t.Fatal("query on a dead upstream succeeded")
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || (pgErr.Code != "57P01" && !strings.HasPrefix(pgErr.Code, "08")) {
		// pgx may see the close before the error; either way it must not hang.
		t.Logf("error after upstream death: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to notice", d)
	}
	if !conn.IsClosed() {
		t.Error("connection still open after the upstream died")
	}
}

// TestUpstreamVanishes uses a fake upstream that accepts, completes
// authentication and then drops the connection: the client must get an 08
// error, not a hang.
func TestUpstreamVanishes(t *testing.T) {
	upstream := fakeUpstream(t, func(c net.Conn) {
		be := pgproto3.NewBackend(c, c)
		if _, err := be.ReceiveStartupMessage(); err != nil {
			return
		}
		be.Send(&pgproto3.AuthenticationOk{})
		be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{1, 2, 3, 4}})
		be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		be.Flush()
		answerProbe(be)
		be.Receive() // the client's first query
	})
	proxy := harness.StartProxy(t, pgwire.Config{Upstream: upstream})
	conn, err := pgconn.Connect(t.Context(), proxy.DSN("postgres", "", "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	_, err = conn.Exec(t.Context(), "SELECT 1").ReadAll()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "08006" {
		t.Fatalf("got %v, want SQLSTATE 08006", err)
	}
}

// answerProbe answers the proxy's startup probe of lock.fencing_token: no
// token.
func answerProbe(be *pgproto3.Backend) {
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		switch msg.(type) {
		case *pgproto3.Close:
			be.Send(&pgproto3.CloseComplete{})
		case *pgproto3.Parse:
			be.Send(&pgproto3.ParseComplete{})
		case *pgproto3.Bind:
			be.Send(&pgproto3.BindComplete{})
		case *pgproto3.Execute:
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
		case *pgproto3.Sync:
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			be.Flush()
			return
		}
	}
}

// fakeUpstream listens on a loopback port until the test ends and runs serve
// on the first connection, closing it afterwards. It returns the address.
func fakeUpstream(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	return ln.Addr().String()
}
