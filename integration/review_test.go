package integration

import (
	"errors"
	"net"
	"strings"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"testing"
)

// Adversarial review findings (issue 10 follow-up). Each test sets the mark
// of acct/1 to 100 and tries to land a write with token 41; the balance must
// stay 0.

// TestReviewCursorSetsTokenAfterCheck: a cursor whose query calls set_config
// sets the token when FETCHed, after the FETCH's own check ran with no token;
// the transaction counts as checked and the UPDATE runs unchecked.
func TestReviewCursorSetsTokenAfterCheck(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"BEGIN",
		"DECLARE c CURSOR FOR SELECT set_config('lock.fencing_token', '41', true), set_config('lock.resource', 'acct/1', true)",
		"FETCH c",
	)
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	_ = rawExec(t, c, "COMMIT")
	if err == nil {
		t.Errorf("UPDATE with the stale token 41 (set by FETCH) was not refused")
	}
	e.wantUntouched(t)
}

// TestReviewCursorAfterProbeUnfenced: a probe (after DO) clears the proxy's
// "may hold a token" while an open cursor still holds a set_config call;
// FETCH then sets the token without the proxy looking at any text, and the
// session's writes from then on are forwarded with no check at all.
func TestReviewCursorAfterProbeUnfenced(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"BEGIN",
		"DECLARE c CURSOR FOR SELECT set_config('lock.fencing_token', '41', false), set_config('lock.resource', 'acct/1', false)",
		"DO $$ BEGIN END $$",
		"FETCH c",
		"COMMIT",
	)
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	if err == nil {
		t.Errorf("UPDATE with the stale token 41 (set by FETCH after the probe) was not refused")
	}
	e.wantUntouched(t)
}

// TestReviewProbeInsideTransactionSetLocal: the probe after a DO runs inside
// the client's transaction, where SET LOCAL has blanked the token; the proxy
// then believes the session holds none, but COMMIT restores the session's
// token 41 and the next write goes upstream unchecked.
func TestReviewProbeInsideTransactionSetLocal(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 41",
		"BEGIN",
		"SET LOCAL lock.fencing_token = ''",
		"DO $$ BEGIN END $$",
		"COMMIT",
	)
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	if err == nil {
		t.Errorf("UPDATE with the session's stale token 41 was not refused")
	}
	e.wantUntouched(t)
}

// TestReviewProbeInsideTransactionRollback: the same with RESET undone by
// ROLLBACK.
func TestReviewProbeInsideTransactionRollback(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 41",
		"BEGIN",
		"RESET lock.fencing_token",
		"DO $$ BEGIN END $$",
		"ROLLBACK",
	)
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	if err == nil {
		t.Errorf("UPDATE with the session's stale token 41 was not refused")
	}
	e.wantUntouched(t)
}

// readyCount reads replies until n ReadyForQuery arrived or the deadline
// passes, and returns the error codes seen and whether it timed out.
func readyCount(t *testing.T, conn net.Conn, fe *pgproto3.Frontend, n int, d time.Duration) (codes []string, rows int, timedOut bool) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(d))
	defer conn.SetDeadline(time.Time{})
	for ready := 0; ready < n; {
		msg, err := fe.Receive()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return codes, rows, true
			}
			t.Fatalf("after %d ReadyForQuery: %v", ready, err)
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

// TestReviewCloseAllThenBindHangs: in a session that may carry a token, a
// pipeline that runs CLOSE ALL and then binds a statement prepared earlier
// (one Sync at the end, as a pgx batch sends it) makes the gate Wait for
// replies the server has not flushed (no Sync or Flush yet): the session
// hangs for good.
func TestReviewCloseAllThenBindHangs(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "review-closeall")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Query{String: "SET lock.resource = 'acct/9'; SET lock.fencing_token = 1"})
	fe.Send(&pgproto3.Parse{Name: "s1", Query: "SELECT 1"})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if codes, _, to := readyCount(t, conn, fe, 2, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	fe.Send(&pgproto3.Parse{Query: "CLOSE ALL"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Bind{PreparedStatement: "s1"})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	codes, rows, to := readyCount(t, conn, fe, 1, 10*time.Second)
	if to {
		t.Fatalf("no ReadyForQuery within 10 s: the session hangs (CLOSE ALL, then Bind of s1, one Sync)")
	}
	if len(codes) > 0 || rows != 1 {
		t.Fatalf("codes %v rows %d", codes, rows)
	}
}

// TestReviewLexingChangeInsideUnit: standard_conforming_strings is turned
// off by an Execute and, before Sync, another statement is parsed and
// executed. The gate analyses the second text with the old setting (the
// ParameterStatus has not arrived, and lexPending counts only ended units),
// where it is a read that sets the token (no check); the server reads it
// with the new setting as a data-modifying WITH: the UPDATE runs unchecked
// with the stale token 41.
func TestReviewLexingChangeInsideUnit(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "review-scs-unit")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if codes, _, to := readyCount(t, conn, fe, 1, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	text := `WITH a AS (SELECT '\' /* '), u AS (UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING 1) SELECT 1 -- */ ) SELECT set_config('lock.fencing_token', '41', false)`
	fe.Send(&pgproto3.Parse{Query: "SET standard_conforming_strings = off"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Parse{Query: text})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	flushAndAwait(t, conn, fe, 1)
	e.wantUntouched(t)
}

// TestReviewLongStatementNamesCollide: PostgreSQL keys prepared statements
// (and portals) by the first 63 bytes of the name (NAMEDATALEN-1); the gate
// keys them by the whole name. Two names that share 63 bytes are one
// statement on the server and two for the gate: the gate believes N1 is a
// read that sets lock.resource (no check), while the server runs N2's
// UPDATE under N1's name.
func TestReviewLongStatementNamesCollide(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "review-longnames")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if codes, _, to := readyCount(t, conn, fe, 1, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	prefix := strings.Repeat("n", 63)
	n1, n2 := prefix+"1", prefix+"2"
	fe.Send(&pgproto3.Parse{Name: n1, Query: "SELECT set_config('lock.resource', 'acct/1', false)"})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Close{ObjectType: 'S', Name: n2})
	fe.Send(&pgproto3.Parse{Name: n2, Query: "UPDATE accounts SET balance = 1 WHERE id = 1"})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Bind{PreparedStatement: n1})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	flushAndAwait(t, conn, fe, 3)
	e.wantUntouched(t)
}

// TestReviewFunctionCallInCheckedTransaction: a FunctionCall is allowed in a
// transaction that has passed its check, and the probe after it notices the
// token; but the transaction stays "checked" for the gate, so the UPDATE that
// follows in the same transaction runs with the new (stale) token 41 and no
// check. The check had passed with no token at all (only lock.resource set).
func TestReviewFunctionCallInCheckedTransaction(t *testing.T) {
	e := staleEnv(t)
	var oid uint32
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	if err := admin.QueryRow(t.Context(), "SELECT 'pg_catalog.set_config(text, text, boolean)'::regprocedure::oid").Scan(&oid); err != nil {
		t.Fatal(err)
	}
	conn := readyConn(t, e, "review-fastpath")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'"})
	fe.Send(&pgproto3.Query{String: "BEGIN; SELECT 1"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if codes, _, to := readyCount(t, conn, fe, 2, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	fe.Send(&pgproto3.FunctionCall{Function: oid, ArgFormatCodes: []uint16{0}, Arguments: [][]byte{[]byte("lock.fencing_token"), []byte("41"), []byte("false")}})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if codes, _, to := readyCount(t, conn, fe, 1, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("FunctionCall: codes %v, timed out %v", codes, to)
	}
	time.Sleep(500 * time.Millisecond) // the hidden probe after the call is answered
	fe.Send(&pgproto3.Query{String: "UPDATE accounts SET balance = 1 WHERE id = 1"})
	fe.Send(&pgproto3.Query{String: "COMMIT"})
	flushAndAwait(t, conn, fe, 2)
	e.wantUntouched(t)
}

// TestReviewCreateTableAsExecute: CREATE TABLE … AS EXECUTE runs a prepared
// statement, but the gate classifies it as a plain write (not opaque, no
// lookup of the statement): the set_config inside the prepared statement
// sets the token unnoticed, and in this plain session every later write goes
// upstream unchecked.
func TestReviewCreateTableAsExecute(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"PREPARE p AS SELECT set_config('lock.fencing_token', '41', false) AS a, set_config('lock.resource', 'acct/1', false) AS b",
		"CREATE TEMP TABLE t AS EXECUTE p",
	)
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	if err == nil {
		t.Errorf("UPDATE with the stale token 41 (set by CREATE TABLE AS EXECUTE) was not refused")
	}
	e.wantUntouched(t)
}

// TestReviewPipelinedBindOfEarlierParseHangs: two extended units sent
// together (as pgconn's Pipeline does, a Sync after each): the second Parses
// s2, then Binds s1, parsed by the first unit. s1 is still in flight, so the
// gate says Wait — but Settled also needs the reply to the second unit's own
// Parse, which the server does not send before a Sync or Flush. Even a plain
// session (no token) hangs for good.
func TestReviewPipelinedBindOfEarlierParseHangs(t *testing.T) {
	e := newFencedEnv(t, nil)
	conn := readyConn(t, e, "review-pipeline-wait")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Parse{Name: "s1", Query: "SELECT pg_sleep(0.3)"})
	fe.Send(&pgproto3.Bind{PreparedStatement: "s1"})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Parse{Name: "s2", Query: "SELECT 2"})
	fe.Send(&pgproto3.Bind{PreparedStatement: "s1"})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	codes, rows, to := readyCount(t, conn, fe, 2, 10*time.Second)
	if to {
		t.Fatalf("no second ReadyForQuery within 10 s: the session hangs")
	}
	if len(codes) > 0 || rows != 2 {
		t.Fatalf("codes %v rows %d", codes, rows)
	}
}

// TestReviewPipelinedLexingChangeHangs: a unit that sets client_encoding,
// then (pipelined, before its answer) Parse, Bind, Execute of a text that
// needs analysis: the gate waits for the lexing change with the current
// unit's Parse and Bind unanswered and unflushed: the session hangs.
func TestReviewPipelinedLexingChangeHangs(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "review-pipeline-lex")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Query{String: "SET lock.resource = 'acct/9'; SET lock.fencing_token = 1"})
	fe.Send(&pgproto3.Parse{Query: "SET client_encoding = 'UTF8'"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Parse{Query: "SELECT 2"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	codes, rows, to := readyCount(t, conn, fe, 3, 10*time.Second)
	if to {
		t.Fatalf("no third ReadyForQuery within 10 s: the session hangs")
	}
	if len(codes) > 0 || rows != 1 {
		t.Fatalf("codes %v rows %d", codes, rows)
	}
}

// TestReviewProbeOperatorHijack: the probe (and the pre-check DO block)
// compare with an unqualified "<>", resolved through the session's
// search_path. With an operator public.<>(text, text) that always says false
// and search_path = public, pg_catalog, every probe answers "no token": the
// session keeps the stale token 41 its DO block set, and its writes go
// upstream unchecked.
func TestReviewProbeOperatorHijack(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(),
		"CREATE FUNCTION public.never_ne(text, text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT false'",
		"CREATE OPERATOR public.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = public.never_ne)")
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET search_path = public, pg_catalog",
		"DO $$ BEGIN PERFORM pg_catalog.set_config('lock.fencing_token', '41', false); PERFORM pg_catalog.set_config('lock.resource', 'acct/1', false); END $$",
	)
	time.Sleep(500 * time.Millisecond) // the hidden probe after the DO is answered
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	if err == nil {
		t.Errorf("UPDATE with the stale token 41 was not refused after a hijacked probe")
	}
	e.wantUntouched(t)
}

// TestReviewParseUnderOldSettings: the server parses a Parse message's text
// when it arrives, under the settings of that moment; the gate analyses the
// text only at Execute, under the settings of that later moment. Parsed with
// standard_conforming_strings off (the gate looks at nothing then), executed
// after it is back on: the gate reads a read that sets the token (no check),
// the server runs the UPDATE it parsed.
func TestReviewParseUnderOldSettings(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "review-parse-old-settings")
	fe := pgproto3.NewFrontend(conn, conn)
	text := `WITH a AS (SELECT '\' /* '), u AS (UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING 1) SELECT 1 -- */ ) SELECT set_config('lock.fencing_token', '41', false)`
	fe.Send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"})
	fe.Send(&pgproto3.Query{String: "SET standard_conforming_strings = off"})
	fe.Send(&pgproto3.Parse{Name: "s1", Query: text})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Query{String: "SET standard_conforming_strings = on"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if codes, _, to := readyCount(t, conn, fe, 4, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	fe.Send(&pgproto3.Bind{PreparedStatement: "s1"})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	flushAndAwait(t, conn, fe, 1)
	e.wantUntouched(t)
}

// TestReviewFetchRunsWritePortal: SQL FETCH (or MOVE) runs any portal of
// the session, including a protocol portal bound to UPDATE … RETURNING and
// never Executed; the gate reads "FETCH" as a read of a SQL cursor and asks
// no token for the protected table: the write lands without one (55Z02
// expected).
func TestReviewFetchRunsWritePortal(t *testing.T) {
	e := newFencedEnv(t, &gate.Config{Tables: map[gate.TableRef]gate.Protection{{Schema: "public", Name: "accounts"}: {Resource: "acct/1", RequireToken: true}}})
	conn := readyConn(t, e, "review-fetch-portal")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Query{String: "BEGIN"})
	fe.Send(&pgproto3.Parse{Name: "s", Query: "UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING id"})
	fe.Send(&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s"})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	codes, _, to := readyCount(t, conn, fe, 2, 10*time.Second)
	if to || len(codes) > 1 || len(codes) == 1 && codes[0] != "55Z02" {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	if len(codes) == 1 { // refused already at Bind, where the check now runs
		e.wantUntouched(t)
		return
	}
	fe.Send(&pgproto3.Query{String: "FETCH ALL FROM p"})
	fe.Send(&pgproto3.Query{String: "COMMIT"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	codes, rows, to := readyCount(t, conn, fe, 2, 10*time.Second)
	if to {
		t.Fatal("timed out")
	}
	t.Logf("codes %v rows %d", codes, rows)
	e.wantUntouched(t)
}

// TestReviewCommitRevertsLexingSetting: COMMIT reverts a SET LOCAL of
// standard_conforming_strings, but the gate marks as lexing only units that
// name the setting; a Query pipelined behind the COMMIT is read with the
// SET LOCAL's value (on) while the server reads it with the session's (off).
func TestReviewCommitRevertsLexingSetting(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "review-commit-lexing")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'"})
	fe.Send(&pgproto3.Query{String: "SET standard_conforming_strings = off"})
	fe.Send(&pgproto3.Query{String: "BEGIN; SET LOCAL standard_conforming_strings = on"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if codes, _, to := readyCount(t, conn, fe, 3, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	text := `WITH a AS (SELECT '\' /* '), u AS (UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING 1) SELECT 1 -- */ ) SELECT set_config('lock.fencing_token', '41', false)`
	// The sleep (checked with no token yet) keeps COMMIT's ParameterStatus
	// from arriving before the gate reads the next Query.
	fe.Send(&pgproto3.Query{String: "SELECT pg_sleep(0.3); SET lock.fencing_token = 41; COMMIT"})
	fe.Send(&pgproto3.Query{String: text})
	flushAndAwait(t, conn, fe, 2)
	e.wantUntouched(t)
}

// TestReviewFetchRunsStaleCommentTokenPortal: the same with a comment token:
// the stale holder's UPDATE carries fencing_token=41, is bound as a portal
// and run by SQL FETCH: no check at all, the stale write lands.
func TestReviewFetchRunsStaleCommentTokenPortal(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "review-fetch-comment")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Query{String: "BEGIN"})
	fe.Send(&pgproto3.Parse{Name: "s", Query: "/* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING id"})
	fe.Send(&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s"})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if codes, _, to := readyCount(t, conn, fe, 2, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	fe.Send(&pgproto3.Query{String: "MOVE ALL IN p"})
	fe.Send(&pgproto3.Query{String: "COMMIT"})
	flushAndAwait(t, conn, fe, 2)
	e.wantUntouched(t)
}

// TestReviewDoBlockRedefinesPreparedStatement: a DO block can DEALLOCATE and
// PREPARE through dynamic SQL; the gate keeps its own idea of what "p" is
// (a read that sets the token: no check) while the server has an UPDATE.
func TestReviewDoBlockRedefinesPreparedStatement(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"PREPARE p AS SELECT set_config('lock.fencing_token', '41', false)",
		"DO $$ BEGIN EXECUTE 'DEALLOCATE p'; EXECUTE 'PREPARE p AS UPDATE accounts SET balance = 1 WHERE id = 1'; END $$",
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 41",
	)
	err := rawExec(t, c, "EXECUTE p")
	if err == nil {
		t.Errorf("EXECUTE p (an UPDATE on the server) with the stale token 41 was not refused")
	}
	e.wantUntouched(t)
}

// flushAndAwait flushes fe and waits for n ReadyForQuery, failing on a
// timeout (a hang); the attack's outcome is judged from the database.
func flushAndAwait(t *testing.T, conn net.Conn, fe *pgproto3.Frontend, n int) {
	t.Helper()
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	codes, _, to := readyCount(t, conn, fe, n, 10*time.Second)
	if to {
		t.Fatal("timed out")
	}
	t.Logf("codes %v", codes)
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
