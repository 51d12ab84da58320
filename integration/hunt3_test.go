package integration

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// h3pbe is Parse, Bind and Execute of text as the unnamed statement and
// portal.
func h3pbe(text string) []pgproto3.FrontendMessage {
	return []pgproto3.FrontendMessage{&pgproto3.Parse{Query: text}, &pgproto3.Bind{}, &pgproto3.Execute{}}
}

func h3cat(parts ...[]pgproto3.FrontendMessage) []pgproto3.FrontendMessage {
	var out []pgproto3.FrontendMessage
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// h3drain sends msgs and reads replies for up to d (no ReadyForQuery
// count needed: for a pipeline ended by Flush).
func h3drain(t *testing.T, conn net.Conn, fe *pgproto3.Frontend, d time.Duration, msgs ...pgproto3.FrontendMessage) string {
	t.Helper()
	for _, m := range msgs {
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(d))
	defer conn.SetDeadline(time.Time{})
	var b strings.Builder
	for {
		msg, err := fe.Receive()
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				b.WriteString(" CLOSED")
			}
			return b.String()
		}
		buf, _ := msg.Encode(nil)
		b.WriteByte(buf[0])
		if m, ok := msg.(*pgproto3.ErrorResponse); ok {
			fmt.Fprintf(&b, "{%s}", m.Code)
			t.Logf("error %s %s", m.Code, m.Message)
		}
	}
}

// h3raise raises acct/1's mark to 300 from a direct session; it reports
// whether it got the row lock within a second (no open transaction of the
// fenced session holds it).
func h3raise(t *testing.T, e *env, res string) bool {
	t.Helper()
	c := rawConnect(t, e.direct())
	rawSetup(t, c, "SET lock_timeout = '1s'")
	err := rawExec(t, c, "UPDATE fence.hwm SET token = 300 WHERE resource = '"+res+"'")
	return err == nil
}

// TestHunt3UnseenEnd: a comment token 200 checked by a first statement;
// then a middle part; after it the mark goes to 300 if it can (the
// transaction ended); then a write carrying 200 in the same pipeline: it
// must be checked again when the transaction ended. An extended sequence
// runs as one implicit transaction until Sync, but an Execute of COMMIT,
// END, ROLLBACK or PREPARE TRANSACTION, or a simple Query in the middle,
// ends it (postgres.c finish_xact_command); VACUUM, which would commit at
// once, is refused by PostgreSQL inside a pipeline (25001). All held.
func TestHunt3UnseenEnd(t *testing.T) {
	e := staleEnv(t)
	for _, tc := range []struct {
		name   string
		middle []pgproto3.FrontendMessage
	}{
		{"commit", h3pbe("COMMIT")},
		{"end", h3pbe("END")},
		{"rollback", h3pbe("ROLLBACK")},
		{"query", []pgproto3.FrontendMessage{&pgproto3.Query{String: "SELECT 2"}}},
		{"query-commit", []pgproto3.FrontendMessage{&pgproto3.Query{String: "COMMIT"}}},
		{"vacuum", h3pbe("VACUUM invoices")},
		{"begin-commit", h3cat(h3pbe("BEGIN"), h3pbe("COMMIT"))},
		{"prepare-txn", h3pbe("PREPARE TRANSACTION 'h3'")},
		{"nothing", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := "r/" + tc.name
			dir := "/* fencing_token=200 resource=" + res + " */ "
			harnessExec(t, e.direct(), "INSERT INTO fence.hwm VALUES ('"+res+"', 100, now())", "UPDATE accounts SET balance = 0")
			conn, fe := copyConn(t, e)
			first := h3drain(t, conn, fe, time.Second, h3cat(h3pbe(dir+"SELECT 1"), tc.middle, []pgproto3.FrontendMessage{&pgproto3.Flush{}})...)
			raised := h3raise(t, e, res)
			rest := copyTranscript(t, conn, fe, 1, nil, h3cat(h3pbe(dir+"UPDATE accounts SET balance = 7 WHERE id = 1"), []pgproto3.FrontendMessage{&pgproto3.Sync{}})...)
			t.Logf("first %s raised %v rest %s", first, raised, rest)
			if b := e.balance(t); b != 0 && raised {
				t.Errorf("balance %d: the write carrying 200 landed after the mark went to 300", b)
			}
		})
	}
}

// TestHunt3SuspendedPortalAfterStaleSet: a portal whose select list writes
// (f() inserts a row per call), run one row at a time (PortalSuspended) in
// a transaction checked with token 200; a simple Query then sets the stale
// token 41; the next Execute of the same portal is refused and nothing of
// the transaction lands.
func TestHunt3SuspendedPortalAfterStaleSet(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(), "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ INSERT INTO invoices (amount) VALUES (1) RETURNING 1 $$")
	conn, fe := copyConn(t, e)
	if got := copyTranscript(t, conn, fe, 1, nil, &pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 200; BEGIN"}); got != "CCCZ" {
		t.Fatalf("setup: %s", got)
	}
	got := copyTranscript(t, conn, fe, 1, nil,
		&pgproto3.Parse{Name: "s", Query: "SELECT f() FROM generate_series(1, 3)"},
		&pgproto3.Bind{DestinationPortal: "a", PreparedStatement: "s"},
		&pgproto3.Execute{Portal: "a", MaxRows: 1}, &pgproto3.Sync{})
	if got != "12DsZ" {
		t.Fatalf("first Execute: %s", got)
	}
	if got := copyTranscript(t, conn, fe, 1, nil, &pgproto3.Query{String: "SET lock.fencing_token = 41"}); got != "CZ" {
		t.Fatalf("SET: %s", got)
	}
	got = copyTranscript(t, conn, fe, 1, nil, &pgproto3.Execute{Portal: "a", MaxRows: 1}, &pgproto3.Sync{})
	if got != "E{55Z01}Z" {
		t.Errorf("second Execute: %s, want E{55Z01}Z", got)
	}
	if got := copyTranscript(t, conn, fe, 1, nil, &pgproto3.Query{String: "COMMIT"}); got != "CZ" {
		t.Errorf("COMMIT: %s", got)
	}
	if got := invoices(t, e); got != "" {
		t.Errorf("invoices %q: the aborted transaction's rows landed", got)
	}
}

// TestHunt3ErrorMidPipeline: errors in the middle of a pipeline (a Bind
// with a wrong parameter count, a Parse syntax error, the injected check
// refusing, a Parse of a name in use), with a write, a Query and more
// messages after them before Sync: the server skips them all; after the
// Sync a stale write is refused; the session answers.
func TestHunt3ErrorMidPipeline(t *testing.T) {
	e := staleEnv(t)
	upd := "UPDATE accounts SET balance = 7 WHERE id = 1"
	for _, tc := range []struct {
		name string
		bad  []pgproto3.FrontendMessage
	}{
		{"bind", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: "SELECT $1::int"}, &pgproto3.Bind{}, &pgproto3.Execute{}}},
		{"parse", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: "SELEC 1"}, &pgproto3.Bind{}, &pgproto3.Execute{}}},
		{"check", h3pbe("SELECT 1")},
		{"reparse", []pgproto3.FrontendMessage{&pgproto3.Parse{Name: "n", Query: "SELECT 1"}, &pgproto3.Parse{Name: "n", Query: upd}, &pgproto3.Bind{PreparedStatement: "n"}, &pgproto3.Execute{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, fe := copyConn(t, e)
			if got := copyTranscript(t, conn, fe, 1, nil, &pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"}); got != "CCZ" {
				t.Fatalf("setup: %s", got)
			}
			msgs := h3cat(tc.bad, h3pbe(upd), []pgproto3.FrontendMessage{
				&pgproto3.Query{String: upd}, &pgproto3.Parse{Name: "w", Query: upd},
				&pgproto3.Bind{PreparedStatement: "w"}, &pgproto3.Execute{}, &pgproto3.Sync{},
			})
			got := copyTranscript(t, conn, fe, 1, nil, msgs...)
			t.Logf("pipeline %s", got)
			if !strings.Contains(got, "E{") || !strings.HasSuffix(got, "}Z") || strings.Count(got, "}") != 1 {
				t.Errorf("pipeline: %s", got)
			}
			got = copyTranscript(t, conn, fe, 1, nil, &pgproto3.Bind{PreparedStatement: "w"}, &pgproto3.Execute{}, &pgproto3.Sync{})
			if got != "E{26000}Z" {
				t.Errorf("Bind of the skipped w: %s, want E{26000}Z", got)
			}
			got = copyTranscript(t, conn, fe, 1, nil, h3cat(h3pbe(upd), []pgproto3.FrontendMessage{&pgproto3.Sync{}})...)
			if !strings.HasSuffix(got, "E{55Z01}Z") {
				t.Errorf("stale write after Sync: %s", got)
			}
			if got := copyTranscript(t, conn, fe, 1, nil, &pgproto3.Query{String: "RESET lock.fencing_token"}); got != "CZ" {
				t.Fatalf("RESET: %s", got)
			}
			wantUsable(t, conn, fe)
			e.wantUntouched(t)
		})
	}
}

// TestHunt3FunctionCallAfterStaleSetInPipeline: a transaction checked with
// token 200, then in one unsynced extended sequence an Execute of SET
// lock.fencing_token = 41 and a fast-path FunctionCall of a function that
// writes: the FunctionCall is refused, nothing lands.
func TestHunt3FunctionCallAfterStaleSetInPipeline(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(), "CREATE FUNCTION w() RETURNS int LANGUAGE sql AS $$ UPDATE accounts SET balance = 7 WHERE id = 1 RETURNING 1 $$")
	var oid uint32
	admin := rawConnect(t, e.direct())
	res, err := admin.Exec(t.Context(), "SELECT 'w'::regproc::oid").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Sscan(string(res[0].Rows[0][0]), &oid)
	conn, fe := copyConn(t, e)
	if got := copyTranscript(t, conn, fe, 1, nil, &pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 200; BEGIN; SELECT 1"}); got != "CCCTDCZ" {
		t.Fatalf("setup: %s", got)
	}
	got := copyTranscript(t, conn, fe, 2, nil, h3cat(h3pbe("SET lock.fencing_token = 41"), []pgproto3.FrontendMessage{
		&pgproto3.FunctionCall{Function: oid, ResultFormatCode: 0}, &pgproto3.Sync{},
	})...)
	t.Logf("pipeline %s", got)
	if !strings.Contains(got, "E{0A000}") {
		t.Errorf("FunctionCall after the stale SET: %s, want 0A000", got)
	}
	copyTranscript(t, conn, fe, 1, nil, &pgproto3.Query{String: "COMMIT"})
	e.wantUntouched(t)
}
