package integration

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// The probe: after code the proxy cannot see, a hidden query asks the
// server for lock.fencing_token; its answer must not clear a token the
// session still has.
//
// The tests use staleEnv: the mark of acct/1 is 100; a write under the
// stale token 41 (or 50) must be refused, and the balance must stay 0.

// TestProbeAnsweredWithNoticesFindsStartupToken: the startup probe finds a
// stale token when notices (client_min_messages = debug5) surround its rows.
//
// A stale startup token with client_min_messages = debug5, so the hidden
// startup probe is answered with notices around its rows; the write must
// still be checked.
func TestProbeAnsweredWithNoticesFindsStartupToken(t *testing.T) {
	e := staleEnv(t)
	for _, opts := range []string{
		"-c lock.fencing_token=50 -c lock.resource=acct/1 -c client_min_messages=debug5",
		"-c lock.fencing_token=50 -c lock.resource=acct/1 -c client_min_messages=debug5 -c log_statement=all -c log_min_messages=debug5",
	} {
		c := rawConnectParams(t, e.viaProxy(), map[string]string{"options": opts})
		err := rawExec(t, c, "UPDATE accounts SET balance = 9 WHERE id = 1")
		if errCode(err) != "55Z01" {
			t.Errorf("%s: %v, want 55Z01", opts, err)
		}
		e.wantUntouched(t)
	}
}

// TestProbeInsideTransactionDoesNotOutliveSetLocal: a probe answered inside
// a transaction block does not clear the session's token that COMMIT
// restores after a SET LOCAL.
//
// The probe after a DO runs inside the client's transaction, where SET LOCAL
// has blanked the token; the proxy then believes the session holds none, but
// COMMIT restores the session's token 41 and the next write goes upstream
// unchecked.
func TestProbeInsideTransactionDoesNotOutliveSetLocal(t *testing.T) {
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

// TestProbeInsideTransactionDoesNotOutliveRollback: a probe answered inside
// a transaction block does not clear the session's token that ROLLBACK
// restores after a RESET.
//
// The same with RESET undone by ROLLBACK.
func TestProbeInsideTransactionDoesNotOutliveRollback(t *testing.T) {
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

// TestProbeNotFooledByOperatorInSearchPath: the probe compares with
// pg_catalog's operator whatever the search_path: a user's <> cannot hide a
// stale token.
//
// The probe (and the pre-check DO block) compare with an unqualified "<>",
// resolved through the session's search_path. With an operator
// public.<>(text, text) that always says false and search_path = public,
// pg_catalog, every probe answers "no token": the session keeps the stale
// token 41 its DO block set, and its writes go upstream unchecked.
func TestProbeNotFooledByOperatorInSearchPath(t *testing.T) {
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

// A session without a token gets PostgreSQL's answers when it resets a
// setting after BEGIN and then sets the block's isolation level: the probe
// that follows the RESET must not be the block's first query, which takes
// its snapshot (25001 for the SET TRANSACTION that follows).
func TestSetTransactionAfterResetInABlockAnswersAsPostgreSQL(t *testing.T) {
	e := newFencedEnv(t, nil)
	for name, open := range map[string][]pgproto3.FrontendMessage{
		"two Queries": {&pgproto3.Query{String: "BEGIN"}, &pgproto3.Query{String: "RESET ALL"}},
		"one Query":   {&pgproto3.Query{String: "BEGIN; RESET lock.fencing_token"}},
	} {
		msgs := append(open, &pgproto3.Query{String: "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"},
			&pgproto3.Query{String: "SHOW transaction_isolation"}, &pgproto3.Query{String: "COMMIT"})
		direct := directConn(t, e).transcript(len(msgs), msgs...)
		proxied := readyConn(t, e, "").transcript(len(msgs), msgs...)
		if direct != proxied {
			t.Errorf("%s: directly %s, through the proxy %s", name, direct, proxied)
		}
	}
}

// A probe held back while the block has no snapshot does not leave a
// session without a token treated as fenced for the rest of the block: a
// large-object call (a fast-path FunctionCall) right after the RESET, and
// the EXECUTE of a statement code prepared, get PostgreSQL's answers, as
// does a pipeline that opens a block with risky data (pgjdbc's way).
func TestAHeldProbeLeavesTheBlockAnsweringAsPostgreSQL(t *testing.T) {
	e := newFencedEnv(t, nil)
	var oid uint32
	if err := connect(t, e.direct(), pgx.QueryExecModeExec).QueryRow(context.Background(), "SELECT 'lo_creat'::regproc::oid").Scan(&oid); err != nil {
		t.Fatal(err)
	}
	arg := binary.BigEndian.AppendUint32(nil, 0x60000) // INV_READ|INV_WRITE
	lo := &pgproto3.FunctionCall{Function: oid, ArgFormatCodes: []uint16{1}, Arguments: [][]byte{arg}, ResultFormatCode: 1}
	q := func(s string) []pgproto3.FrontendMessage {
		return []pgproto3.FrontendMessage{&pgproto3.Query{String: s}}
	}
	for name, steps := range map[string][][]pgproto3.FrontendMessage{
		"RESET, then lo_creat": {q("BEGIN"), q("RESET lock.fencing_token"), {lo}, q("ROLLBACK")},
		"RESET, SELECT, then EXECUTE of a statement a function prepared": {
			q("DO $$ BEGIN EXECUTE 'PREPARE hidden AS SELECT 1'; END $$"),
			q("BEGIN"), q("RESET lock.fencing_token"), q("SELECT 1"), q("EXECUTE hidden"), q("ROLLBACK")},
		"pipelined BEGIN and SET LOCAL 'café', then lo_creat": {
			pipeline(pbe("BEGIN"), pbe("SET LOCAL application_name = 'café'"), []pgproto3.FrontendMessage{&pgproto3.Sync{}}),
			{lo}, q("ROLLBACK")},
	} {
		var direct, proxied string
		d, p := directConn(t, e), readyConn(t, e, "")
		for _, s := range steps {
			direct += d.transcript(1, s...) + " "
			proxied += p.transcript(1, s...) + " "
		}
		if direct != proxied {
			t.Errorf("%s: directly %s, through the proxy %s", name, direct, proxied)
		}
	}
}
