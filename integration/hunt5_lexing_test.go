package integration

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestHunt5HiddenLexingChangePipelined: hunt2's attack (a lexing change the
// proxy does not wait for, then a text it lexes differently from the
// server) with the change made by something whose text names neither
// pg_settings nor set_config: an UPDATE through a view over pg_settings
// (its rule calls set_config), or a plain SELECT of a function. Hunt2's fix
// is a byte-filter word, so these pass unanalysed and nothing waits for
// the server's ParameterStatus. In a session whose probe found no token,
// the proxy reads the next pipelined text as a SELECT of two string
// literals; the server, with backslash escapes on, runs set_config calls
// that set the stale token 50 and resource acct/1. No probe followed, so
// this and every later write of the session went unchecked and landed.
// Now such a text (it could set the token, holds a backslash or a byte
// >= 0x80, and something before it is unanswered) is treated as unreadable
// in a session without fencing: it passes, and the session is checked
// until a probe says no token is set.
func TestHunt5HiddenLexingChangePipelined(t *testing.T) {
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
			px := h4raw(t, e, false)
			// One implicit transaction: the write in it must be checked.
			got := px.run(t, 1,
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
			px = h4raw(t, e, false)
			got = px.run(t, 2,
				&pgproto3.Parse{Query: change}, &pgproto3.Bind{}, &pgproto3.Execute{},
				&pgproto3.Parse{Query: hidden}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{},
				&pgproto3.Parse{Query: "UPDATE accounts SET balance = 13 WHERE id = 1"}, &pgproto3.Bind{}, &pgproto3.Execute{},
				&pgproto3.Sync{})
			got += "|" + px.run(t, 1, &pgproto3.Query{String: "UPDATE accounts SET balance = 14 WHERE id = 1"})
			t.Logf("replies %s", got)
			if strings.Count(got, "E{55Z01}") != 2 {
				t.Error("the writes were not both refused with 55Z01")
			}
			e.wantUntouched(t)
		})
		t.Run("simple/"+change, func(t *testing.T) {
			harnessExec(t, e.direct(), "UPDATE accounts SET balance = 0")
			px := h4raw(t, e, false)
			got := px.run(t, 3,
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

// TestHunt5HiddenLexingChangeFencedSession: as
// TestHunt5HiddenLexingChangePipelined, in a session that carries the fresh
// token 150: the proxy checks the hidden text as one SELECT (150 passes),
// the server reads SELECT; COMMIT; set_config(stale 50); UPDATE, and the
// UPDATE ran in a new implicit transaction with no check. Now the Query
// waits for the answer to the one before it. In the extended protocol (one
// statement per Parse) the hidden set_config changed the token inside the
// transaction checked with 150, and the write after it was not checked
// again; now it is.
func TestHunt5HiddenLexingChangeFencedSession(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(),
		"CREATE FUNCTION knob_off() RETURNS text LANGUAGE sql AS $$SELECT pg_catalog.set_config('standard_conforming_strings', 'off', false)$$")
	hidden := `SELECT 'a\' , '; COMMIT; SELECT pg_catalog.set_config($$lock.fencing_token$$, $$50$$, false); ` +
		`UPDATE accounts SET balance = 16 WHERE id = 1; -- '`
	px := h4raw(t, e, false)
	px.run(t, 1, &pgproto3.Query{String: "SET lock.fencing_token = 150; SET lock.resource = 'acct/1'"})
	got := px.run(t, 2, &pgproto3.Query{String: "SELECT knob_off()"}, &pgproto3.Query{String: hidden})
	t.Logf("replies %s", got)
	if !strings.Contains(got, "E{0A000}") {
		t.Error("the hidden text was not refused with 0A000")
	}
	e.wantUntouched(t)

	one := `SELECT 'a\' , ' , pg_catalog.set_config($$lock.fencing_token$$, $$50$$, false) , ' AS c -- '`
	px = h4raw(t, e, false)
	px.run(t, 1, &pgproto3.Query{String: "SET lock.fencing_token = 150; SET lock.resource = 'acct/1'"})
	got = px.run(t, 1,
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
