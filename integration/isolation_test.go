package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
	"github.com/jackc/pgx/v5"
)

// TestPreparedTransactionCannotWedgeAMark: a transaction that passed a
// fence check holds its resource's mark locked; prepared (two-phase
// commit), it would hold it until someone runs ROLLBACK PREPARED, even
// across restarts, and every later holder would block. PREPARE TRANSACTION
// is refused (0A000) in a session that may carry a token, in every protocol
// mode; the transaction stays the client's to end, and the next holder goes
// on. A session with no token may still prepare transactions.
func TestPreparedTransactionCannotWedgeAMark(t *testing.T) {
	e := newFencedEnv(t, nil)
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			a := connect(t, e.viaProxy(), mode)
			mustExec(t, a, "SET lock.resource = 'wedge/"+name+"'")
			mustExec(t, a, "SET lock.fencing_token = 10")
			mustExec(t, a, "BEGIN")
			mustExec(t, a, "UPDATE accounts SET balance = balance + 1 WHERE id = 1")
			_, err := a.Exec(context.Background(), "PREPARE TRANSACTION 'wedge_"+name+"'")
			wantCode(t, err, "0A000")
			mustExec(t, a, "ROLLBACK")

			b := connect(t, e.viaProxy(), mode)
			mustExec(t, b, "SET lock.resource = 'wedge/"+name+"'")
			mustExec(t, b, "SET lock.fencing_token = 11")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := b.Exec(ctx, "UPDATE accounts SET balance = balance + 1 WHERE id = 1"); err != nil {
				t.Fatalf("next holder: %v", err)
			}
			direct := connect(t, e.direct(), pgx.QueryExecModeExec)
			var n int
			if err := direct.QueryRow(context.Background(), "SELECT count(*) FROM pg_prepared_xacts").Scan(&n); err != nil || n != 0 {
				t.Fatalf("prepared transactions left: %d (%v)", n, err)
			}
		})
	}
	plain := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, plain, "BEGIN")
	mustExec(t, plain, "INSERT INTO invoices (amount) VALUES (1)")
	mustExec(t, plain, "PREPARE TRANSACTION 'plain'")
	mustExec(t, plain, "COMMIT PREPARED 'plain'")
}

// TestNewHolderSeesPreviousHolderInEveryIsolationLevel: old holder A (its
// token equal to the mark) updates a row and commits while new holder B's
// check waits on the mark's row lock; B reads the row and logs it. Under
// READ COMMITTED B sees A's commit; under REPEATABLE READ and SERIALIZABLE
// B's snapshot was taken before A committed, so B must fail with a
// serialization error (40001) rather than log the value from before A's
// commit. The same with a snapshot imported by SET TRANSACTION SNAPSHOT
// from before A's commit.
func TestNewHolderSeesPreviousHolderInEveryIsolationLevel(t *testing.T) {
	e := newFencedEnv(t, nil)
	ctx := context.Background()
	for _, level := range []string{"READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE", "imported snapshot"} {
		t.Run(level, func(t *testing.T) {
			resource := "iso/" + strings.ReplaceAll(level, " ", "-")
			direct := connect(t, e.direct(), pgx.QueryExecModeExec)
			mustExec(t, direct, "UPDATE accounts SET balance = 0 WHERE id = 1")
			a := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
			mustExec(t, a, "SET lock.resource = '"+resource+"'")
			mustExec(t, a, "SET lock.fencing_token = 10")
			mustExec(t, a, "SELECT 1") // the mark is 10 now: A's token equals it
			snap := connect(t, e.direct(), pgx.QueryExecModeSimpleProtocol)
			var snapshot string
			mustExec(t, snap, "BEGIN ISOLATION LEVEL REPEATABLE READ")
			if err := snap.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&snapshot); err != nil {
				t.Fatal(err)
			}
			mustExec(t, a, "BEGIN")
			mustExec(t, a, "UPDATE accounts SET balance = 100 WHERE id = 1")

			b := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
			mustExec(t, b, "SET lock.resource = '"+resource+"'")
			mustExec(t, b, "SET lock.fencing_token = 11")
			begin := "BEGIN ISOLATION LEVEL " + level
			if level == "imported snapshot" {
				begin = "BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '" + snapshot + "'"
			}
			mustExec(t, b, begin)
			done := make(chan error, 1)
			go func() {
				_, err := b.Exec(ctx, "INSERT INTO log (resource, token, client) SELECT 'seen', balance, 2 FROM accounts WHERE id = 1")
				done <- err
			}()
			waitLockWait(t, direct)
			mustExec(t, a, "COMMIT")
			mustExec(t, snap, "COMMIT")
			err := <-done
			if err == nil {
				mustExec(t, b, "COMMIT")
			} else {
				b.Exec(ctx, "ROLLBACK")
			}
			var seen []int64
			rows, qerr := direct.Query(ctx, "SELECT token FROM log WHERE resource = 'seen'")
			if qerr != nil {
				t.Fatal(qerr)
			}
			for rows.Next() {
				var v int64
				rows.Scan(&v)
				seen = append(seen, v)
			}
			mustExec(t, direct, "DELETE FROM log WHERE resource = 'seen'")
			switch {
			case err != nil:
				wantCode(t, err, "40001")
				if level == "READ COMMITTED" {
					t.Fatalf("READ COMMITTED failed: %v", err)
				}
			case len(seen) != 1 || seen[0] != 100:
				t.Fatalf("the new holder logged %v, want A's committed 100 (or a serialization failure)", seen)
			}
		})
	}
}

// waitLockWait waits until some backend waits on a lock.
func waitLockWait(t *testing.T, direct *pgx.Conn) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := direct.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no backend waits on the mark's lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTokenCeilingKeepsAResourceOpen: with a ceiling set (fenceproxy hwm
// ceiling), a token above it, set by a client through the proxy or passed to
// fence.check directly by a fence_client member, is refused (22023) and the
// mark stays, so the next real holder goes on; without a ceiling the same
// token would lock every real holder out until fenceproxy hwm set.
func TestTokenCeilingKeepsAResourceOpen(t *testing.T) {
	e := newFencedEnv(t, nil)
	ctx := context.Background()
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	q := fencestorepgx.Querier{Conn: admin}
	if err := fencestore.SetCeiling(ctx, q, 1_000_000); err != nil {
		t.Fatal(err)
	}
	if got, err := fencestore.Ceiling(ctx, q); err != nil || got != 1_000_000 {
		t.Fatalf("Ceiling = %d, %v", got, err)
	}
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			c := connect(t, e.viaProxy(), mode)
			mustExec(t, c, "SET lock.resource = 'ceiling'")
			mustExec(t, c, "SET lock.fencing_token = 9223372036854775807")
			_, err := c.Exec(ctx, "UPDATE accounts SET balance = balance + 1 WHERE id = 1")
			wantCode(t, err, "22023")
		})
	}
	_, err := admin.Exec(ctx, "CALL fence.check('9223372036854775807', 'ceiling', '', '', false, true)")
	wantCode(t, err, "22023")
	holder := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, holder, "SET lock.resource = 'ceiling'")
	mustExec(t, holder, "SET lock.fencing_token = 12")
	mustExec(t, holder, "UPDATE accounts SET balance = balance + 1 WHERE id = 1")
	if m := e.mark(t, "ceiling"); m != 12 {
		t.Fatalf("mark %d, want 12", m)
	}
	if err := fencestore.SetCeiling(ctx, q, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := fencestore.Ceiling(ctx, q); err != nil || got != 0 {
		t.Fatalf("Ceiling after removal = %d, %v", got, err)
	}
}
