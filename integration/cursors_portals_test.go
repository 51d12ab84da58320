package integration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Cursors and portals: what a FETCH, MOVE or Execute of a portal runs is
// checked, and what it sets (the token) is seen.
//
// The tests use staleEnv: the mark of acct/1 is 100; a write under the
// stale token 41 (or 50) must be refused, and the balance must stay 0.

// TestWithHoldCursorSettingTokenAtCommitIsSeen: a WITH HOLD cursor whose
// query sets the token does so at COMMIT: the stale writes after it are
// refused.
//
// A WITH HOLD cursor's query runs to its end at COMMIT, so its set_config
// calls set the stale token then, after the DECLARE and with no statement in
// between.
func TestWithHoldCursorSettingTokenAtCommitIsSeen(t *testing.T) {
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

// TestFetchSettingTokenAfterCheckChecksAgain: a FETCH of a cursor whose
// query sets the token makes the next write in the transaction checked
// again.
//
// A cursor whose query calls set_config sets the token when FETCHed, after
// the FETCH's own check ran with no token; the transaction counts as checked
// and the UPDATE runs unchecked.
func TestFetchSettingTokenAfterCheckChecksAgain(t *testing.T) {
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

// TestFetchSettingTokenAfterProbeIsSeen: a FETCH that sets the token after a
// probe said "no token" is seen: the session's writes stay checked.
//
// A probe (after DO) clears the proxy's "may hold a token" while an open
// cursor still holds a set_config call; FETCH then sets the token without
// the proxy looking at any text, and the session's writes from then on are
// forwarded with no check at all.
func TestFetchSettingTokenAfterProbeIsSeen(t *testing.T) {
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

// TestSQLFetchOfProtocolWritePortalIsGuarded: SQL FETCH of a protocol portal
// bound to an UPDATE of a protected table needs a token (55Z02): nothing
// lands.
//
// SQL FETCH (or MOVE) runs any portal of the session, including a protocol
// portal bound to UPDATE … RETURNING and never Executed; the gate reads
// "FETCH" as a read of a SQL cursor and asks no token for the protected
// table: the write lands without one (55Z02 expected).
func TestSQLFetchOfProtocolWritePortalIsGuarded(t *testing.T) {
	e := newFencedEnv(t, &gate.Config{Tables: map[gate.TableRef]gate.Protection{{Schema: "public", Name: "accounts"}: {Resource: "acct/1", RequireToken: true}}})
	conn := readyConn(t, e, "fetch-portal")
	conn.send(&pgproto3.Query{String: "BEGIN"})
	conn.send(&pgproto3.Parse{Name: "s", Query: "UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING id"})
	conn.send(&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s"})
	conn.send(&pgproto3.Sync{})
	conn.flush()
	codes, _, to := conn.readyCount(2, 10*time.Second)
	if to || len(codes) > 1 || len(codes) == 1 && codes[0] != "55Z02" {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	if len(codes) == 1 { // refused already at Bind, where the check now runs
		e.wantUntouched(t)
		return
	}
	conn.send(&pgproto3.Query{String: "FETCH ALL FROM p"})
	conn.send(&pgproto3.Query{String: "COMMIT"})
	conn.flush()
	codes, rows, to := conn.readyCount(2, 10*time.Second)
	if to {
		t.Fatal("timed out")
	}
	t.Logf("codes %v rows %d", codes, rows)
	e.wantUntouched(t)
}

// TestSQLMoveOfStaleCommentTokenPortalIsChecked: SQL MOVE of a protocol
// portal bound to an UPDATE with a stale comment token is checked: nothing
// lands. (The check goes before the Bind, which takes the portal's
// snapshot, and refuses it there.)
//
// The same with a comment token: the stale holder's UPDATE carries
// fencing_token=41, is bound as a portal and run by SQL FETCH: no check at
// all, the stale write lands.
func TestSQLMoveOfStaleCommentTokenPortalIsChecked(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "fetch-comment")
	conn.send(&pgproto3.Query{String: "BEGIN"})
	conn.send(&pgproto3.Parse{Name: "s", Query: "/* fencing_token=41 resource=acct/1 */ UPDATE accounts SET balance = 1 WHERE id = 1 RETURNING id"})
	conn.send(&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s"})
	conn.send(&pgproto3.Sync{})
	conn.flush()
	// The Bind takes the portal's snapshot: the comment's token is
	// checked before it, and refused there.
	if codes, _, to := conn.readyCount(2, 10*time.Second); to || len(codes) != 1 || codes[0] != "55Z01" {
		t.Fatalf("setup: codes %v, timed out %v; want the Bind's check refused (55Z01)", codes, to)
	}
	conn.send(&pgproto3.Query{String: "MOVE ALL IN p"})
	conn.send(&pgproto3.Query{String: "COMMIT"})
	conn.await(2)
	e.wantUntouched(t)
}

// TestSuspendedPortalRefusedAfterStaleSet: the next Execute of a suspended
// portal after SET to a stale token is refused, and nothing of the
// transaction lands.
//
// A portal whose select list writes (f() inserts a row per call), run one
// row at a time (PortalSuspended) in a transaction checked with token 200; a
// simple Query then sets the stale token 41; the next Execute of the same
// portal is refused and nothing of the transaction lands.
func TestSuspendedPortalRefusedAfterStaleSet(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(), "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ INSERT INTO invoices (amount) VALUES (1) RETURNING 1 $$")
	conn := readyConn(t, e, "")
	if got := conn.transcript(1, &pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 200; BEGIN"}); got != "CCCZ" {
		t.Fatalf("setup: %s", got)
	}
	got := conn.transcript(1,
		&pgproto3.Parse{Name: "s", Query: "SELECT f() FROM generate_series(1, 3)"},
		&pgproto3.Bind{DestinationPortal: "a", PreparedStatement: "s"},
		&pgproto3.Execute{Portal: "a", MaxRows: 1}, &pgproto3.Sync{})
	if got != "12DsZ" {
		t.Fatalf("first Execute: %s", got)
	}
	if got := conn.transcript(1, &pgproto3.Query{String: "SET lock.fencing_token = 41"}); got != "CZ" {
		t.Fatalf("SET: %s", got)
	}
	got = conn.transcript(1, &pgproto3.Execute{Portal: "a", MaxRows: 1}, &pgproto3.Sync{})
	if got != "E{55Z01}Z" {
		t.Errorf("second Execute: %s, want E{55Z01}Z", got)
	}
	if got := conn.transcript(1, &pgproto3.Query{String: "COMMIT"}); got != "CZ" {
		t.Errorf("COMMIT: %s", got)
	}
	if got := invoices(t, e); got != "" {
		t.Errorf("invoices %q: the aborted transaction's rows landed", got)
	}
}

// TestCursorDeclaredBeforeTheTokenIsRefused: a cursor reads the snapshot
// its DECLARE took. Declared before the transaction set its token, its
// FETCH is checked after that snapshot: the check waits for the previous
// holder (token 100) and passes, and under READ COMMITTED the cursor would
// still return the balance from before that holder's commit. The FETCH is
// refused instead (0A000), and a stale token there is refused as stale
// (55Z01) first.
func TestCursorDeclaredBeforeTheTokenIsRefused(t *testing.T) {
	for _, tc := range []struct {
		token   string
		comment bool // the FETCH's comment carries the token, not SET LOCAL
		code    string
	}{{"101", false, "0A000"}, {"99", false, "55Z01"}, {"101", true, "0A000"}} {
		t.Run(fmt.Sprintf("%s/comment=%v", tc.token, tc.comment), func(t *testing.T) {
			e := staleEnv(t) // mark of acct/1 is 100
			a := rawConnect(t, e.viaProxy())
			rawSetup(t, a, "BEGIN", "DECLARE c CURSOR FOR SELECT balance FROM accounts WHERE id = 1")
			b := rawConnect(t, e.viaProxy()) // the holder of token 100 writes and commits
			rawSetup(t, b, "/* fencing_token=100 resource=acct/1 */ UPDATE accounts SET balance = 7 WHERE id = 1")
			fetch := "FETCH c"
			if tc.comment {
				fetch = "/* fencing_token=" + tc.token + " resource=acct/1 */ FETCH c"
			} else {
				rawSetup(t, a, "SET LOCAL lock.fencing_token = "+tc.token, "SET LOCAL lock.resource = 'acct/1'")
			}
			r, err := a.Exec(t.Context(), fetch).ReadAll()
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != tc.code {
				t.Fatalf("FETCH of the cursor declared before the token %s: %v (rows %v), want %s", tc.token, err, r, tc.code)
			}
		})
	}
}
