package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Adversarial review, round 2 (issue 10). Each test sets the mark of
// acct/1 to 100 and tries to land a write with token 41; the balance must
// stay 0.

// TestReview2HandOverOverloadedSetConfig: the hand-over exemption (no check
// for a plain SELECT set_config(const, const, const)) trusts the function's
// name. A set_config(varchar, varchar, boolean) in schema public is an exact
// match for varchar-cast constants and wins over pg_catalog.set_config(text,
// text, boolean); it writes. In a session that carries the stale token 41
// the statement is forwarded without a check and the UPDATE inside lands.
func TestReview2HandOverOverloadedSetConfig(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(), `CREATE FUNCTION public.set_config(varchar, varchar, boolean) RETURNS text LANGUAGE sql AS $$
		UPDATE accounts SET balance = 1 WHERE id = 1;
		SELECT pg_catalog.set_config($1::text, $2::text, $3) $$`)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 41",
	)
	err := rawExec(t, c, "SELECT set_config('lock.fencing_token'::varchar, '41'::varchar, false)")
	if err == nil {
		t.Errorf("SELECT set_config(varchar…) (a user function that writes) with the stale token 41 was not refused")
	}
	e.wantUntouched(t)
}

// TestReview2HandOverDomainCheckWrites: the same exemption with the real,
// schema-qualified pg_catalog.set_config: a constant cast to a domain runs
// the domain's CHECK, which may call any function; this one writes.
func TestReview2HandOverDomainCheckWrites(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(),
		`CREATE FUNCTION public.bump(text) RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN UPDATE accounts SET balance = 1 WHERE id = 1; RETURN true; END $$`,
		`CREATE DOMAIN public.tok AS text CHECK (public.bump(VALUE))`)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 41",
	)
	err := rawExec(t, c, "SELECT pg_catalog.set_config('lock.fencing_token', '41'::public.tok, false)")
	if err == nil {
		t.Errorf("hand-over with a domain-typed constant (its CHECK writes) under the stale token 41 was not refused")
	}
	e.wantUntouched(t)
}

// TestReview2SetConfigNameTruncatedByCast: the gate reads set_config's
// setting name through casts (constString) but not what the cast does:
// 'lock.fencing_tokenXX'::varchar(18) is 'lock.fencing_token' on the
// server. In a plain session (startup probe: no token) the proxy sees no
// fencing setting change, never probes, and the next UPDATE goes upstream
// with no check while the server holds the stale token 41.
func TestReview2SetConfigNameTruncatedByCast(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	if err := rawExec(t, c, "SELECT set_config('lock.resourceXX'::varchar(13), 'acct/1', false), set_config('lock.fencing_tokenXX'::varchar(18), '41', false)"); err != nil {
		t.Fatal(err)
	}
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	if err == nil {
		t.Errorf("UPDATE with the stale token 41 (set through a truncating cast) was not refused")
	}
	e.wantUntouched(t)
}

// TestReview2FastPathSkipsSessionToken: a transaction checked for a comment
// directive (token 1 for acct/9) counts as checked for the session's own
// token too. A later statement without a comment carries the session's
// stale token 41 for acct/1; decide would check it again (the check keys
// differ), but analyze's fast path (mayMatter false, unit checked) forwards
// it without analysis, and the UPDATE lands.
func TestReview2FastPathSkipsSessionToken(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 41",
		"BEGIN",
		"/* fencing_token=1 resource=acct/9 */ SELECT 1",
	)
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	_ = rawExec(t, c, "COMMIT")
	if err == nil {
		t.Errorf("UPDATE under the session's stale token 41 was not refused (the transaction was checked only for acct/9 token 1)")
	}
	e.wantUntouched(t)
}

// TestReview2QueryInsideExtendedAfterLexingChange: standard_conforming_strings
// is turned off by an Execute and, before Sync, a simple Query follows in
// the same sequence. The Parse path marks such text unsure (unit.lexing),
// but analyze only waits on lexPending (ended units): the Query is read
// with the old setting, where it is one SET application_name followed by
// a comment (no check); the server reads the backslash as escaping the quote after it and runs
// the UPDATE after it, unchecked under the stale token 41.
func TestReview2QueryInsideExtendedAfterLexingChange(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "review2-scs-query")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if codes, _, to := readyCount(t, conn, fe, 1, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	text := `SET application_name = '\' /* '; UPDATE accounts SET balance = 1 WHERE id = 1; SELECT 1 -- */`
	fe.Send(&pgproto3.Parse{Query: "SET standard_conforming_strings = off"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Query{String: text})
	fe.Send(&pgproto3.Sync{})
	flushAndAwait(t, conn, fe, 2)
	e.wantUntouched(t)
}

// Parse B, the server runs B's UPDATE under A's name with the stale token.
func TestReview2NonUTF8NamesCollide(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "review2-latin1-names")
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.Query{String: "SET client_encoding = 'LATIN1'; SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if codes, _, to := readyCount(t, conn, fe, 1, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	a := strings.Repeat("a", 61) + "\xe9z"
	b := strings.Repeat("a", 61) + "\xe9y"
	fe.Send(&pgproto3.Parse{Name: a, Query: "SELECT set_config('lock.fencing_token', '41', false)"})
	fe.Send(&pgproto3.Close{ObjectType: 'S', Name: b})
	fe.Send(&pgproto3.Parse{Name: b, Query: "UPDATE accounts SET balance = 1 WHERE id = 1"})
	fe.Send(&pgproto3.Bind{PreparedStatement: a})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	flushAndAwait(t, conn, fe, 1)
	e.wantUntouched(t)
}
