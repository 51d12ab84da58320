package integration

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Transactions: every transaction that may write under a token is
// checked, however a Query or pipeline begins and ends them.
//
// The tests use staleEnv: the mark of acct/1 is 100; a write under the
// stale token 41 (or 50) must be refused, and the balance must stay 0.

// TestStaleWriteRefusedAfterEveryTransactionBoundaryInOneQuery: a write
// after any transaction boundary inside one simple Query (COMMIT, ROLLBACK,
// AND CHAIN, savepoints, PREPARE TRANSACTION, an error) meets a check with
// the token then in force.
//
// One simple Query whose statements span several transactions (COMMIT, END,
// ROLLBACK, … AND CHAIN, savepoints, PREPARE TRANSACTION, an implicit
// COMMIT, an error or a statement that cannot run in a block in the middle).
// The session's token is fresh (150) for the first transaction; a stale one
// (50) is set in the middle, so every write with balance = 2 comes after it
// in a transaction of its own (or after a ROLLBACK TO) and must meet a
// check: it must not land.
func TestStaleWriteRefusedAfterEveryTransactionBoundaryInOneQuery(t *testing.T) {
	e := staleEnv(t)
	cases := []string{
		"BEGIN; SELECT 1; COMMIT; SET lock.fencing_token = 50; BEGIN; UPDATE accounts SET balance = 2 WHERE id = {id}; COMMIT",
		"BEGIN; SELECT 1; END; SET lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"UPDATE accounts SET balance = 1 WHERE id = {id}; COMMIT; SET lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"SELECT 1; COMMIT; SET LOCAL lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"BEGIN; UPDATE accounts SET balance = 1 WHERE id = {id}; SET lock.fencing_token = 50; COMMIT AND CHAIN; UPDATE accounts SET balance = 2 WHERE id = {id}; COMMIT",
		"BEGIN; SELECT 1; COMMIT AND CHAIN; SET LOCAL lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}; COMMIT",
		"BEGIN; SELECT 1; ROLLBACK AND CHAIN; SET LOCAL lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}; COMMIT",
		"BEGIN; SAVEPOINT a; SELECT 1; ROLLBACK TO a; SET LOCAL lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}; COMMIT",
		"BEGIN; SAVEPOINT a; SELECT 1; ROLLBACK TO SAVEPOINT a; RELEASE a; SET LOCAL lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}; COMMIT",
		"BEGIN; SAVEPOINT a; SAVEPOINT b; SELECT 1; ROLLBACK TO a; SET LOCAL lock.fencing_token = 50; RELEASE a; UPDATE accounts SET balance = 2 WHERE id = {id}; COMMIT",
		"SAVEPOINT a; SELECT 1; ROLLBACK TO a; SET LOCAL lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"BEGIN; SELECT 1; ROLLBACK; SET lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"BEGIN; SELECT 1; ABORT; START TRANSACTION; SET LOCAL lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}; END",
		"BEGIN; SELECT 1; PREPARE TRANSACTION 'h4{id}'; SET lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"BEGIN; SELECT 1; PREPARE TRANSACTION 'h4{id}'; COMMIT PREPARED 'h4{id}'; SET lock.fencing_token = 50; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"SELECT 1; SET lock.fencing_token = 50; SELECT 1/0; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"SELECT 1; COMMIT; SET lock.fencing_token = 50; VACUUM accounts; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"SELECT 1; SET lock.fencing_token = 50; COMMIT; VACUUM accounts; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"BEGIN; SELECT 1; COMMIT; SET lock.fencing_token = 50; COMMIT; ROLLBACK; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"BEGIN; SELECT 1; COMMIT; BEGIN; SET lock.fencing_token = 50; COMMIT AND CHAIN; INSERT INTO accounts VALUES ({id}+1000, 2); COMMIT",
		"BEGIN; SELECT 1; COMMIT; BEGIN; SET lock.fencing_token = 50; ROLLBACK AND CHAIN; SET lock.fencing_token = 50; SAVEPOINT x; RELEASE SAVEPOINT x; INSERT INTO accounts VALUES ({id}+1000, 2); COMMIT",
		"BEGIN; SELECT 1; COMMIT; BEGIN; SAVEPOINT s; SET lock.fencing_token = 50; RELEASE s; COMMIT; INSERT INTO accounts VALUES ({id}+1000, 2)",
		"BEGIN; SELECT 1; SAVEPOINT s; SET lock.fencing_token = 50; ROLLBACK TO s; SET LOCAL lock.fencing_token = 50; COMMIT; SET lock.fencing_token = 50; INSERT INTO accounts VALUES ({id}+1000, 2)",
		"BEGIN READ ONLY; SELECT 1; COMMIT; SET lock.fencing_token = 50; BEGIN READ WRITE; UPDATE accounts SET balance = 2 WHERE id = {id}; COMMIT",
		"BEGIN; SELECT 1; COMMIT; SET lock.fencing_token = 50; PREPARE h4p AS UPDATE accounts SET balance = 2 WHERE id = {id}; EXECUTE h4p",
		"BEGIN; SELECT 1; COMMIT; SET lock.fencing_token = 50; CREATE TEMP TABLE h4t{id} AS SELECT 1; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"COMMIT; COMMIT; SET lock.fencing_token = 50; COMMIT; UPDATE accounts SET balance = 2 WHERE id = {id}",
		"BEGIN; SELECT 1; COMMIT; SET lock.fencing_token = 50; EXPLAIN ANALYZE UPDATE accounts SET balance = 2 WHERE id = {id}",
		"BEGIN; SELECT 1; COMMIT; SET lock.fencing_token = 50; WITH x AS (UPDATE accounts SET balance = 2 WHERE id = {id} RETURNING 1) SELECT * FROM x",
	}
	admin := rawConnect(t, e.direct())
	var mp string
	if r, err := admin.Exec(t.Context(), "SHOW max_prepared_transactions").ReadAll(); err == nil {
		mp = string(r[0].Rows[0][0])
	}
	t.Logf("max_prepared_transactions = %s", mp)
	for i, text := range cases {
		id := fmt.Sprint(i + 10)
		res := "h4/" + id
		harnessExec(t, e.direct(), "INSERT INTO accounts VALUES ("+id+", 0)", "INSERT INTO fence.hwm VALUES ('"+res+"', 100, now())")
		text = strings.ReplaceAll(text, "{id}", id)
		c := rawConnect(t, e.viaProxy())
		if err := rawExec(t, c, "SET lock.fencing_token = 150; SET lock.resource = '"+res+"'"); err != nil {
			t.Fatal(err)
		}
		err := rawExec(t, c, text)
		var code string
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			code = pe.Code
		}
		n := e.count(t, "SELECT count(*) FROM accounts WHERE balance = 2 AND id IN ("+id+", "+id+"+1000)")
		t.Logf("%d %s: %s %v", i, text, code, err)
		if n != 0 {
			t.Errorf("%s: the stale write landed (error %v)", text, err)
		}
		if err == nil {
			t.Errorf("%s: no error", text)
		}
		if err := rawExec(t, c, "ROLLBACK"); err != nil {
			t.Errorf("%s: session not usable afterwards: %v", text, err)
		}
		admin.Exec(t.Context(), "ROLLBACK PREPARED 'h4"+id+"'").ReadAll()
	}
}

// TestCommitAndChainChecksAgain: the transaction COMMIT AND CHAIN starts
// inside a Query is checked again: the write in it is refused once the mark
// moved on.
//
// COMMIT AND CHAIN starts a new transaction inside the same Query; its write
// is checked again, after the mark moved on (bump stands in for a new
// holder).
func TestCommitAndChainChecksAgain(t *testing.T) {
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

// TestSessionTokenCheckedInTransactionCheckedForCommentToken: a transaction
// checked for a comment's token and resource is checked again for the
// session's own token.
//
// A transaction checked for a comment directive (token 1 for acct/9) counts
// as checked for the session's own token too. A later statement without a
// comment carries the session's stale token 41 for acct/1; decide would
// check it again (the check keys differ), but analyze's fast path (mayMatter
// false, unit checked) forwards it without analysis, and the UPDATE lands.
func TestSessionTokenCheckedInTransactionCheckedForCommentToken(t *testing.T) {
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

// TestRolledBackWorkNeverAdvances: a checked transaction that rolls back
// leaves the mark where it was, in every protocol mode.
func TestRolledBackWorkNeverAdvances(t *testing.T) {
	e := newFencedEnv(t, nil)
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			c := connect(t, e.viaProxy(), mode)
			tx, err := c.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(t.Context(), "/* fencing_token=500 resource=rb */ UPDATE accounts SET balance = $1 WHERE id = 1", 77); err != nil {
				t.Fatal(err)
			}
			tx.Rollback(t.Context())
			if m := e.mark(t, "rb"); m != 0 {
				t.Errorf("mark %d after rollback, want none", m)
			}
		})
	}
}

// TestSavepointRollbackChecksAgain: a ROLLBACK TO SAVEPOINT undoes the
// advance made after the savepoint, so the next statement must check again.
func TestSavepointRollbackChecksAgain(t *testing.T) {
	e := newFencedEnv(t, nil)
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			c := connect(t, e.viaProxy(), mode)
			res := "sp/" + name
			mustExec(t, c, "SET lock.resource = '"+res+"'")
			mustExec(t, c, "BEGIN")
			mustExec(t, c, "SAVEPOINT s1")
			mustExec(t, c, "SET lock.fencing_token = 50")
			mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 0)
			mustExec(t, c, "ROLLBACK TO SAVEPOINT s1")
			// SET inside the savepoint was undone too; set it again.
			mustExec(t, c, "SET lock.fencing_token = 50")
			mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 1)
			mustExec(t, c, "COMMIT")
			if m := e.mark(t, res); m != 50 {
				t.Fatalf("mark %d, want 50: the write after ROLLBACK TO ran unchecked", m)
			}
		})
	}
}

// TestTokenChangedMidTransaction: a transaction that switches to another
// token is checked again, under the new one.
func TestTokenChangedMidTransaction(t *testing.T) {
	e := newFencedEnv(t, nil)
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			c := connect(t, e.viaProxy(), mode)
			res := "mid/" + name
			mustExec(t, c, "SET lock.resource = '"+res+"'")
			mustExec(t, c, "BEGIN")
			mustExec(t, c, "SET LOCAL lock.fencing_token = 5")
			mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 0)
			mustExec(t, c, "SET LOCAL lock.fencing_token = 3")
			_, err := c.Exec(t.Context(), "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 0)
			wantCode(t, err, "55Z01")
			mustExec(t, c, "ROLLBACK")
			// A switch of resource is checked under the new resource.
			mustExec(t, c, "BEGIN")
			mustExec(t, c, "SET LOCAL lock.fencing_token = 8")
			mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 0)
			mustExec(t, c, "SET LOCAL lock.resource = '"+res+"/b'")
			mustExec(t, c, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", 0)
			mustExec(t, c, "COMMIT")
			if m1, m2 := e.mark(t, res), e.mark(t, res+"/b"); m1 != 8 || m2 != 8 {
				t.Fatalf("marks %d and %d, want 8 and 8", m1, m2)
			}
		})
	}
}

// TestNoTxnBlockStatementWithTokenRefused: a statement that cannot run in a
// transaction block, with a token, is refused (0A000) with a message naming
// it: no check can go in front of it.
func TestNoTxnBlockStatementWithTokenRefused(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	_, err := c.Exec(t.Context(), "/* fencing_token=5 resource=r */ VACUUM accounts")
	pgErr := wantCode(t, err, "0A000")
	if !strings.Contains(pgErr.Message, "VACUUM") {
		t.Errorf("message %q does not name the statement", pgErr.Message)
	}
	mustExec(t, c, "VACUUM accounts") // without a token it runs

	// A token in the session's setting refuses it too, through a pre-check
	// of its own (VACUUM cannot share a transaction with the check).
	mustExec(t, c, "SET lock.fencing_token = 5")
	_, err = c.Exec(t.Context(), "VACUUM accounts")
	pgErr = wantCode(t, err, "0A000")
	if !strings.Contains(pgErr.Message, "VACUUM") || pgErr.Where != "" {
		t.Errorf("refusal %q (where %q)", pgErr.Message, pgErr.Where)
	}
	if err := c.Ping(t.Context()); err != nil {
		t.Fatalf("connection unusable after the refusal: %v", err)
	}
	// Once the setting is empty again, VACUUM runs (the session still
	// counts as one that may carry a token, so the pre-check runs and passes).
	mustExec(t, c, "RESET lock.fencing_token")
	mustExec(t, c, "VACUUM accounts")
	mustExec(t, c, "CREATE INDEX CONCURRENTLY accounts_balance ON accounts (balance)")
	// And ordinary statements still work and are fenced as before.
	mustExec(t, c, "SET lock.fencing_token = 6")
	mustExec(t, c, "SET lock.resource = 'vac'")
	mustExec(t, c, "UPDATE accounts SET balance = balance WHERE id = 1")
	if m := e.mark(t, "vac"); m != 6 {
		t.Fatalf("mark %d, want 6", m)
	}
	// psql, which waits for each reply, sees the same.
	out, _ := e.psql(t, "SET lock.resource = 'vac';\nSET lock.fencing_token = 7;\nVACUUM accounts;\nSELECT 'still here';\n", "-v", "ON_ERROR_STOP=0")
	if !strings.Contains(out, "cannot run inside a transaction block") || !strings.Contains(out, "still here") {
		t.Errorf("psql output:\n%s", out)
	}
}
