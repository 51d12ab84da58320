package integration

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// When a transaction block fails, PostgreSQL keeps its portals, failed,
// until the block ends. The unnamed portal of a Query that failed points
// into memory freed at the next message, and PostgreSQL 15.9 and later read
// its statement list at Execute before they refuse it in the failed block:
// the backend reads freed memory, and its crash restarts every session of
// the server. Through the proxy the client gets the 25P02 an unharmed server
// answers, and the server and its other sessions stay up.
func TestPortalsOfAFailedBlockCannotCrashTheServer(t *testing.T) {
	e := newEnv(t)
	if err := rawExec(t, rawConnect(t, e.direct()), "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	bystander := connect(t, e.direct(), pgx.QueryExecModeSimpleProtocol)
	cases := []struct {
		name  string
		setup []pgproto3.FrontendMessage
		ready int
	}{
		{"the unnamed portal of a failed Query", []pgproto3.FrontendMessage{
			&pgproto3.Query{String: "BEGIN"},
			&pgproto3.Query{String: "DEALLOCATE nosuch"},
			// a message that fills the memory the failed portal points into
			&pgproto3.Query{String: "DECLARE c1 SCROLL CURSOR FOR SELECT v FROM t ORDER BY v"},
		}, 3},
		{"the unnamed portal of a Query whose code raised 25P02", []pgproto3.FrontendMessage{
			&pgproto3.Query{String: "BEGIN"},
			&pgproto3.Query{String: "DO $$BEGIN RAISE SQLSTATE '25P02'; END$$"},
			&pgproto3.Query{String: "DECLARE c1 SCROLL CURSOR FOR SELECT v FROM t ORDER BY v"},
		}, 3},
		{"a portal bound before the block failed", []pgproto3.FrontendMessage{
			&pgproto3.Query{String: "BEGIN"},
			&pgproto3.Parse{Name: "s", Query: "SELECT v FROM t WHERE v > $1"},
			&pgproto3.Bind{DestinationPortal: "", PreparedStatement: "s", Parameters: [][]byte{[]byte("1")}},
			&pgproto3.Sync{},
			&pgproto3.Query{String: "SELECT 1/0"},
			&pgproto3.Close{ObjectType: 'S', Name: "s"},
			&pgproto3.Sync{},
			&pgproto3.Query{String: "DECLARE c1 SCROLL CURSOR FOR SELECT v FROM t ORDER BY v"},
		}, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, pipelined := range []bool{false, true} {
				conn := readyConn(t, e, "")
				run := []pgproto3.FrontendMessage{&pgproto3.Execute{Portal: ""}, &pgproto3.Sync{}}
				var got string
				if pipelined {
					got = conn.transcript(c.ready+1, append(c.setup, run...)...)
				} else {
					conn.transcript(c.ready, c.setup...)
					got = conn.transcript(1, run...)
				}
				if !strings.HasSuffix(got, "E{25P02}Z") {
					t.Errorf("pipelined %v: the Execute got %q, want PostgreSQL's 25P02", pipelined, got)
				}
				if got := conn.transcript(1, &pgproto3.Query{String: "ROLLBACK"}); got != "CZ" {
					t.Errorf("pipelined %v: ROLLBACK after it: %q", pipelined, got)
				}
				var one int
				if err := bystander.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil {
					t.Fatalf("pipelined %v: another session of the server: %v", pipelined, err)
				}
			}
		})
	}
}
