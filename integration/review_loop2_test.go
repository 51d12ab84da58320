package integration

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Adversarial review of the event loop against the gate (review-loop2).
// The paths only the loop has: a client message gate holds back (Wait) is
// rewound and read again once the replies have settled, and a session
// leaves the loop for good (a message over the read buffer, a long text,
// a slow message), with a message held or a check in flight. Each test
// sets the mark of acct/1 to 100 and tries to land a write with token 41.

// escapeTrick is one SET for a server with standard_conforming_strings on
// and a SET, an UPDATE and a SELECT for one with it off.
// staleSets gives the session the stale token 41 for acct/1.
const staleSets = "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"

const escapeTrick = `SET application_name = '\' /* '; UPDATE accounts SET balance = 1 WHERE id = 1; SELECT 1 -- */`

// loopRawConn returns a raw session (no token yet) and a function that
// flushes what was sent and waits for n ReadyForQuery.
func loopRawConn(t *testing.T, e *env, app string) (*pgproto3.Frontend, func(n int) ([]string, int)) {
	t.Helper()
	conn := readyConn(t, e, app)
	fe := pgproto3.NewFrontend(conn, conn)
	return fe, func(n int) ([]string, int) {
		t.Helper()
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		codes, rows, to := readyCount(t, conn, fe, n, 10*time.Second)
		if to {
			t.Fatalf("timed out: codes %v rows %d", codes, rows)
		}
		t.Logf("codes %v rows %d", codes, rows)
		return codes, rows
	}
}

// TestLoopWaitThenHandOverByLargeReply: a Query waits (Wait) for the
// ParameterStatus of the Query before it, which turns
// standard_conforming_strings off; that Query's reply holds a row over the
// loop's read buffer, so the session leaves the loop with the message held
// (waitFirst). The held text must be read with the new setting: refused.
func TestLoopWaitThenHandOverByLargeReply(t *testing.T) {
	e := staleEnv(t)
	fe, await := loopRawConn(t, e, "loop2-wait-large")
	fe.Send(&pgproto3.Query{String: "SELECT repeat('x', 200000); " + staleSets + "; SET standard_conforming_strings = off"})
	fe.Send(&pgproto3.Query{String: escapeTrick})
	fe.Send(&pgproto3.Query{String: "SELECT 2"})
	codes, rows := await(3)
	if len(codes) != 2 || codes[0] != "0A000" || codes[1] != "55Z01" || rows != 1 {
		t.Errorf("codes %v rows %d, want [0A000 55Z01] (the SELECT under the stale token) and 1 row", codes, rows)
	}
	e.wantUntouched(t)
}

// TestLoopWaitThenLongText: the held message is followed by a Query over
// the loop's text limit (the session leaves the loop on it after the held
// one was read again); both must be decided with the new setting.
func TestLoopWaitThenLongText(t *testing.T) {
	e := staleEnv(t)
	fe, await := loopRawConn(t, e, "loop2-wait-long")
	pad := " /* " + strings.Repeat("p", 5000) + " */"
	fe.Send(&pgproto3.Query{String: "SELECT pg_sleep(0.2); " + staleSets + "; SET standard_conforming_strings = off"})
	fe.Send(&pgproto3.Query{String: escapeTrick})
	fe.Send(&pgproto3.Query{String: escapeTrick + pad})
	fe.Send(&pgproto3.Query{String: "SET standard_conforming_strings = on"})
	fe.Send(&pgproto3.Query{String: "UPDATE accounts SET balance = 1 WHERE id = 1" + pad})
	codes, _ := await(5)
	if len(codes) != 3 {
		t.Errorf("codes %v, want three refusals", codes)
	}
	e.wantUntouched(t)
}

// TestLoopWaitExtendedHandOverByLargeReply: the same in an extended
// sequence: an Execute turns the setting off and returns a large row,
// and a Parse/Bind/Execute of the trick text follows before Sync.
func TestLoopWaitExtendedHandOverByLargeReply(t *testing.T) {
	e := staleEnv(t)
	fe, await := loopRawConn(t, e, "loop2-wait-ext-large")
	fe.Send(&pgproto3.Query{String: "SELECT repeat('x', 200000); " + staleSets + "; SET standard_conforming_strings = off"})
	fe.Send(&pgproto3.Parse{Name: "t", Query: `WITH a AS (SELECT '\' /* '), u AS (UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING 1) SELECT 1 -- */ ) SELECT 1`})
	fe.Send(&pgproto3.Bind{PreparedStatement: "t"})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	await(2)
	e.wantUntouched(t)
}

// TestLoopHandOverMidTransaction: inside a transaction whose check (valid
// token 200) is still in flight, a Query switches the session to the stale
// token 41 (SET LOCAL through set_config) and the session leaves the loop
// on it — its text over the loop's limit, or its reply over the read
// buffer while the UPDATE under the stale token waits in the client's
// buffer. The UPDATE after it must be checked again, with 41, and refused.
func TestLoopHandOverMidTransaction(t *testing.T) {
	for _, tt := range []struct{ app, switchToken string }{
		{"loop2-mid-tx-long", "SELECT set_config('lock.fencing_token', '41', true) /* " + strings.Repeat("p", 5000) + " */"},
		{"loop2-mid-tx-large", "SELECT repeat('x', 200000), set_config('lock.fencing_token', '41', true)"},
	} {
		t.Run(tt.app, func(t *testing.T) {
			e := staleEnv(t)
			fe, await := loopRawConn(t, e, tt.app)
			fe.Send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 200"})
			fe.Send(&pgproto3.Query{String: "BEGIN"})
			fe.Send(&pgproto3.Query{String: "UPDATE accounts SET balance = balance WHERE id = 1"})
			fe.Send(&pgproto3.Query{String: tt.switchToken})
			fe.Send(&pgproto3.Query{String: "UPDATE accounts SET balance = 1 WHERE id = 1"})
			fe.Send(&pgproto3.Query{String: "COMMIT"})
			codes, _ := await(6)
			if len(codes) == 0 || codes[0] != "55Z01" {
				t.Errorf("codes %v, want the UPDATE under token 41 refused (55Z01)", codes)
			}
			e.wantUntouched(t)
		})
	}
}

// TestLoopHandOverMidExtendedLargeBind: an extended sequence under the
// stale token whose Bind (a 64 KiB parameter) is over the read buffer:
// the session leaves the loop on the Bind; the check at Bind must still
// run.
func TestLoopHandOverMidExtendedLargeBind(t *testing.T) {
	e := staleEnv(t)
	fe, await := loopRawConn(t, e, "loop2-large-bind")
	fe.Send(&pgproto3.Query{String: staleSets})
	fe.Send(&pgproto3.Parse{Name: "u", Query: "UPDATE accounts SET balance = 1 WHERE id = 1 AND $1::text <> ''"})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Parse{Query: "SELECT 1"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Bind{PreparedStatement: "u", Parameters: [][]byte{[]byte(strings.Repeat("v", 64<<10))}})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	codes, _ := await(3)
	if len(codes) != 1 || codes[0] != "55Z01" {
		t.Errorf("codes %v, want [55Z01]", codes)
	}
	e.wantUntouched(t)
}

// TestLoopShutdownWhileMessageHeld: the proxy shuts down while a Query
// waits (Wait) for the answer of the one before it, which turns
// standard_conforming_strings off: the session ends with 57P01 at that
// answer; the held text never runs.
func TestLoopShutdownWhileMessageHeld(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "loop2-shutdown-held")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Query{String: "SELECT pg_sleep(0.5); " + staleSets + "; SET standard_conforming_strings = off"})
	fe.Send(&pgproto3.Query{String: escapeTrick})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- e.proxy.Shutdown(context.Background()) }()
	expectFatalFE(t, fe, conn, "57P01")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	e.wantUntouched(t)
}

// TestLoopCancelWhileMessageHeld: a CancelRequest (on a connection of its
// own) cancels the running Query while the next one is held; the held
// one then runs, decided with the settings the server really has (the
// cancelled Query's SETs are rolled back).
func TestLoopCancelWhileMessageHeld(t *testing.T) {
	e := staleEnv(t)
	conn := dialBare(t, e.proxy.Addr)
	conn.Write(startupPacket(t, map[string]string{"user": pgcluster.Superuser, "database": e.db, "application_name": "loop2-cancel-held"}))
	fe := pgproto3.NewFrontend(conn, conn)
	var key *pgproto3.BackendKeyData
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if k, ok := msg.(*pgproto3.BackendKeyData); ok {
			key = &pgproto3.BackendKeyData{ProcessID: k.ProcessID, SecretKey: append([]byte(nil), k.SecretKey...)}
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	fe.Send(&pgproto3.Query{String: "SET standard_conforming_strings = off; SELECT pg_sleep(5); " + staleSets})
	fe.Send(&pgproto3.Query{String: escapeTrick})
	fe.Send(&pgproto3.Query{String: "SHOW standard_conforming_strings"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	cc, err := net.Dial("tcp", e.proxy.Addr)
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := (&pgproto3.CancelRequest{ProcessID: key.ProcessID, SecretKey: key.SecretKey}).Encode(nil)
	cc.Write(buf)
	cc.Close()
	start := time.Now()
	codes, rows, to := readyCount(t, conn, fe, 3, 10*time.Second)
	t.Logf("codes %v rows %d in %v", codes, rows, time.Since(start))
	if to || time.Since(start) > 3*time.Second {
		t.Fatalf("cancel did not end the sleep: codes %v, timed out %v", codes, to)
	}
	if len(codes) == 0 || codes[0] != "57014" {
		t.Errorf("codes %v, want 57014 first", codes)
	}
	e.wantUntouched(t)
}

// TestHeldMessageDuringCopyIn: a client that sends a Query where the
// server expects COPY data gets an error from PostgreSQL ("unexpected
// message type 0x51 during COPY from stdin"). Through the proxy the Query
// waits (Wait) for the COPY's ReadyForQuery (its unit changed
// client_encoding), which never comes: the server waits for the data held
// behind the Query. The session hung for good, and when the client gave
// up its backend stayed, in its transaction, holding its locks.
func TestHeldMessageDuringCopyIn(t *testing.T) {
	for _, relay := range []string{"loop", "goroutines"} {
		t.Run(relay, func(t *testing.T) {
			e := staleEnv(t)
			addr := e.proxy.Addr
			if relay == "goroutines" {
				addr = harness.StartProxy(t, pgwire.Config{Upstream: e.pg.Addr(), GoroutineRelay: true,
					Fencing: &gate.Config{Analyzer: gate.NewAnalyzer(1024)}}).Addr
			}
			app := "loop2-copy-held-" + relay
			conn, fe := readyConnAt(t, addr, map[string]string{"user": pgcluster.Superuser, "database": e.db, "application_name": app})
			fe.Send(&pgproto3.Query{String: "SET lock.resource = 'acct/9'; SET lock.fencing_token = 1"})
			fe.Send(&pgproto3.Query{String: "SET client_encoding = 'UTF8'; COPY accounts FROM STDIN"})
			if err := fe.Flush(); err != nil {
				t.Fatal(err)
			}
			receiveUntil[*pgproto3.CopyInResponse](t, fe)
			fe.Send(&pgproto3.Query{String: "SELECT 1"})
			if err := fe.Flush(); err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			var code string
			for code == "" {
				msg, err := fe.Receive()
				if err != nil {
					t.Errorf("no error for a Query during COPY FROM STDIN: %v", err)
					break
				}
				if m, ok := msg.(*pgproto3.ErrorResponse); ok {
					code = m.Code
				}
			}
			t.Logf("code %s", code)
			conn.Close()
			waitBackendGone(t, e, app)
		})
	}
}

// TestHeldMessageAfterCopyData: what TestHeldMessageDuringCopyIn refuses
// must not catch a client that ends its COPY before the Query that waits:
// the copy pipelined with the Query that starts it, or sent after the
// CopyInResponse, each with a Query behind it that gate holds back.
func TestHeldMessageAfterCopyData(t *testing.T) {
	e := staleEnv(t)
	for _, wait := range []bool{false, true} {
		conn := readyConn(t, e, "loop2-copy-ok")
		fe := pgproto3.NewFrontend(conn, conn)
		fe.Send(&pgproto3.Query{String: "SET lock.resource = 'acct/9'; SET lock.fencing_token = 1"})
		fe.Send(&pgproto3.Query{String: "SET client_encoding = 'UTF8'; COPY invoices (amount) FROM STDIN"})
		if wait {
			if err := fe.Flush(); err != nil {
				t.Fatal(err)
			}
			receiveUntil[*pgproto3.CopyInResponse](t, fe)
		}
		fe.Send(&pgproto3.CopyData{Data: []byte("7\n")})
		fe.Send(&pgproto3.CopyDone{})
		fe.Send(&pgproto3.Query{String: "SELECT 1"})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		n := 3
		if wait {
			n = 2
		}
		codes, rows, to := readyCount(t, conn, fe, n, 10*time.Second)
		if to || len(codes) > 0 || rows != 1 {
			t.Errorf("wait %v: codes %v rows %d timed out %v", wait, codes, rows, to)
		}
	}
}
