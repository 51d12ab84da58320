package integration

import (
	"context"
	"testing"
	"time"

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
