package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Prepared statements: what runs by a statement's name (EXECUTE, CREATE
// TABLE … AS EXECUTE, Bind) is checked with the token it carries and the
// one the session holds, whatever redefined it.
//
// The tests use staleEnv: the mark of acct/1 is 100; a write under the
// stale token 41 (or 50) must be refused, and the balance must stay 0.

// TestPreparedTokenKeptWhenExecuteCommentNamesOnlyResource: an EXECUTE whose
// comment names only a resource keeps the token of the prepared statement's
// comment: its stale token is refused.
//
// A statement PREPAREd with the stale token 41 in its comment, run by an
// EXECUTE whose own comment names only a resource. The EXECUTE's directives
// replaced the prepared statement's whole, so its token was lost: in a
// session with no token the write ran with no check.
func TestPreparedTokenKeptWhenExecuteCommentNamesOnlyResource(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "PREPARE p AS /* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = 1 WHERE id = 1")
	wantCode(t, rawExec(t, c, "/* resource=acct/1 */ EXECUTE p"), "55Z01")
	e.wantUntouched(t)
}

// TestPreparedTokenCheckedOverSessionToken: an EXECUTE is checked with the
// prepared statement's stale comment token, not the session's current one.
//
// The same in a session whose setting holds the current token 100: the check
// ran with 100, not with the prepared statement's 41.
func TestPreparedTokenCheckedOverSessionToken(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 100",
		"PREPARE p AS /* fencing_token=41 */ UPDATE accounts SET balance = 1 WHERE id = 1")
	wantCode(t, rawExec(t, c, "/* resource=acct/1 */ EXECUTE p"), "55Z01")
	e.wantUntouched(t)
}

// TestExecuteWithConflictingTokenRefused: an EXECUTE whose comment names
// another token or resource than the prepared statement's is refused
// (22023).
//
// An EXECUTE whose comment names another token than the prepared statement's
// is ambiguous, and refused (22023) as two tokens in one statement are.
func TestExecuteWithConflictingTokenRefused(t *testing.T) {
	e := staleEnv(t)
	for _, exec := range []string{"/* fencing_token=100 */ EXECUTE p", "/* fencing_token=41 resource=acct/2 */ EXECUTE p"} {
		c := rawConnect(t, e.viaProxy())
		rawSetup(t, c, "PREPARE p AS /* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = 1 WHERE id = 1")
		wantCode(t, rawExec(t, c, exec), "22023")
	}
	e.wantUntouched(t)
	if got := e.mark(t, "acct/1"); got != 100 {
		t.Fatalf("mark = %d, want 100", got)
	}
}

// TestPreparedTokenKeptAfterOpaqueCode: after code the proxy cannot see (a
// DO block) a prepared statement's comment token still counts: its EXECUTE
// is refused.
//
// After a DO block the proxy treats the prepared statements it knew as
// unknown code, and forgets the token in their comments. The probe after the
// DO finds no session token, and the EXECUTE of a statement prepared with
// the stale token 41 in its comment runs with no check.
func TestPreparedTokenKeptAfterOpaqueCode(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"PREPARE p AS /* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = 1 WHERE id = 1",
		"DO $$ BEGIN END $$",
		"SELECT 1",
	)
	wantCode(t, rawExec(t, c, "EXECUTE p"), "55Z01")
	e.wantUntouched(t)
}

// TestParsedTokenKeptAfterOpaqueCode: the same for a statement prepared by
// Parse.
//
// The same with a statement prepared by the protocol's Parse.
func TestParsedTokenKeptAfterOpaqueCode(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	if _, err := c.Prepare(t.Context(), "s", "/* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = 1 WHERE id = 1", nil); err != nil {
		t.Fatal(err)
	}
	rawSetup(t, c, "DO $$ BEGIN END $$", "SELECT 1")
	wantCode(t, c.ExecPrepared(t.Context(), "s", nil, nil, nil).Read().Err, "55Z01")
	e.wantUntouched(t)
}

// TestStatementReplacedByOpaqueCodeCheckedWithSessionToken: a statement a DO
// block replaced is checked with the session's stale token as well as the
// old comment's.
//
// The DO block replaced p by a statement without the comment; the session's
// stale token 41 is then the one it runs under, and the proxy checks it as
// well as the token p's comment carried.
func TestStatementReplacedByOpaqueCodeCheckedWithSessionToken(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 100",
		"PREPARE p AS /* fencing_token=200 resource=acct/9 */ SELECT 1",
		"DO $$ BEGIN EXECUTE 'DEALLOCATE p'; EXECUTE 'PREPARE p AS UPDATE accounts SET balance = 1 WHERE id = 1'; END $$",
		"SET lock.fencing_token = 41",
	)
	wantCode(t, rawExec(t, c, "EXECUTE p"), "55Z01")
	e.wantUntouched(t)
}

// TestCreateTableAsExecuteCarriesPreparedToken: CREATE TABLE … AS EXECUTE
// carries the prepared statement's comment token: refused when stale.
//
// CREATE TABLE … AS EXECUTE runs a statement PREPAREd with the stale token
// 41 in its comment. A plain "EXECUTE p" was refused (55Z01), but the CTAS
// was judged on its own text, which carries no directive: in a session with
// no token it ran with no check, and the new table landed under the stale
// token (the prepared statement's comment was never consulted).
func TestCreateTableAsExecuteCarriesPreparedToken(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "PREPARE p AS /* fencing_token=41 resource=acct/1 */ SELECT 1 AS x")
	wantCode(t, rawExec(t, c, "CREATE TABLE t2 AS EXECUTE p"), "55Z01")
	wantCode(t, rawExec(t, c, "EXECUTE p"), "55Z01")
	// After code the proxy cannot see, p is opaque: its comment still counts.
	rawSetup(t, c, "DO $$ BEGIN END $$", "SELECT 1")
	wantCode(t, rawExec(t, c, "CREATE TABLE t2 AS EXECUTE p"), "55Z01")
}

// TestCreateTableAsExecuteSeesPreparedSetConfig: CREATE TABLE … AS EXECUTE
// of a statement that sets the token is seen: the stale write after it is
// refused.
//
// CREATE TABLE … AS EXECUTE runs a prepared statement, but the gate
// classifies it as a plain write (not opaque, no lookup of the statement):
// the set_config inside the prepared statement sets the token unnoticed, and
// in this plain session every later write goes upstream unchecked.
func TestCreateTableAsExecuteSeesPreparedSetConfig(t *testing.T) {
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

// TestStatementRedefinedByDoBlockIsChecked: a statement a DO block
// DEALLOCATEd and PREPAREd anew is checked: the stale write it now holds is
// refused.
//
// A DO block can DEALLOCATE and PREPARE through dynamic SQL; the gate keeps
// its own idea of what "p" is (a read that sets the token: no check) while
// the server has an UPDATE.
func TestStatementRedefinedByDoBlockIsChecked(t *testing.T) {
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

// TestStatementNamesSharing63BytesAreOneStatement: two statement names that
// share their first 63 bytes are one statement, as on the server.
//
// PostgreSQL keys prepared statements (and portals) by the first 63 bytes of
// the name (NAMEDATALEN-1); the gate keys them by the whole name. Two names
// that share 63 bytes are one statement on the server and two for the gate:
// the gate believes N1 is a read that sets lock.resource (no check), while
// the server runs N2's UPDATE under N1's name.
func TestStatementNamesSharing63BytesAreOneStatement(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "longnames")
	conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"})
	conn.flush()
	if codes, _, to := conn.readyCount(1, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	prefix := strings.Repeat("n", 63)
	n1, n2 := prefix+"1", prefix+"2"
	conn.send(&pgproto3.Parse{Name: n1, Query: "SELECT set_config('lock.resource', 'acct/1', false)"})
	conn.send(&pgproto3.Sync{})
	conn.send(&pgproto3.Close{ObjectType: 'S', Name: n2})
	conn.send(&pgproto3.Parse{Name: n2, Query: "UPDATE accounts SET balance = 1 WHERE id = 1"})
	conn.send(&pgproto3.Sync{})
	conn.send(&pgproto3.Bind{PreparedStatement: n1})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Sync{})
	conn.await(3)
	e.wantUntouched(t)
}

// TestNonUTF8StatementNamesSharing63BytesAreOneStatement: the same for names
// in a non-UTF8 client_encoding, cut where the server cuts them.
//
// Parse B, the server runs B's UPDATE under A's name with the stale token.
func TestNonUTF8StatementNamesSharing63BytesAreOneStatement(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "latin1-names")
	conn.send(&pgproto3.Query{String: "SET client_encoding = 'LATIN1'; SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"})
	conn.flush()
	if codes, _, to := conn.readyCount(1, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	a := strings.Repeat("a", 61) + "\xe9z"
	b := strings.Repeat("a", 61) + "\xe9y"
	conn.send(&pgproto3.Parse{Name: a, Query: "SELECT set_config('lock.fencing_token', '41', false)"})
	conn.send(&pgproto3.Close{ObjectType: 'S', Name: b})
	conn.send(&pgproto3.Parse{Name: b, Query: "UPDATE accounts SET balance = 1 WHERE id = 1"})
	conn.send(&pgproto3.Bind{PreparedStatement: a})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Sync{})
	conn.await(1)
	e.wantUntouched(t)
}

// TestCheckStatementCannotBeHijacked: the proxy's own statement names are
// refused in every message and in SQL.
func TestCheckStatementCannotBeHijacked(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	if err := rawExec(t, c, "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, rawExec(t, c, "DEALLOCATE \"fenceproxy\x1fcheck\""), "42939")
	wantCode(t, rawExec(t, c, "PREPARE \"fenceproxy\x1fcheck\"(text, text, text, text, bool, bool) AS SELECT 1"), "42939")
	rr := c.ExecParams(t.Context(), "UPDATE accounts SET balance = 1 WHERE id = 1", nil, nil, nil, nil).Read()
	wantCode(t, rr.Err, "55Z01")
	// Protocol level: Close and Parse under the reserved name.
	res := c.ExecPrepared(t.Context(), "fenceproxy\x1fcheck", nil, nil, nil).Read()
	wantCode(t, res.Err, "42939")
	e.wantUntouched(t)
}

// TestDeallocateAllInCommentSession: DISCARD ALL and DEALLOCATE ALL drop the
// proxy's statements too; the next fenced Execute must still work.
func TestDeallocateAllInCommentSession(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	for _, reset := range []string{"DEALLOCATE ALL", "DISCARD ALL"} {
		mustExec(t, c, "/* fencing_token=5 resource=acct/1 */ UPDATE accounts SET balance = balance + 1 WHERE id = 1")
		mustExec(t, c, reset)
		mustExec(t, c, "/* fencing_token=5 resource=acct/1 */ UPDATE accounts SET balance = balance + 1 WHERE id = 1")
	}
	if got := e.balance(t); got != 4 {
		t.Fatalf("balance %d, want 4", got)
	}
}

// TestPreparedStatementAcrossTransactions: a statement prepared once and
// executed in many transactions is checked in each.
func TestPreparedStatementAcrossTransactions(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeCacheStatement)
	mustExec(t, c, "SET lock.resource = 'prep'")
	for _, tok := range []int{1, 2, 3} {
		mustExec(t, c, fmt.Sprintf("SET lock.fencing_token = %d", tok))
		mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
		if m := e.mark(t, "prep"); m != int64(tok) {
			t.Fatalf("mark %d after token %d", m, tok)
		}
	}
	mustExec(t, c, "SET lock.fencing_token = 2")
	_, err := c.Exec(t.Context(), "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
	wantCode(t, err, "55Z01")
}

// TestDeallocateAllKeepsFencing: DEALLOCATE ALL drops the proxy's prepared
// check statement too; fencing goes on (the check is prepared again).
func TestDeallocateAllKeepsFencing(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, c, "SET lock.resource = 'dealloc'")
	mustExec(t, c, "SET lock.fencing_token = 3")
	mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
	mustExec(t, c, "BEGIN")
	mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
	mustExec(t, c, "DEALLOCATE ALL")
	mustExec(t, c, "COMMIT")
	mustExec(t, c, "SET lock.fencing_token = 4")
	mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
	if m := e.mark(t, "dealloc"); m != 4 {
		t.Fatalf("mark %d after DEALLOCATE ALL, want 4", m)
	}
	mustExec(t, c, "SET lock.fencing_token = 2")
	_, err := c.Exec(t.Context(), "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
	wantCode(t, err, "55Z01")
}
