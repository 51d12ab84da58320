package integration

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A stale holder whose transaction the server reported aborted (its own
// check refused it) leaves it with ROLLBACK TO SAVEPOINT and writes in the
// same pipeline, by the extended protocol and by one simple Query: the
// write is checked and refused, nothing lands.
func TestStaleWriteAfterLeavingAnAbortedTransactionRefused(t *testing.T) {
	e := newFencedEnv(t, nil)
	for _, how := range []string{"extended", "simple"} {
		t.Run(how, func(t *testing.T) {
			a := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
			mustExec(t, a, "SET lock.resource = 'abort/"+how+"'")
			mustExec(t, a, "SET lock.fencing_token = 41")
			b := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
			mustExec(t, b, "/* fencing_token=42 resource=abort/"+how+" */ SELECT 1")
			pc := a.PgConn()
			if _, err := pc.Exec(t.Context(), "BEGIN; SAVEPOINT sp").ReadAll(); err != nil {
				t.Fatal(err)
			}
			_, err := pc.Exec(t.Context(), "SELECT 1").ReadAll()
			wantCode(t, err, "55Z01") // the transaction is now aborted
			switch how {
			case "extended":
				batch := &pgconn.Batch{}
				batch.ExecParams("ROLLBACK TO sp", nil, nil, nil, nil)
				batch.ExecParams("UPDATE accounts SET balance = 666 WHERE id = 1", nil, nil, nil, nil)
				_, err = pc.ExecBatch(t.Context(), batch).ReadAll()
			default:
				_, err = pc.Exec(t.Context(), "ROLLBACK TO sp; UPDATE accounts SET balance = 666 WHERE id = 1").ReadAll()
			}
			wantCode(t, err, "55Z01")
			pc.Exec(t.Context(), "ROLLBACK").ReadAll()
			if got := e.balance(t); got != 0 {
				t.Fatalf("stale write landed: balance %d", got)
			}
		})
	}
}

// A WITH HOLD cursor whose transaction rolled back is kept by the proxy
// (the server dropped it); a function called while the holder's token was
// valid declares another cursor of that name. After the takeover, FETCH of
// it is checked and refused. (A held cursor's query runs to completion when
// its transaction commits, so what it writes is written then, under the
// check of that transaction.)
func TestStaleFetchOfAHeldCursorRedeclaredByAFunctionRefused(t *testing.T) {
	e := newFencedEnv(t, nil)
	harnessExec(t, e.direct(),
		`CREATE FUNCTION redeclare() RETURNS int LANGUAGE plpgsql AS $$
		BEGIN
			EXECUTE 'DECLARE h CURSOR WITH HOLD FOR SELECT 2';
			RETURN 1;
		END $$`)
	a := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, a, "SET lock.resource = 'held'")
	mustExec(t, a, "SET lock.fencing_token = 41")
	mustExec(t, a, "BEGIN")
	mustExec(t, a, "DECLARE h CURSOR WITH HOLD FOR SELECT 1")
	mustExec(t, a, "ROLLBACK")
	mustExec(t, a, "SELECT redeclare()")
	b := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, b, "/* fencing_token=42 resource=held */ SELECT 1")
	_, err := a.PgConn().Exec(t.Context(), "FETCH h").ReadAll()
	wantCode(t, err, "55Z01")
}
