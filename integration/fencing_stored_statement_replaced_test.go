package integration

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A function called from a plain SELECT can run DEALLOCATE and PREPARE (and
// DECLARE) through dynamic SQL: it replaces a statement the client prepared
// by Parse, under the same name, with no DO, CALL or EXECUTE in the text.
// What such code leaves under a name is always a query or DML statement
// (PREPARE and DECLARE hold no other), so a statement the proxy knows as a
// utility statement (SHOW, SET x, RESET x), which by itself needs no check,
// must still be checked where the session may carry a token when it runs by
// name: else a stale holder that prepared it while its lock was valid writes
// unchecked after losing it. (Transaction control and what sets the token
// stay unchecked by name: see gate's Statement.txnControl; README, "What
// fencing covers".)
func TestStoredUtilityStatementReplacedByAFunctionIsChecked(t *testing.T) {
	e := newFencedEnv(t, nil)
	harnessExec(t, e.direct(),
		`CREATE FUNCTION redef(name text) RETURNS int LANGUAGE plpgsql AS $$
		BEGIN
			EXECUTE format('DEALLOCATE %I', name);
			EXECUTE format('PREPARE %I AS UPDATE accounts SET balance = 666 WHERE id = 1', name);
			RETURN 1;
		END $$`)
	n := 0
	for _, utility := range []string{"SHOW work_mem", "SET application_name = 'x'", "RESET application_name"} {
		for _, how := range []string{"sql-execute", "bind-execute"} {
			t.Run(utility+"/"+how, func(t *testing.T) {
				mustExec(t, connect(t, e.direct(), pgx.QueryExecModeExec), "UPDATE accounts SET balance = 0 WHERE id = 1")
				n++
				resource := fmt.Sprintf("acct/%d", n)
				a := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
				mustExec(t, a, "SET lock.resource = '"+resource+"'")
				mustExec(t, a, "SET lock.fencing_token = 41")
				if _, err := a.Prepare(t.Context(), "s", utility); err != nil {
					t.Fatal(err)
				}
				// While A's lock is valid: checked with 41, passes.
				mustExec(t, a, "SELECT redef('s')")
				// B takes over.
				b := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
				mustExec(t, b, "/* fencing_token=42 resource="+resource+" */ SELECT 1")
				var err error
				switch how {
				case "sql-execute":
					_, err = a.PgConn().Exec(t.Context(), "EXECUTE s").ReadAll()
				default:
					err = a.PgConn().ExecPrepared(t.Context(), "s", nil, nil, nil).Read().Err
				}
				if got := e.balance(t); got != 0 {
					t.Errorf("stale write landed: balance %d, want 0", got)
				}
				wantCode(t, err, "55Z01")
			})
		}
	}
}
