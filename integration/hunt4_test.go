package integration

import (
	"net"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

type h4conn struct {
	c  net.Conn
	fe *pgproto3.Frontend
}

// h4raw opens a raw session through the proxy, or straight to the server.
func h4raw(t *testing.T, e *env, direct bool) h4conn {
	t.Helper()
	if !direct {
		c, fe := copyConn(t, e)
		return h4conn{c, fe}
	}
	c, fe := readyConnAt(t, e.pg.Addr(), map[string]string{"user": pgcluster.Superuser, "database": e.db})
	t.Cleanup(func() { c.Close() })
	return h4conn{c, fe}
}

func (c h4conn) run(t *testing.T, ready int, msgs ...pgproto3.FrontendMessage) string {
	t.Helper()
	return copyTranscript(t, c.c, c.fe, ready, nil, msgs...)
}

// h4count returns the first column of the first row of sql, straight
// from the server.
func h4count(t *testing.T, e *env, sql string) int {
	t.Helper()
	conn := connect(t, e.direct(), pgx.QueryExecModeExec)
	var n int
	if err := conn.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHunt4NoTxnInOpenSequence: a statement that cannot run inside a
// transaction block (README: refused with 0A000 when sent as a simple
// Query in a session whose lock.fencing_token holds a token), sent as a
// Query while an extended sequence is open. The pre-check of its own was
// skipped there, and the statement ran with the token set after a Parse,
// a Parse and Describe, or a Close (the server runs it: only an Execute
// earlier in the sequence makes it refuse, 25001).
func TestHunt4NoTxnInOpenSequence(t *testing.T) {
	e := staleEnv(t)
	set := &pgproto3.Query{String: "SET lock.fencing_token = 150; SET lock.resource = 'acct/1'"}
	for _, pre := range [][]pgproto3.FrontendMessage{
		{&pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Bind{}},
		{&pgproto3.Parse{Query: "SELECT 1"}},
		{&pgproto3.Parse{Name: "h4", Query: "SELECT 1"}, &pgproto3.Describe{ObjectType: 'S', Name: "h4"}},
		{&pgproto3.Close{ObjectType: 'S', Name: "nothere"}},
	} {
		for _, stmt := range []string{
			"VACUUM accounts",
			"CREATE INDEX CONCURRENTLY acc_bal ON accounts (balance)",
			"CREATE DATABASE h4db",
		} {
			msgs := append(append([]pgproto3.FrontendMessage{}, pre...), &pgproto3.Query{String: stmt}, &pgproto3.Sync{})
			px := h4raw(t, e, false)
			px.run(t, 1, set)
			got := px.run(t, 2, msgs...)
			if !strings.Contains(got, "E{0A000}") || strings.Contains(got, "C") && !strings.Contains(got, "E") {
				t.Errorf("%q after %T…: %s, want 0A000", stmt, pre[0], got)
			}
			wantUsable(t, px.c, px.fe)
			if n := h4count(t, e, "SELECT count(*) FROM pg_class WHERE relname = 'acc_bal'"); n != 0 {
				t.Errorf("%q after %T…: the index was built with a token set", stmt, pre[0])
			}
			if n := h4count(t, e, "SELECT count(*) FROM pg_database WHERE datname = 'h4db'"); n != 0 {
				t.Errorf("%q after %T…: the database was created with a token set", stmt, pre[0])
			}
			harnessExec(t, e.direct(), "DROP INDEX IF EXISTS acc_bal", "DROP DATABASE IF EXISTS h4db")
		}
	}
	// Without a token the same order runs, as it does directly.
	for _, direct := range []bool{true, false} {
		c := h4raw(t, e, direct)
		got := c.run(t, 2, &pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Query{String: "CREATE INDEX CONCURRENTLY acc_bal ON accounts (balance)"}, &pgproto3.Sync{})
		if got != "1CZZ" {
			t.Errorf("no token, direct=%v: %s, want 1CZZ", direct, got)
		}
		harnessExec(t, e.direct(), "DROP INDEX IF EXISTS acc_bal")
	}
}
