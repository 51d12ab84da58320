package integration

import (
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5/pgproto3"
)

// A comment token the proxy cannot read is never dropped: a text it
// forwards unread (it cannot lex it under the session's settings, or
// cannot parse it) or reads under settings code may have changed unseen,
// and whose comment names the stale token 41 for acct/1 (mark 100), is
// refused, waited for or checked; the write never lands. The session
// itself holds no token in its settings (or one for another resource).

// scsOff is a function that turns standard_conforming_strings off; the
// server reports the change only at the next ReadyForQuery.
const scsOff = "CREATE FUNCTION scs_off() RETURNS text LANGUAGE sql AS $$ SELECT set_config('standard_conforming_strings', 'off', false) $$"

// hiddenDirective reads, under standard_conforming_strings on, as a
// literal holding the directive; with it off, as a literal, then the
// directive's comment, then another literal.
const hiddenDirective = `UPDATE accounts SET balance = length('a\'' /* fencing_token=41 resource=acct/1 */ || ' -- '` + "\n) WHERE id = 1"

func TestACommentTokenInATextTheProxyCannotReadIsNeverDropped(t *testing.T) {
	for name, run := range map[string]func(t *testing.T, c *wireConn){
		"standard_conforming_strings off, a backslash": func(t *testing.T, c *wireConn) {
			c.transcript(1, &pgproto3.Query{String: "SET standard_conforming_strings = off"})
			c.transcript(1, &pgproto3.Query{String: `/* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = length('a\b') WHERE id = 1`})
		},
		"client_encoding SJIS, a multibyte character": func(t *testing.T, c *wireConn) {
			c.transcript(1, &pgproto3.Query{String: "SET client_encoding = 'SJIS'"})
			c.transcript(1, &pgproto3.Query{String: "/* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = length('\x83\x41') WHERE id = 1"})
		},
		"pipelined behind a Query, non-ASCII data": func(t *testing.T, c *wireConn) {
			// It waits for the first Query's answer, and is then read.
			got := c.transcript(2, &pgproto3.Query{String: "SELECT 1"},
				&pgproto3.Query{String: "/* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = length('café') WHERE id = 1"})
			if !strings.Contains(got, "E{55Z01}") {
				t.Errorf("the stale token was not refused as such: %s", got)
			}
		},
		"over the parser's token bound": func(t *testing.T, c *wireConn) {
			c.transcript(1, &pgproto3.Query{String: "/* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = 5 WHERE id = 1" + strings.Repeat(" AND 1 = 1", 30000)})
		},
		"lexing changed unseen, extended pipeline": func(t *testing.T, c *wireConn) {
			c.transcript(1, pipeline(pbe("SELECT scs_off()"), pbe(hiddenDirective), []pgproto3.FrontendMessage{&pgproto3.Sync{}})...)
		},
		"lexing changed unseen, two Queries": func(t *testing.T, c *wireConn) {
			c.transcript(2, &pgproto3.Query{String: "SELECT scs_off()"}, &pgproto3.Query{String: hiddenDirective})
		},
		"lexing changed unseen, a token for another resource": func(t *testing.T, c *wireConn) {
			c.transcript(1, &pgproto3.Query{String: "SET lock.resource = 'other'; SET lock.fencing_token = 500"})
			c.transcript(1, pipeline(pbe("SELECT scs_off()"), pbe(hiddenDirective), []pgproto3.FrontendMessage{&pgproto3.Sync{}})...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := staleEnv(t)
			harnessExec(t, e.direct(), scsOff)
			run(t, readyConn(t, e, ""))
			e.wantUntouched(t)
		})
	}
	t.Run("transaction pool mode", func(t *testing.T) {
		e := hostileEnv(t, pgwire.PoolConfig{}, nil)
		harnessExec(t, e.direct, "INSERT INTO fence.hwm VALUES ('acct/1', 100, now())", scsOff)
		e.wire(t, nil).transcript(1, pipeline(pbe("SELECT scs_off()"), pbe(hiddenDirective), []pgproto3.FrontendMessage{&pgproto3.Sync{}})...)
		if b := e.balance(t); b != 0 {
			t.Fatalf("balance = %d: the stale comment token's write landed", b)
		}
	})
}

// A comment token before the first byte whose reading settings could
// change (here the 'é' of the data) reads the same however the server
// lexes the rest: pipelined, it is read and checked, not refused.
func TestACommentTokenBeforeRiskyDataIsReadInAPipeline(t *testing.T) {
	e := staleEnv(t)
	got := readyConn(t, e, "").transcript(1, pipeline(pbe("SELECT 1"),
		pbe("/* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = length('café') WHERE id = 1"),
		[]pgproto3.FrontendMessage{&pgproto3.Sync{}})...)
	if !strings.Contains(got, "E{55Z01}") {
		t.Errorf("the stale token was not refused as such: %s", got)
	}
	e.wantUntouched(t)
}
