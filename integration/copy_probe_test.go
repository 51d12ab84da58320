package integration

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
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

// copyTranscript sends msgs, flushed, and reads replies until ready
// ReadyForQuery arrived, the connection ends or 5 seconds pass, answering
// a CopyInResponse with copy (CopyData of each line, then CopyDone). It
// returns the reply types, with each error's SQLSTATE in braces.
func copyTranscript(t *testing.T, conn net.Conn, fe *pgproto3.Frontend, ready int, copy []string, msgs ...pgproto3.FrontendMessage) string {
	t.Helper()
	for _, m := range msgs {
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	defer conn.SetDeadline(time.Time{})
	var b strings.Builder
	for ready > 0 {
		msg, err := fe.Receive()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				b.WriteString(" TIMEOUT")
			} else {
				b.WriteString(" CLOSED")
			}
			return b.String()
		}
		buf, _ := msg.Encode(nil)
		b.WriteByte(buf[0])
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			fmt.Fprintf(&b, "{%s}", m.Code)
			t.Logf("error %s %s", m.Code, m.Message)
		case *pgproto3.ReadyForQuery:
			ready--
		case *pgproto3.CopyInResponse:
			for _, line := range copy {
				fe.Send(&pgproto3.CopyData{Data: []byte(line + "\n")})
			}
			fe.Send(&pgproto3.CopyDone{})
			if err := fe.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.String()
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

// copyConn opens a raw session through the proxy.
func copyConn(t *testing.T, e *env) (net.Conn, *pgproto3.Frontend) {
	t.Helper()
	conn, fe := readyConnAt(t, e.proxy.Addr, map[string]string{"user": pgcluster.Superuser, "database": e.db})
	t.Cleanup(func() { conn.Close() })
	return conn, fe
}

// wantUsable fails unless the session answers SELECT 1 with one row.
func wantUsable(t *testing.T, conn net.Conn, fe *pgproto3.Frontend) {
	t.Helper()
	if got := copyTranscript(t, conn, fe, 1, nil, &pgproto3.Query{String: "SELECT 1"}); got != "TDCZ" {
		t.Fatalf("SELECT 1 afterwards: %s", got)
	}
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
		conn, fe := copyConn(t, e)
		line := fmt.Sprint(i + 1)
		if got := copyTranscript(t, conn, fe, 1, []string{line}, &pgproto3.Query{String: tc.text}); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.text, got, tc.want)
			continue
		}
		wantUsable(t, conn, fe)
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
	conn, fe := copyConn(t, e)
	if got := copyTranscript(t, conn, fe, 3, nil, &pgproto3.Query{String: "BEGIN"}, &pgproto3.Query{String: "CALL p()"}, &pgproto3.Query{String: "COMMIT"}); got != "CZCZCZ" {
		t.Fatalf("BEGIN, CALL, COMMIT: %s", got)
	}
	if got := copyTranscript(t, conn, fe, 1, []string{"7", "8"}, &pgproto3.Query{String: "COPY invoices (amount) FROM STDIN"}); got != "GCZ" {
		t.Fatalf("COPY alone: %s, want GCZ", got)
	}
	wantUsable(t, conn, fe)
	if got := invoices(t, e); got != "7,8" {
		t.Errorf("invoices %q, want 7,8", got)
	}
}

// TestCopyOutAfterProbe: COPY … TO STDOUT reads no client message: the
// probe follows it as before, and the rows are right.
func TestCopyOutAfterProbe(t *testing.T) {
	e := copyEnv(t)
	harnessExec(t, e.direct(), "INSERT INTO invoices (amount) VALUES (4), (5)")
	conn, fe := copyConn(t, e)
	fe.Send(&pgproto3.Query{String: "CALL p(); COPY (SELECT amount FROM invoices ORDER BY id) TO STDOUT"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	var data, types strings.Builder
	for {
		msg, err := fe.Receive()
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
	wantUsable(t, conn, fe)
}

// TestCopyInProbeExtended: a CALL and a COPY FROM STDIN in one
// extended-protocol sequence, the copy sent after a Flush, then Sync: the
// copy lands, and whatever the gate sends behind the Sync (the probe, now
// deferred to the next unit) does not break the session. (This passed
// before the fix too: the client's Sync came after CopyDone.)
func TestCopyInProbeExtended(t *testing.T) {
	e := copyEnv(t)
	conn, fe := copyConn(t, e)
	for _, m := range []pgproto3.FrontendMessage{
		&pgproto3.Parse{Query: "CALL p()"}, &pgproto3.Bind{}, &pgproto3.Execute{},
		&pgproto3.Parse{Query: "COPY invoices (amount) FROM STDIN"}, &pgproto3.Bind{}, &pgproto3.Execute{},
		&pgproto3.Flush{},
	} {
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	receiveUntil[*pgproto3.CopyInResponse](t, fe)
	conn.SetDeadline(time.Time{})
	// The probe goes behind this Sync: the COPY ended at CopyDone.
	if got := copyTranscript(t, conn, fe, 1, nil, &pgproto3.CopyData{Data: []byte("9\n")}, &pgproto3.CopyDone{}, &pgproto3.Sync{}); got != "CZ" {
		t.Fatalf("replies after the copy %s, want CZ", got)
	}
	wantUsable(t, conn, fe)
	if got := invoices(t, e); got != "9" {
		t.Errorf("invoices %q, want 9", got)
	}
}

// TestCopyInExtendedPipelinedSync: libpq's PQexecParams sends Sync right
// behind the Execute of a COPY FROM STDIN, and another after CopyDone.
// PostgreSQL ignores a Sync (and a Flush) in COPY-in mode, so only the
// second gets ReadyForQuery; the gate expects one per Sync and ends the
// session (08P01, "'T' in reply to message kind 7") at the next Query.
// Not fixed: whether the first Sync is answered depends on whether the
// COPY started, and on when an error came (see the report of branch
// copy-probe).
func TestCopyInExtendedPipelinedSync(t *testing.T) {
	t.Skip("known: the gate does not model the Sync the server ignores in COPY-in mode")
	e := copyEnv(t)
	conn, fe := copyConn(t, e)
	got := copyTranscript(t, conn, fe, 1, []string{"9"},
		&pgproto3.Parse{Query: "COPY invoices (amount) FROM STDIN"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	t.Logf("replies %s", got)
	fe.Send(&pgproto3.Sync{})
	wantUsable(t, conn, fe)
}
