package integration

import (
	"testing"
)

// A "--" comment ends at a carriage return as well as at a line feed
// (scan.l: non_newline is [^\n\r]), so "-- x\rCALL p()" is a comment and a
// CALL. The gate's byte filter (mayMatter) took the CR for a blank inside the
// comment's line and did not see CALL, DO or END as a statement's first
// word: the text went upstream unanalysed.

// TestHuntCRCommentHidesCall: a session with no token runs a procedure that
// sets the stale token 41 behind such a comment; the proxy sends no probe
// and the next write goes upstream with no check.
func TestHuntCRCommentHidesCall(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(),
		`CREATE PROCEDURE p() LANGUAGE plpgsql AS $$BEGIN
			PERFORM set_config('lock.fencing_token', '41', false);
			PERFORM set_config('lock.resource', 'acct/1', false);
		END$$`)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "-- x\rCALL p()")
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	wantCode(t, err, "55Z01")
	e.wantUntouched(t)
}

// TestHuntCRCommentHidesDo: the same with a DO block calling a function
// (the block's own END hidden the same way).
func TestHuntCRCommentHidesDo(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(),
		`CREATE FUNCTION f() RETURNS void LANGUAGE sql AS $$
			SELECT set_config('lock.fencing_token', '41', false), set_config('lock.resource', 'acct/1', false)$$`)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "SELECT 1; -- x\rDO 'BEGIN PERFORM f(); --\rEND'")
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	wantCode(t, err, "55Z01")
	e.wantUntouched(t)
}

// TestHuntCRCommentHidesEnd: in a transaction block checked with token 100,
// "-- x\rEND" commits inside a Query the proxy forwarded unanalysed; the
// Query's next statement runs in a new transaction with no check. The mark
// reaches 101 before (bump stands in for a new holder's check, made here in
// the same transaction so that the order is certain); the old holder's
// write then lands under the stale token 100.
func TestHuntCRCommentHidesEnd(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(), "CREATE FUNCTION bump() RETURNS void LANGUAGE sql AS $$UPDATE fence.hwm SET token = 101 WHERE resource = 'acct/1'$$")
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 100",
		"BEGIN",
		"SELECT balance FROM accounts WHERE id = 1",
		"SELECT bump()",
	)
	err := rawExec(t, c, "-- x\rEND; UPDATE accounts SET balance = 1 WHERE id = 1")
	if got := e.mark(t, "acct/1"); got != 101 {
		t.Fatalf("mark = %d, want 101", got)
	}
	if err == nil {
		t.Fatal("UPDATE after a CR-hidden END ran without a check")
	}
	wantCode(t, err, "55Z01")
	e.wantUntouched(t)
}

// TestHuntExecuteResourceCommentDropsPreparedToken: a statement PREPAREd
// with the stale token 41 in its comment, run by an EXECUTE whose own
// comment names only a resource. The EXECUTE's directives replaced the
// prepared statement's whole, so its token was lost: in a session with no
// token the write ran with no check.
func TestHuntExecuteResourceCommentDropsPreparedToken(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "PREPARE p AS /* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = 1 WHERE id = 1")
	wantCode(t, rawExec(t, c, "/* resource=acct/1 */ EXECUTE p"), "55Z01")
	e.wantUntouched(t)
}

// TestHuntExecuteResourceCommentFreshSession: the same in a session whose
// setting holds the current token 100: the check ran with 100, not with the
// prepared statement's 41.
func TestHuntExecuteResourceCommentFreshSession(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 100",
		"PREPARE p AS /* fencing_token=41 */ UPDATE accounts SET balance = 1 WHERE id = 1")
	wantCode(t, rawExec(t, c, "/* resource=acct/1 */ EXECUTE p"), "55Z01")
	e.wantUntouched(t)
}

// TestHuntExecuteConflictingTokens: an EXECUTE whose comment names another
// token than the prepared statement's is ambiguous, and refused (22023) as
// two tokens in one statement are.
func TestHuntExecuteConflictingTokens(t *testing.T) {
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

// TestHuntOpaqueForgetsPreparedToken: after a DO block the proxy treats the
// prepared statements it knew as unknown code, and forgets the token in
// their comments. The probe after the DO finds no session token, and the
// EXECUTE of a statement prepared with the stale token 41 in its comment
// runs with no check.
func TestHuntOpaqueForgetsPreparedToken(t *testing.T) {
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

// TestHuntOpaqueForgetsParsedToken: the same with a statement prepared by
// the protocol's Parse.
func TestHuntOpaqueForgetsParsedToken(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	if _, err := c.Prepare(t.Context(), "s", "/* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = 1 WHERE id = 1", nil); err != nil {
		t.Fatal(err)
	}
	rawSetup(t, c, "DO $$ BEGIN END $$", "SELECT 1")
	wantCode(t, c.ExecPrepared(t.Context(), "s", nil, nil, nil).Read().Err, "55Z01")
	e.wantUntouched(t)
}

// TestHuntOpaqueReplacedPreparedStatement: the DO block replaced p by a
// statement without the comment; the session's stale token 41 is then the
// one it runs under, and the proxy checks it as well as the token p's
// comment carried.
func TestHuntOpaqueReplacedPreparedStatement(t *testing.T) {
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

// TestHuntKelvinSignTokenKey: the gate compares directive keys with
// Unicode folding ("fencing_to\u212Aen", with a Kelvin sign, is the token
// key) but its filter before the scanner looked for the keys in ASCII: the
// stale token 41 in such a comment was dropped, and in a session with no
// token the write ran with no check.
func TestHuntKelvinSignTokenKey(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "SET lock.resource = 'acct/1'")
	wantCode(t, rawExec(t, c, "/* fencing_to\u212Aen=41 */ UPDATE accounts SET balance = 1 WHERE id = 1"), "55Z01")
	e.wantUntouched(t)
}

// TestHuntCreateTableAsExecuteDropsPreparedToken: CREATE TABLE … AS
// EXECUTE runs a statement PREPAREd with the stale token 41 in its
// comment. A plain "EXECUTE p" was refused (55Z01), but the CTAS was
// judged on its own text, which carries no directive: in a session with no
// token it ran with no check, and the new table landed under the stale
// token (the prepared statement's comment was never consulted).
func TestHuntCreateTableAsExecuteDropsPreparedToken(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "PREPARE p AS /* fencing_token=41 resource=acct/1 */ SELECT 1 AS x")
	wantCode(t, rawExec(t, c, "CREATE TABLE t2 AS EXECUTE p"), "55Z01")
	wantCode(t, rawExec(t, c, "EXECUTE p"), "55Z01")
	// After code the proxy cannot see, p is opaque: its comment still counts.
	rawSetup(t, c, "DO $$ BEGIN END $$", "SELECT 1")
	wantCode(t, rawExec(t, c, "CREATE TABLE t2 AS EXECUTE p"), "55Z01")
}

// Attacks that held (regression tests).

// TestHuntWithHoldCursorSetsTokenAtCommit: a WITH HOLD cursor's query runs
// to its end at COMMIT, so its set_config calls set the stale token then,
// after the DECLARE and with no statement in between.
func TestHuntWithHoldCursorSetsTokenAtCommit(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"BEGIN",
		"DECLARE c CURSOR WITH HOLD FOR SELECT set_config('lock.fencing_token', '41', false), set_config('lock.resource', 'acct/1', false)",
		"COMMIT",
	)
	wantCode(t, rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1"), "55Z01")
	wantCode(t, rawExec(t, c, "DO $$ BEGIN END $$"), "55Z01")
	e.wantUntouched(t)
}

// TestHuntResetAllRestoresStartupToken: RESET ALL brings back the stale
// token of the startup parameters after the session set a current one.
func TestHuntResetAllRestoresStartupToken(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy()+"&options=-c%20lock.fencing_token%3D41%20-c%20lock.resource%3Dacct%2F1")
	rawSetup(t, c, "SET lock.fencing_token = 100", "SELECT 1", "DO $$ BEGIN END $$")
	wantCode(t, rawExec(t, c, "RESET ALL; UPDATE accounts SET balance = 1 WHERE id = 1"), "55Z01")
	e.wantUntouched(t)
}

// TestHuntRoleDefaultToken: ALTER ROLE … IN DATABASE … SET applies at
// login without a word on the wire; SET ROLE and SET SESSION AUTHORIZATION
// do not clear it.
func TestHuntRoleDefaultToken(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(),
		"ALTER ROLE CURRENT_USER IN DATABASE "+e.db+" SET lock.fencing_token = 41",
		"ALTER ROLE CURRENT_USER IN DATABASE "+e.db+" SET lock.resource = 'acct/1'")
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "SET SESSION AUTHORIZATION DEFAULT", "SET ROLE NONE")
	wantCode(t, rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1"), "55Z01")
	e.wantUntouched(t)
}

// TestHuntGBKHidesQuote: under client_encoding GBK the byte 0x5C ('\')
// may end a two-byte character; the proxy refuses text with such bytes.
func TestHuntGBKHidesQuote(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "SET lock.resource = 'acct/1'", "SET lock.fencing_token = 41", "SET client_encoding = 'GBK'")
	err := rawExec(t, c, "SELECT E'\x81\\'; UPDATE accounts SET balance = 1 WHERE id = 1; SELECT '")
	wantCode(t, err, "0A000")
	e.wantUntouched(t)
}

// TestHuntCommitAndChainChecksAgain: COMMIT AND CHAIN starts a new
// transaction inside the same Query; its write is checked again, after the
// mark moved on (bump stands in for a new holder).
func TestHuntCommitAndChainChecksAgain(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(), "CREATE FUNCTION bump() RETURNS void LANGUAGE sql AS $$UPDATE fence.hwm SET token = 101 WHERE resource = 'acct/1'$$")
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 100",
		"BEGIN",
		"SELECT bump()",
	)
	wantCode(t, rawExec(t, c, "COMMIT AND CHAIN; UPDATE accounts SET balance = 1 WHERE id = 1"), "55Z01")
	_ = rawExec(t, c, "ROLLBACK")
	e.wantUntouched(t)
}
