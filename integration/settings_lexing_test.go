package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Settings and lexing: the proxy reads a text as the server does, under
// the settings (standard_conforming_strings, client_encoding) the server
// has when it reads it, or it waits for the server's answer, or refuses.
// A "--" comment ends at a carriage return as well as at a line feed
// (scan.l: non_newline is [^\n\r]).
//
// The tests use staleEnv: the mark of acct/1 is 100; a write under the
// stale token 41 (or 50) must be refused, and the balance must stay 0.

// TestCarriageReturnEndsCommentBeforeCall: a CALL after a "--" comment ended
// by a carriage return is seen, and the stale token its procedure sets is
// refused.
//
// A session with no token runs a procedure that sets the stale token 41
// behind such a comment; the proxy sends no probe and the next write goes
// upstream with no check.
func TestCarriageReturnEndsCommentBeforeCall(t *testing.T) {
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

// TestCarriageReturnEndsCommentBeforeDo: a DO block after a comment ended by
// a carriage return is seen, and the stale token it sets is refused.
//
// The same with a DO block calling a function (the block's own END hidden
// the same way).
func TestCarriageReturnEndsCommentBeforeDo(t *testing.T) {
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

// TestCarriageReturnEndsCommentBeforeEnd: an END after a comment ended by a
// carriage return ends the checked transaction, and the write after it is
// checked again.
//
// In a transaction block checked with token 100, "-- x\rEND" commits inside
// a Query the proxy forwarded unanalysed; the Query's next statement runs in
// a new transaction with no check. The mark reaches 101 before (bump stands
// in for a new holder's check, made here in the same transaction so that the
// order is certain); the old holder's write then lands under the stale token
// 100.
func TestCarriageReturnEndsCommentBeforeEnd(t *testing.T) {
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

// TestQueryAfterPgSettingsUpdateReadWithItsSetting: a Query pipelined behind
// an UPDATE of pg_settings is read with the setting the UPDATE makes: the
// stale token hidden in it is refused.
//
// UPDATE pg_settings sets a setting through the view's rule (set_config);
// the gate's classifier knows that (SetsLexing), but its byte filter
// (mayMatter) had no word for pg_settings, so in a session without a token
// the UPDATE went upstream unanalysed and nothing waited for the server's
// answer. A Query sent right behind it was then read with
// standard_conforming_strings on while the server read it with it off: the
// proxy saw one string where the server ran SET lock.fencing_token = 41, no
// probe followed, and the next write ran with no check under the stale
// token.
func TestQueryAfterPgSettingsUpdateReadWithItsSetting(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "")
	if got := conn.transcript(3,
		&pgproto3.Query{String: "SET lock.resource = 'acct/1'"},
		&pgproto3.Query{String: "DO $$ BEGIN END $$"}, // the probe after it finds no token
		&pgproto3.Query{String: "SELECT"},             // the probe has been answered
	); got != "CZCZTDCZ" {
		t.Fatalf("setup: %s", got)
	}
	// The hidden statement sets the token with set_config: "SET
	// lock.fencing_token = 41" beside a comment marker would read as a
	// possible directive, and the text be refused whole (0A000).
	got := conn.transcript(3,
		&pgproto3.Query{String: "UPDATE pg_settings SET setting = 'off' WHERE name LIKE 'standard_conf%'"},
		&pgproto3.Query{String: `SELECT 'a\' , ' ; SELECT set_config($$lock.fencing_token$$, $$41$$, false); -- '`},
		&pgproto3.Query{String: "UPDATE accounts SET balance = 1 WHERE id = 1"},
	)
	if !strings.HasSuffix(got, "E{55Z01}Z") {
		t.Errorf("replies %s: want the write refused with 55Z01", got)
	}
	e.wantUntouched(t)
}

// TestStaleTokenRefusedAfterHiddenLexingChangeInPlainSession: text pipelined
// behind a lexing change the proxy cannot name (a view's rule, a function)
// runs checked until a probe answers: the stale token it sets is refused.
//
// The attack of TestQueryAfterPgSettingsUpdateReadWithItsSetting (a lexing change the proxy does not wait for, then a text
// it lexes differently from the server) with the change made by something
// whose text names neither pg_settings nor set_config: an UPDATE through a
// view over pg_settings (its rule calls set_config), or a plain SELECT of a
// function. The fix for that one is a byte-filter word, so these pass unanalysed and
// nothing waits for the server's ParameterStatus. In a session whose probe
// found no token, the proxy reads the next pipelined text as a SELECT of two
// string literals; the server, with backslash escapes on, runs set_config
// calls that set the stale token 50 and resource acct/1. No probe followed,
// so this and every later write of the session went unchecked and landed.
// Now such a text (it could set the token, holds a backslash or a byte >=
// 0x80, and something before it is unanswered) is treated as unreadable in a
// session without fencing: it passes, and the session is checked until a
// probe says no token is set.
func TestStaleTokenRefusedAfterHiddenLexingChangeInPlainSession(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(),
		"CREATE VIEW knobs AS SELECT name, setting FROM pg_settings",
		"CREATE FUNCTION knob_off() RETURNS text LANGUAGE sql AS $$SELECT pg_catalog.set_config('standard_conforming_strings', 'off', false)$$")
	// Proxy (backslash literal): 'a\' and ' , … , ' are strings, "-- '" a
	// comment. Server (backslash escapes): 'a\' , ' is one string, the
	// set_config calls are code, ' AS c -- ' a string.
	hidden := `SELECT 'a\' , ' , pg_catalog.set_config($$lock.fencing_token$$, $$50$$, false), ` +
		`pg_catalog.set_config($$lock.resource$$, $$acct/1$$, false) , ' AS c -- '`
	for _, change := range []string{
		"UPDATE knobs SET setting = 'off' WHERE name = 'standard_conforming_strings'",
		"SELECT knob_off()",
	} {
		t.Run("extended/"+change, func(t *testing.T) {
			harnessExec(t, e.direct(), "UPDATE accounts SET balance = 0")
			px := readyConn(t, e, "")
			// One implicit transaction: the write in it must be checked.
			got := px.transcript(1,
				&pgproto3.Parse{Query: change}, &pgproto3.Bind{}, &pgproto3.Execute{},
				&pgproto3.Parse{Query: hidden}, &pgproto3.Bind{}, &pgproto3.Execute{},
				&pgproto3.Parse{Query: "UPDATE accounts SET balance = 13 WHERE id = 1"}, &pgproto3.Bind{}, &pgproto3.Execute{},
				&pgproto3.Sync{})
			t.Logf("replies %s", got)
			if !strings.HasSuffix(got, "E{55Z01}Z") {
				t.Error("the write was not refused with 55Z01")
			}
			e.wantUntouched(t)
			// The token set in its own transaction (Sync), then writes.
			px = readyConn(t, e, "")
			got = px.transcript(2,
				&pgproto3.Parse{Query: change}, &pgproto3.Bind{}, &pgproto3.Execute{},
				&pgproto3.Parse{Query: hidden}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{},
				&pgproto3.Parse{Query: "UPDATE accounts SET balance = 13 WHERE id = 1"}, &pgproto3.Bind{}, &pgproto3.Execute{},
				&pgproto3.Sync{})
			got += "|" + px.transcript(1, &pgproto3.Query{String: "UPDATE accounts SET balance = 14 WHERE id = 1"})
			t.Logf("replies %s", got)
			if strings.Count(got, "E{55Z01}") != 2 {
				t.Error("the writes were not both refused with 55Z01")
			}
			e.wantUntouched(t)
		})
		t.Run("simple/"+change, func(t *testing.T) {
			harnessExec(t, e.direct(), "UPDATE accounts SET balance = 0")
			px := readyConn(t, e, "")
			got := px.transcript(3,
				&pgproto3.Query{String: change},
				&pgproto3.Query{String: hidden},
				&pgproto3.Query{String: "UPDATE accounts SET balance = 15 WHERE id = 1"})
			t.Logf("replies %s", got)
			if !strings.HasSuffix(got, "E{55Z01}Z") {
				t.Error("the write was not refused with 55Z01")
			}
			e.wantUntouched(t)
		})
	}
}

// TestStaleTokenRefusedAfterHiddenLexingChangeInFencedSession: in a session
// with a token, text behind a hidden lexing change waits for its answer or
// is refused: no write under the stale token lands.
//
// As TestStaleTokenRefusedAfterHiddenLexingChangeInPlainSession, in a
// session that carries the fresh token 150: the proxy checks the hidden text
// as one SELECT (150 passes), the server reads SELECT; COMMIT;
// set_config(stale 50); UPDATE, and the UPDATE ran in a new implicit
// transaction with no check. Now the Query waits for the answer to the one
// before it. In the extended protocol (one statement per Parse) the hidden
// set_config changed the token inside the transaction checked with 150, and
// the write after it was not checked again; now it is.
func TestStaleTokenRefusedAfterHiddenLexingChangeInFencedSession(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(),
		"CREATE FUNCTION knob_off() RETURNS text LANGUAGE sql AS $$SELECT pg_catalog.set_config('standard_conforming_strings', 'off', false)$$")
	hidden := `SELECT 'a\' , '; COMMIT; SELECT pg_catalog.set_config($$lock.fencing_token$$, $$50$$, false); ` +
		`UPDATE accounts SET balance = 16 WHERE id = 1; -- '`
	px := readyConn(t, e, "")
	px.transcript(1, &pgproto3.Query{String: "SET lock.fencing_token = 150; SET lock.resource = 'acct/1'"})
	got := px.transcript(2, &pgproto3.Query{String: "SELECT knob_off()"}, &pgproto3.Query{String: hidden})
	t.Logf("replies %s", got)
	if !strings.Contains(got, "E{0A000}") {
		t.Error("the hidden text was not refused with 0A000")
	}
	e.wantUntouched(t)

	one := `SELECT 'a\' , ' , pg_catalog.set_config($$lock.fencing_token$$, $$50$$, false) , ' AS c -- '`
	px = readyConn(t, e, "")
	px.transcript(1, &pgproto3.Query{String: "SET lock.fencing_token = 150; SET lock.resource = 'acct/1'"})
	got = px.transcript(1,
		&pgproto3.Parse{Query: "SELECT knob_off()"}, &pgproto3.Bind{}, &pgproto3.Execute{},
		&pgproto3.Parse{Query: one}, &pgproto3.Bind{}, &pgproto3.Execute{},
		&pgproto3.Parse{Query: "UPDATE accounts SET balance = 17 WHERE id = 1"}, &pgproto3.Bind{}, &pgproto3.Execute{},
		&pgproto3.Sync{})
	t.Logf("replies %s", got)
	if !strings.HasSuffix(got, "E{55Z01}Z") {
		t.Error("the write was not refused with 55Z01")
	}
	e.wantUntouched(t)
}

// TestQueryInOpenSequenceReadWithEarlierExecutesLexing: a Query sent in an
// open extended sequence after an Execute that turns
// standard_conforming_strings off is read as the server reads it.
//
// Standard_conforming_strings is turned off by an Execute and, before Sync,
// a simple Query follows in the same sequence. The Parse path marks such
// text unsure (unit.lexing), but analyze only waits on lexPending (ended
// units): the Query is read with the old setting, where it is one SET
// application_name followed by a comment (no check); the server reads the
// backslash as escaping the quote after it and runs the UPDATE after it,
// unchecked under the stale token 41.
func TestQueryInOpenSequenceReadWithEarlierExecutesLexing(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "scs-query")
	conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"})
	conn.flush()
	if codes, _, to := conn.readyCount(1, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	text := `SET application_name = '\' /* '; UPDATE accounts SET balance = 1 WHERE id = 1; SELECT 1 -- */`
	conn.send(&pgproto3.Parse{Query: "SET standard_conforming_strings = off"})
	conn.send(&pgproto3.Bind{})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Query{String: text})
	conn.send(&pgproto3.Sync{})
	conn.await(2)
	e.wantUntouched(t)
}

// TestExecuteReadWithEarlierExecutesLexingInSameUnit: a statement executed
// after an Execute that changes the lexing settings, before Sync, is read as
// the server reads it.
//
// Standard_conforming_strings is turned off by an Execute and, before Sync,
// another statement is parsed and executed. The gate analyses the second
// text with the old setting (the ParameterStatus has not arrived, and
// lexPending counts only ended units), where it is a read that sets the
// token (no check); the server reads it with the new setting as a
// data-modifying WITH: the UPDATE runs unchecked with the stale token 41.
func TestExecuteReadWithEarlierExecutesLexingInSameUnit(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "scs-unit")
	conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"})
	conn.flush()
	if codes, _, to := conn.readyCount(1, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	text := `WITH a AS (SELECT '\' /* '), u AS (UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING 1) SELECT 1 -- */ ) SELECT set_config('lock.fencing_token', '41', false)`
	conn.send(&pgproto3.Parse{Query: "SET standard_conforming_strings = off"})
	conn.send(&pgproto3.Bind{})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Parse{Query: text})
	conn.send(&pgproto3.Bind{})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Sync{})
	conn.await(1)
	e.wantUntouched(t)
}

// TestParsedTextJudgedUnderTheSettingsOfItsParse: a statement is judged
// under the settings the server parsed it with, not those of its later
// Execute.
//
// The server parses a Parse message's text when it arrives, under the
// settings of that moment; the gate analyses the text only at Execute, under
// the settings of that later moment. Parsed with standard_conforming_strings
// off (the gate looks at nothing then), executed after it is back on: the
// gate reads a read that sets the token (no check), the server runs the
// UPDATE it parsed.
func TestParsedTextJudgedUnderTheSettingsOfItsParse(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "parse-old-settings")
	text := `WITH a AS (SELECT '\' /* '), u AS (UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING 1) SELECT 1 -- */ ) SELECT set_config('lock.fencing_token', '41', false)`
	conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"})
	conn.send(&pgproto3.Query{String: "SET standard_conforming_strings = off"})
	conn.send(&pgproto3.Parse{Name: "s1", Query: text})
	conn.send(&pgproto3.Sync{})
	conn.send(&pgproto3.Query{String: "SET standard_conforming_strings = on"})
	conn.flush()
	if codes, _, to := conn.readyCount(4, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	conn.send(&pgproto3.Bind{PreparedStatement: "s1"})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Sync{})
	conn.await(1)
	e.wantUntouched(t)
}

// TestQueryAfterCommitRevertingSetLocalReadWithRestoredSetting: a Query
// pipelined behind a COMMIT that reverts a SET LOCAL of
// standard_conforming_strings is read with the restored setting.
//
// COMMIT reverts a SET LOCAL of standard_conforming_strings, but the gate
// marks as lexing only units that name the setting; a Query pipelined behind
// the COMMIT is read with the SET LOCAL's value (on) while the server reads
// it with the session's (off).
func TestQueryAfterCommitRevertingSetLocalReadWithRestoredSetting(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "commit-lexing")
	conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'"})
	conn.send(&pgproto3.Query{String: "SET standard_conforming_strings = off"})
	conn.send(&pgproto3.Query{String: "BEGIN; SET LOCAL standard_conforming_strings = on"})
	conn.flush()
	if codes, _, to := conn.readyCount(3, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	text := `WITH a AS (SELECT '\' /* '), u AS (UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING 1) SELECT 1 -- */ ) SELECT set_config('lock.fencing_token', '41', false)`
	// The sleep (checked with no token yet) keeps COMMIT's ParameterStatus
	// from arriving before the gate reads the next Query.
	conn.send(&pgproto3.Query{String: "SELECT pg_sleep(0.3); SET lock.fencing_token = 41; COMMIT"})
	conn.send(&pgproto3.Query{String: text})
	conn.await(2)
	e.wantUntouched(t)
}

// TestStandardConformingStringsOff: with standard_conforming_strings off the
// server reads 'a\” as one string where the proxy's parser would see the
// string end early, so an UPDATE hidden inside would run unchecked.
func TestStandardConformingStringsOff(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	for _, s := range []string{"SET lock.resource = 'acct/1'", "SET lock.fencing_token = 41", "SET standard_conforming_strings = off"} {
		if err := rawExec(t, c, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, sql := range []string{
		`SELECT 'a\'; UPDATE accounts SET balance = 1; --'`,
		`SELECT 'O\'Brien' FROM accounts; UPDATE accounts SET balance = 2`,
	} {
		pgErr := wantCode(t, rawExec(t, c, sql), "0A000")
		if !strings.Contains(pgErr.Message, "standard_conforming_strings") {
			t.Errorf("message %q does not say why", pgErr.Message)
		}
	}
	// Text without a backslash reads alike: fenced as usual.
	wantCode(t, rawExec(t, c, "UPDATE accounts SET balance = 3"), "55Z01")
	e.wantUntouched(t)
	// Back on: the session works again.
	if err := rawExec(t, c, "SET standard_conforming_strings = on"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, rawExec(t, c, `SELECT 'a\'; UPDATE accounts SET balance = 4; --'`), "55Z01")
	e.wantUntouched(t)
}

// TestNewerKeywordColumn: system_user is an ordinary column name in
// PostgreSQL 15 and a reserved word in the proxy's PostgreSQL 17 grammar.
func TestNewerKeywordColumn(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(), "CREATE TABLE t15 (id int, system_user text)", "INSERT INTO t15 VALUES (1, 'a')")
	fenced := rawConnect(t, e.viaProxy())
	for _, s := range []string{"SET lock.resource = 'acct/1'", "SET lock.fencing_token = 41"} {
		if err := rawExec(t, fenced, s); err != nil {
			t.Fatal(err)
		}
	}
	pgErr := wantCode(t, rawExec(t, fenced, "UPDATE t15 SET system_user = 'b'; UPDATE accounts SET balance = 1"), "42601")
	if !strings.Contains(pgErr.Message, "fenceproxy") {
		t.Errorf("message %q is not the proxy's", pgErr.Message)
	}
	e.wantUntouched(t)
	// A session that carries no token is not in the way.
	plain := rawConnect(t, e.viaProxy())
	if err := rawExec(t, plain, "UPDATE t15 SET system_user = 'c'"); err != nil {
		t.Fatalf("plain session: %v", err)
	}
}
