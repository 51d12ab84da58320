package integration

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// cursorScript exercises SQL cursors the way drivers and ORMs use them
// (psycopg's named cursors, Django's iterator(), SQLAlchemy's
// stream_results): fetching twice and more, every direction of a SCROLL
// cursor, MOVE, WITH HOLD cursors after their transaction ended and outside
// any, a cursor undone by ROLLBACK TO SAVEPOINT, CLOSE and CLOSE ALL. Each
// statement's result is compared, rows or SQLSTATE.
var cursorScript = []string{
	"BEGIN",
	"DECLARE k SCROLL CURSOR FOR SELECT g FROM generate_series(1, 9) g",
	"FETCH 2 FROM k", "FETCH 2 FROM k", "MOVE 1 FROM k", "FETCH NEXT FROM k",
	"FETCH LAST FROM k", "FETCH BACKWARD 2 FROM k", "FETCH ABSOLUTE 3 FROM k",
	"FETCH RELATIVE -1 FROM k", "FETCH PRIOR FROM k", "FETCH FIRST FROM k", "MOVE FORWARD ALL IN k", "FETCH BACKWARD ALL FROM k",
	"DECLARE h CURSOR WITH HOLD FOR SELECT g FROM generate_series(1, 5) g",
	"FETCH 1 FROM h",
	"SAVEPOINT s",
	"DECLARE gone CURSOR FOR SELECT 1",
	"FETCH gone",
	"ROLLBACK TO SAVEPOINT s",
	"FETCH gone",
	"ROLLBACK TO SAVEPOINT s",
	"FETCH 1 FROM h",
	"COMMIT",
	"FETCH 2 FROM h", "FETCH 2 FROM h", "FETCH k",
	"DECLARE o CURSOR WITH HOLD FOR SELECT 'outside'",
	"FETCH o", "FETCH o",
	"BEGIN",
	"DECLARE r CURSOR WITH HOLD FOR SELECT 'rolled back'",
	"ROLLBACK",
	"FETCH r",
	"CLOSE h", "FETCH h",
	"CLOSE ALL", "FETCH o",
	"SELECT name FROM pg_cursors ORDER BY 1",
	"SELECT name FROM pg_prepared_statements ORDER BY 1",
}

// runScript runs each statement on conn and renders its rows or its
// SQLSTATE, one line a statement.
func runScript(t *testing.T, conn *pgx.Conn, script []string) []string {
	t.Helper()
	var out []string
	for _, sql := range script {
		rows, err := conn.Query(context.Background(), sql)
		var got []string
		if err == nil {
			for rows.Next() {
				vals, err := rows.Values()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprint(vals...))
			}
			err = rows.Err()
		}
		if err != nil {
			got = []string{"ERROR " + sqlState(err)}
		}
		out = append(out, sql+" => "+strings.Join(got, ","))
	}
	return out
}

func sqlState(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return err.Error()
}

// TestSQLCursorsAnswerAsPostgres: in a session with no token, every
// cursor statement gets through the proxy what PostgreSQL answers
// directly, in each protocol mode; with a current token, the same (each
// transaction is checked, nothing refused); with a stale token, a FETCH
// of a cursor is refused (55Z01).
func TestSQLCursorsAnswerAsPostgres(t *testing.T) {
	e := newFencedEnv(t, nil)
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			want := runScript(t, connect(t, e.direct(), mode), cursorScript)
			for _, token := range []string{"", "lock.fencing_token=50"} {
				dsn := e.viaProxy()
				if token != "" {
					dsn += "&options=" + strings.ReplaceAll(url.QueryEscape("-c "+token+" -c lock.resource=cursors"), "+", "%20")
				}
				got := runScript(t, connect(t, dsn, mode), cursorScript)
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("token %q: statement %d:\n proxy  %s\n direct %s", token, i, got[i], want[i])
					}
				}
			}
		})
	}
	if m := e.mark(t, "cursors"); m != 50 {
		t.Fatalf("mark of the fenced run %d, want 50", m)
	}
	stale := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, stale, "DECLARE h CURSOR WITH HOLD FOR SELECT 1")
	mustExec(t, stale, "SET lock.resource = 'cursors'")
	mustExec(t, stale, "SET lock.fencing_token = 49")
	_, err := stale.Exec(context.Background(), "FETCH h")
	wantCode(t, err, "55Z01")
	mustExec(t, stale, "BEGIN")
	_, err = stale.Exec(context.Background(), "DECLARE k CURSOR FOR SELECT 1")
	wantCode(t, err, "55Z01")
}

// TestProxyLeavesNothingInTheSession: nothing of the proxy's own shows in
// pg_prepared_statements or pg_cursors, whether the session has a token or
// not, after a check, a refusal and a probe (a DO block makes one).
func TestProxyLeavesNothingInTheSession(t *testing.T) {
	e := newFencedEnv(t, nil)
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			plain := connect(t, e.viaProxy(), mode)
			fenced := connect(t, e.viaProxy(), mode)
			mustExec(t, fenced, "SET lock.resource = 'acct/1'")
			mustExec(t, fenced, "SET lock.fencing_token = 5")
			for _, c := range []*pgx.Conn{plain, fenced} {
				mustExec(t, c, "DO $$BEGIN NULL; END$$")
				mustExec(t, c, "UPDATE accounts SET balance = balance + 1")
				c.Exec(context.Background(), "/* fencing_token=x */ SELECT 1") // refused: 22023
				for _, view := range []string{"pg_prepared_statements", "pg_cursors"} {
					var n int
					q := "SELECT count(*) FROM " + view + " WHERE name LIKE 'fenceproxy%'"
					if err := c.QueryRow(context.Background(), q).Scan(&n); err != nil {
						t.Fatal(err)
					}
					if n != 0 {
						t.Errorf("%s shows %d of the proxy's own", view, n)
					}
				}
			}
		})
	}
}
