package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// After some statements (DO, CALL, EXECUTE, FETCH, DISCARD ALL, text the
// parser cannot read) the gate pipelines a hidden probe of
// lock.fencing_token (Close, Parse, Bind, Execute, Close, Sync) right after
// the client's message. When the same message left the server in COPY-in
// mode (COPY … FROM STDIN), the server read the probe as bad copy data: the
// COPY failed ("unexpected message type 0x43 during COPY from stdin") and
// the probe's replies came out of order, so the proxy ended the session
// with 08P01.

// copyEnv is a fenced environment with a procedure p() and a table
// invoices(amount); sessions start without a token.
func copyEnv(t *testing.T) *env {
	t.Helper()
	e := staleEnv(t)
	harnessExec(t, e.direct(), "CREATE PROCEDURE p() LANGUAGE sql AS $$ SELECT 1 $$")
	return e
}

func invoices(t *testing.T, e *env) string {
	t.Helper()
	conn := connect(t, e.direct(), pgx.QueryExecModeExec)
	var s string
	if err := conn.QueryRow(t.Context(), "SELECT coalesce(string_agg(amount::text, ',' ORDER BY id), '') FROM invoices").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCopyInProbeSimple: Query texts that need a probe and hold a COPY
// FROM STDIN, anywhere and in any spelling, run their COPY; the probe
// waits for the next Query; the session stays usable.
func TestCopyInProbeSimple(t *testing.T) {
	e := copyEnv(t)
	for i, tc := range []struct{ text, want string }{
		{"CALL p(); COPY invoices (amount) FROM STDIN", "CGCZ"},
		{"DO $$BEGIN NULL; END$$;\n/* ; */ copy INVOICES(amount)from\tstdin  ", "CGCZ"},
		{"COPY invoices (amount) FROM STDIN; CALL p()", "GCCZ"},
	} {
		conn := readyConn(t, e, "")
		line := fmt.Sprint(i + 1)
		if got := conn.transcriptWithCopy(1, []string{line}, &pgproto3.Query{String: tc.text}); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.text, got, tc.want)
			continue
		}
		conn.wantUsable()
	}
	if got := invoices(t, e); got != "1,2,3" {
		t.Errorf("invoices %q, want 1,2,3", got)
	}
}

// TestCopyInAloneAfterProbeInTransaction: a probe answered inside a
// transaction block is due again once the block ends, behind the next
// Query: a COPY FROM STDIN on its own took it for copy data.
func TestCopyInAloneAfterProbeInTransaction(t *testing.T) {
	e := copyEnv(t)
	conn := readyConn(t, e, "")
	if got := conn.transcript(3, &pgproto3.Query{String: "BEGIN"}, &pgproto3.Query{String: "CALL p()"}, &pgproto3.Query{String: "COMMIT"}); got != "CZCZCZ" {
		t.Fatalf("BEGIN, CALL, COMMIT: %s", got)
	}
	if got := conn.transcriptWithCopy(1, []string{"7", "8"}, &pgproto3.Query{String: "COPY invoices (amount) FROM STDIN"}); got != "GCZ" {
		t.Fatalf("COPY alone: %s, want GCZ", got)
	}
	conn.wantUsable()
	if got := invoices(t, e); got != "7,8" {
		t.Errorf("invoices %q, want 7,8", got)
	}
}

// TestCopyOutAfterProbe: COPY … TO STDOUT reads no client message: the
// probe follows it as before, and the rows are right.
func TestCopyOutAfterProbe(t *testing.T) {
	e := copyEnv(t)
	harnessExec(t, e.direct(), "INSERT INTO invoices (amount) VALUES (4), (5)")
	conn := readyConn(t, e, "")
	conn.fe.Send(&pgproto3.Query{String: "CALL p(); COPY (SELECT amount FROM invoices ORDER BY id) TO STDOUT"})
	if err := conn.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	var data, types strings.Builder
	for {
		msg, err := conn.fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		buf, _ := msg.Encode(nil)
		types.WriteByte(buf[0])
		if d, ok := msg.(*pgproto3.CopyData); ok {
			data.Write(d.Data)
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	conn.SetDeadline(time.Time{})
	if types.String() != "CHddcCZ" || data.String() != "4\n5\n" {
		t.Errorf("replies %s, data %q", types.String(), data.String())
	}
	conn.wantUsable()
}

// TestCopyInProbeExtended: a CALL and a COPY FROM STDIN in one
// extended-protocol sequence, the copy sent after a Flush, then Sync: the
// copy lands, and whatever the gate sends behind the Sync (the probe, now
// deferred to the next unit) does not break the session. (This passed
// before the fix too: the client's Sync came after CopyDone.)
func TestCopyInProbeExtended(t *testing.T) {
	e := copyEnv(t)
	conn := readyConn(t, e, "")
	for _, m := range []pgproto3.FrontendMessage{
		&pgproto3.Parse{Query: "CALL p()"}, &pgproto3.Bind{}, &pgproto3.Execute{},
		&pgproto3.Parse{Query: "COPY invoices (amount) FROM STDIN"}, &pgproto3.Bind{}, &pgproto3.Execute{},
		&pgproto3.Flush{},
	} {
		conn.fe.Send(m)
	}
	if err := conn.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	receiveUntil[*pgproto3.CopyInResponse](t, conn.fe)
	conn.SetDeadline(time.Time{})
	// The probe goes behind this Sync: the COPY ended at CopyDone.
	if got := conn.transcript(1, &pgproto3.CopyData{Data: []byte("9\n")}, &pgproto3.CopyDone{}, &pgproto3.Sync{}); got != "CZ" {
		t.Fatalf("replies after the copy %s, want CZ", got)
	}
	conn.wantUsable()
	if got := invoices(t, e); got != "9" {
		t.Errorf("invoices %q, want 9", got)
	}
}

// copyExtended sends a COPY FROM STDIN as libpq's PQexecParams does:
// Parse, Bind, Describe, Execute and Sync at once; on CopyInResponse, the
// lines as CopyData, then end (CopyDone or CopyFail) and another Sync. It
// reads until ready ReadyForQuery arrived (PostgreSQL ignores the first
// Sync when the COPY started, and answers it when the COPY failed before
// reading it), the connection ends or 5 seconds pass, and returns the reply
// types, with each error's SQLSTATE in braces.
func copyExtended(conn *wireConn, ready int, text string, lines []string, end pgproto3.FrontendMessage) string {
	conn.t.Helper()
	return conn.transcriptCopy(ready, lines, []pgproto3.FrontendMessage{end, &pgproto3.Sync{}},
		&pgproto3.Parse{Query: text}, &pgproto3.Bind{}, &pgproto3.Describe{ObjectType: 'P'},
		&pgproto3.Execute{}, &pgproto3.Sync{})
}

// TestCopyInExtendedPipelinedSync: libpq's PQexecParams sends Sync right
// behind the Execute of a COPY FROM STDIN, and another after CopyDone.
// PostgreSQL ignores a Sync (and a Flush) in COPY-in mode, so only the
// second gets ReadyForQuery; the gate expected one per Sync and ended the
// session (08P01, "'T' in reply to message kind 7") at the next Query. Now
// the gate matches the Syncs by the server's answers: the row lands, the
// session stays usable, and so it does after a COPY that failed (bad row,
// CopyFail, missing table, and a BEFORE STATEMENT trigger that fails
// before the server reads the first Sync, which it then answers).
func TestCopyInExtendedPipelinedSync(t *testing.T) {
	e := copyEnv(t)
	harnessExec(t, e.direct(),
		"CREATE TABLE refused (a int)",
		"CREATE FUNCTION no() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'no' USING ERRCODE = 'P0001'; END$$",
		"CREATE TRIGGER no BEFORE INSERT ON refused FOR EACH STATEMENT EXECUTE FUNCTION no()")
	conn := readyConn(t, e, "")
	const cp = "COPY invoices (amount) FROM STDIN"
	for _, tc := range []struct {
		name, text string
		lines      []string
		end        pgproto3.FrontendMessage
		ready      int
		want       string
	}{
		{"copy", cp, []string{"9", "10"}, &pgproto3.CopyDone{}, 1, "12nGCZ"},
		{"bad row", cp, []string{"11", "x"}, &pgproto3.CopyDone{}, 1, "12nGE{22P02}Z"},
		{"copy fail", cp, []string{"12"}, &pgproto3.CopyFail{Message: "no"}, 1, "12nGE{57014}Z"},
		{"missing table", "COPY missing FROM STDIN", nil, &pgproto3.CopyDone{}, 1, "12nE{42P01}Z"},
		{"trigger before first sync", "COPY refused FROM STDIN", []string{"1"}, &pgproto3.CopyDone{}, 2, "12nGE{P0001}ZZ"},
		{"copy again", cp, []string{"13"}, &pgproto3.CopyDone{}, 1, "12nGCZ"},
	} {
		if got := copyExtended(conn, tc.ready, tc.text, tc.lines, tc.end); got != tc.want {
			t.Fatalf("%s: replies %s, want %s", tc.name, got, tc.want)
		}
		conn.wantUsable()
	}
	if got := invoices(t, e); got != "9,10,13" {
		t.Errorf("invoices %q, want 9,10,13", got)
	}
}

// TestCopyInExtendedFenced: the same sequence in a session that holds a
// token: the COPY is checked before its Bind (a stale token refuses it,
// no row lands), and a probe due after CALL waits for the Sync after
// CopyDone, not the one the server ignores.
func TestCopyInExtendedFenced(t *testing.T) {
	e := copyEnv(t)
	conn := readyConn(t, e, "")
	const cp = "COPY invoices (amount) FROM STDIN"
	if got := conn.transcript(1, &pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 99"}); got != "CCZ" {
		t.Fatalf("SET: %s", got)
	}
	if got := copyExtended(conn, 1, cp, []string{"1"}, &pgproto3.CopyDone{}); got != "1E{55Z01}Z" {
		t.Fatalf("stale COPY: %s, want 1E{55Z01}Z", got)
	}
	if got := conn.transcript(1, &pgproto3.Query{String: "SET lock.fencing_token = 100"}); got != "CZ" {
		t.Fatalf("SET: %s", got)
	}
	if got := copyExtended(conn, 1, cp, []string{"2"}, &pgproto3.CopyDone{}); got != "12nGCZ" {
		t.Fatalf("COPY: %s, want 12nGCZ", got)
	}
	conn.wantUsable()
	// CALL, then COPY in one sequence: the probe CALL needs goes behind
	// the last Sync.
	conn2 := readyConn(t, e, "")
	conn2.fe.Send(&pgproto3.Parse{Query: "CALL p()"})
	conn2.fe.Send(&pgproto3.Bind{})
	conn2.fe.Send(&pgproto3.Execute{})
	if got := copyExtended(conn2, 1, cp, []string{"3"}, &pgproto3.CopyDone{}); got != "12C12nGCZ" {
		t.Fatalf("CALL, COPY: %s, want 12C12nGCZ", got)
	}
	conn2.wantUsable()
	if got := invoices(t, e); got != "2,3" {
		t.Errorf("invoices %q, want 2,3", got)
	}
}

// TestCopyInExtendedLibpq: libpq itself (through psycopg's thin ctypes
// binding, psycopg.pq, with Debian's python3-psycopg): PQexecParams of a
// COPY FROM STDIN, PQputCopyData, PQputCopyEnd, PQgetResult, as C programs
// using libpq send it; then a COPY that fails, one the client aborts, and
// a query.
func TestCopyInExtendedLibpq(t *testing.T) {
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import psycopg.pq").Run(); err != nil {
		t.Fatalf("no psycopg for %s: run scripts/install-test-deps.sh (Debian package python3-psycopg): %v", python, err)
	}
	e := copyEnv(t)
	out, err := exec.Command(python, "-c", libpqCopy, e.viaProxy()).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "COPY_IN COMMAND_OK | COPY_IN FATAL_ERROR:22P02 | COPY_IN FATAL_ERROR:57014 | FATAL_ERROR:42P01 | COPY_IN COMMAND_OK | 21,22,23"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("libpq:\n got %s\nwant %s", got, want)
	}
	if got := invoices(t, e); got != "21,22,23" {
		t.Errorf("invoices %q, want 21,22,23", got)
	}
}

const libpqCopy = `
import sys
from psycopg import pq

conn = pq.PGconn.connect(sys.argv[1].encode())
if conn.status != pq.ConnStatus.OK:
    sys.exit(conn.error_message.decode())

def show(r):
    s = pq.ExecStatus(r.status).name
    if r.status == pq.ExecStatus.FATAL_ERROR:
        s += ":" + r.error_field(pq.DiagnosticField.SQLSTATE).decode()
    return s

def copy(sql, lines, fail=None):
    r = conn.exec_params(sql.encode(), [])
    out = [show(r)]
    if r.status == pq.ExecStatus.COPY_IN:
        for line in lines:
            conn.put_copy_data(line.encode())
        conn.put_copy_end(fail)
        while (r := conn.get_result()) is not None:
            out.append(show(r))
    return " ".join(out)

res = [
    copy("COPY invoices (amount) FROM STDIN", ["21\n", "22\n"]),
    copy("COPY invoices (amount) FROM STDIN", ["x\n"]),
    copy("COPY invoices (amount) FROM STDIN", ["9\n"], b"aborted"),
    copy("COPY missing FROM STDIN", []),
    copy("COPY invoices (amount) FROM STDIN", ["23\n"]),
]
r = conn.exec_params(b"SELECT string_agg(amount::text, ',' ORDER BY id) FROM invoices", [])
res.append(show(r) if r.status != pq.ExecStatus.TUPLES_OK else r.get_value(0, 0).decode())
print(" | ".join(res))
`

// TestCopyInExtendedQueryDuringCopy: a Query sent while the server reads
// copy data would be bad copy data to PostgreSQL (an error, then the
// session ends); the proxy refuses it with 08P01 and forwards nothing of
// it: the COPY does not complete, no row lands.
func TestCopyInExtendedQueryDuringCopy(t *testing.T) {
	e := copyEnv(t)
	conn := readyConn(t, e, "")
	for _, m := range []pgproto3.FrontendMessage{
		&pgproto3.Parse{Query: "COPY invoices (amount) FROM STDIN"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{},
	} {
		conn.fe.Send(m)
	}
	if err := conn.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	receiveUntil[*pgproto3.CopyInResponse](t, conn.fe)
	conn.SetDeadline(time.Time{})
	got := conn.transcript(1, &pgproto3.CopyData{Data: []byte("5\n")}, &pgproto3.Query{String: "INSERT INTO invoices (amount) VALUES (6)"}, &pgproto3.CopyDone{}, &pgproto3.Sync{})
	if got != "E{08P01} CLOSED" {
		t.Fatalf("replies %s, want E{08P01} CLOSED", got)
	}
	if got := invoices(t, e); got != "" {
		t.Errorf("invoices %q, want none", got)
	}
}

// TestQueryDuringCopyInIsAnsweredNotHeld: a Query sent where the server
// expects COPY data gets the server's error, not a hang, and its backend
// goes when the client does.
//
// A client that sends a Query where the server expects COPY data gets an
// error from PostgreSQL ("unexpected message type 0x51 during COPY from
// stdin"). Through the proxy the Query waits (Wait) for the COPY's
// ReadyForQuery (its unit changed client_encoding), which never comes: the
// server waits for the data held behind the Query. The session hung for
// good, and when the client gave up its backend stayed, in its transaction,
// holding its locks.
func TestQueryDuringCopyInIsAnsweredNotHeld(t *testing.T) {
	for _, relay := range []string{"loop", "goroutines"} {
		t.Run(relay, func(t *testing.T) {
			e := staleEnv(t)
			addr := e.proxy.Addr
			if relay == "goroutines" {
				addr = harness.StartProxy(t, pgwire.Config{Upstream: e.pg.Addr(), GoroutineRelay: true,
					Fencing: &gate.Config{Analyzer: gate.NewAnalyzer(1024)}}).Addr
			}
			app := "held-copy-held-" + relay
			conn := openWire(t, addr, map[string]string{"user": pgcluster.Superuser, "database": e.db, "application_name": app})
			conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/9'; SET lock.fencing_token = 1"})
			conn.send(&pgproto3.Query{String: "SET client_encoding = 'UTF8'; COPY accounts FROM STDIN"})
			conn.flush()
			receiveUntil[*pgproto3.CopyInResponse](t, conn.fe)
			conn.send(&pgproto3.Query{String: "SELECT 1"})
			conn.flush()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			var code string
			for code == "" {
				msg, err := conn.fe.Receive()
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

// TestHeldQueryAfterCopyDataRuns: a Query held behind a COPY the client
// ended runs.
//
// What TestQueryDuringCopyInIsAnsweredNotHeld refuses must not catch a
// client that ends its COPY before the Query that waits: the copy pipelined
// with the Query that starts it, or sent after the CopyInResponse, each with
// a Query behind it that gate holds back.
func TestHeldQueryAfterCopyDataRuns(t *testing.T) {
	e := staleEnv(t)
	for _, wait := range []bool{false, true} {
		conn := readyConn(t, e, "held-copy-ok")
		conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/9'; SET lock.fencing_token = 1"})
		conn.send(&pgproto3.Query{String: "SET client_encoding = 'UTF8'; COPY invoices (amount) FROM STDIN"})
		if wait {
			conn.flush()
			receiveUntil[*pgproto3.CopyInResponse](t, conn.fe)
		}
		conn.send(&pgproto3.CopyData{Data: []byte("7\n")})
		conn.send(&pgproto3.CopyDone{})
		conn.send(&pgproto3.Query{String: "SELECT 1"})
		conn.flush()
		n := 3
		if wait {
			n = 2
		}
		codes, rows, to := conn.readyCount(n, 10*time.Second)
		if to || len(codes) > 0 || rows != 1 {
			t.Errorf("wait %v: codes %v rows %d timed out %v", wait, codes, rows, to)
		}
	}
}

// TestCopyFromFenced: COPY FROM under a token is checked like a write: it
// advances the mark, and under a stale token it is refused (55Z01) with no
// row copied.
func TestCopyFromFenced(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, c, "SET lock.resource = 'copy'")
	mustExec(t, c, "SET lock.fencing_token = 9")
	n, err := c.CopyFrom(t.Context(), pgx.Identifier{"invoices"}, []string{"amount"}, pgx.CopyFromRows([][]any{{1}, {2}, {3}}))
	if err != nil || n != 3 {
		t.Fatalf("CopyFrom = %d, %v", n, err)
	}
	if m := e.mark(t, "copy"); m != 9 {
		t.Fatalf("mark %d, want 9", m)
	}
	mustExec(t, c, "SET lock.fencing_token = 8")
	_, err = c.CopyFrom(t.Context(), pgx.Identifier{"invoices"}, []string{"amount"}, pgx.CopyFromRows([][]any{{4}}))
	wantCode(t, err, "55Z01")
	var count int
	direct := connect(t, e.direct(), pgx.QueryExecModeExec)
	if err := direct.QueryRow(t.Context(), "SELECT count(*) FROM invoices").Scan(&count); err != nil || count != 3 {
		t.Fatalf("invoices has %d rows (%v), want 3", count, err)
	}
}
