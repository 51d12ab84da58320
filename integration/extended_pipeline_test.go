package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Extended protocol and pipelines: what the server runs in a pipeline is
// checked as it runs (transaction ends, errors that skip to Sync,
// FunctionCall), and no pipeline makes the proxy hang.
//
// The tests use staleEnv: the mark of acct/1 is 100; a write under the
// stale token 41 (or 50) must be refused, and the balance must stay 0.

// raiseMark raises acct/1's mark to 300 from a direct session; it reports
// whether it got the row lock within a second (no open transaction of the
// fenced session holds it).
func raiseMark(t *testing.T, e *env, res string) bool {
	t.Helper()
	c := rawConnect(t, e.direct())
	rawSetup(t, c, "SET lock_timeout = '1s'")
	err := rawExec(t, c, "UPDATE fence.hwm SET token = 300 WHERE resource = '"+res+"'")
	return err == nil
}

// TestCommentTokenCheckedAgainAfterTransactionEndInPipeline: a transaction
// ended in the middle of a pipeline (COMMIT, END, ROLLBACK, a Query, PREPARE
// TRANSACTION) makes the next write carrying the same token checked again.
//
// A comment token 200 checked by a first statement; then a middle part;
// after it the mark goes to 300 if it can (the transaction ended); then a
// write carrying 200 in the same pipeline: it must be checked again when the
// transaction ended. An extended sequence runs as one implicit transaction
// until Sync, but an Execute of COMMIT, END, ROLLBACK or PREPARE
// TRANSACTION, or a simple Query in the middle, ends it (postgres.c
// finish_xact_command); VACUUM, which would commit at once, is refused by
// PostgreSQL inside a pipeline (25001). All held.
func TestCommentTokenCheckedAgainAfterTransactionEndInPipeline(t *testing.T) {
	e := staleEnv(t)
	for _, tc := range []struct {
		name   string
		middle []pgproto3.FrontendMessage
	}{
		{"commit", pbe("COMMIT")},
		{"end", pbe("END")},
		{"rollback", pbe("ROLLBACK")},
		{"query", []pgproto3.FrontendMessage{&pgproto3.Query{String: "SELECT 2"}}},
		{"query-commit", []pgproto3.FrontendMessage{&pgproto3.Query{String: "COMMIT"}}},
		{"vacuum", pbe("VACUUM invoices")},
		{"begin-commit", pipeline(pbe("BEGIN"), pbe("COMMIT"))},
		{"prepare-txn", pbe("PREPARE TRANSACTION 'h3'")},
		{"nothing", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := "r/" + tc.name
			dir := "/* fencing_token=200 resource=" + res + " */ "
			harnessExec(t, e.direct(), "INSERT INTO fence.hwm VALUES ('"+res+"', 100, now())", "UPDATE accounts SET balance = 0")
			conn := readyConn(t, e, "")
			first := conn.drain(time.Second, pipeline(pbe(dir+"SELECT 1"), tc.middle, []pgproto3.FrontendMessage{&pgproto3.Flush{}})...)
			raised := raiseMark(t, e, res)
			rest := conn.transcript(1, pipeline(pbe(dir+"UPDATE accounts SET balance = 7 WHERE id = 1"), []pgproto3.FrontendMessage{&pgproto3.Sync{}})...)
			t.Logf("first %s raised %v rest %s", first, raised, rest)
			if b := e.balance(t); b != 0 && raised {
				t.Errorf("balance %d: the write carrying 200 landed after the mark went to 300", b)
			}
		})
	}
}

// TestStaleWriteRefusedAfterErrorMidPipeline: after an error in the middle
// of a pipeline the proxy skips to Sync as the server does; a stale write
// after the Sync is refused, and the session stays usable.
//
// Errors in the middle of a pipeline (a Bind with a wrong parameter count, a
// Parse syntax error, the injected check refusing, a Parse of a name in
// use), with a write, a Query and more messages after them before Sync: the
// server skips them all; after the Sync a stale write is refused; the
// session answers.
func TestStaleWriteRefusedAfterErrorMidPipeline(t *testing.T) {
	e := staleEnv(t)
	upd := "UPDATE accounts SET balance = 7 WHERE id = 1"
	for _, tc := range []struct {
		name string
		bad  []pgproto3.FrontendMessage
	}{
		{"bind", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: "SELECT $1::int"}, &pgproto3.Bind{}, &pgproto3.Execute{}}},
		{"parse", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: "SELEC 1"}, &pgproto3.Bind{}, &pgproto3.Execute{}}},
		{"check", pbe("SELECT 1")},
		{"reparse", []pgproto3.FrontendMessage{&pgproto3.Parse{Name: "n", Query: "SELECT 1"}, &pgproto3.Parse{Name: "n", Query: upd}, &pgproto3.Bind{PreparedStatement: "n"}, &pgproto3.Execute{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := readyConn(t, e, "")
			if got := conn.transcript(1, &pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"}); got != "CCZ" {
				t.Fatalf("setup: %s", got)
			}
			msgs := pipeline(tc.bad, pbe(upd), []pgproto3.FrontendMessage{
				&pgproto3.Query{String: upd}, &pgproto3.Parse{Name: "w", Query: upd},
				&pgproto3.Bind{PreparedStatement: "w"}, &pgproto3.Execute{}, &pgproto3.Sync{},
			})
			got := conn.transcript(1, msgs...)
			t.Logf("pipeline %s", got)
			if !strings.Contains(got, "E{") || !strings.HasSuffix(got, "}Z") || strings.Count(got, "}") != 1 {
				t.Errorf("pipeline: %s", got)
			}
			got = conn.transcript(1, &pgproto3.Bind{PreparedStatement: "w"}, &pgproto3.Execute{}, &pgproto3.Sync{})
			if got != "E{26000}Z" {
				t.Errorf("Bind of the skipped w: %s, want E{26000}Z", got)
			}
			got = conn.transcript(1, pipeline(pbe(upd), []pgproto3.FrontendMessage{&pgproto3.Sync{}})...)
			if !strings.HasSuffix(got, "E{55Z01}Z") {
				t.Errorf("stale write after Sync: %s", got)
			}
			if got := conn.transcript(1, &pgproto3.Query{String: "RESET lock.fencing_token"}); got != "CZ" {
				t.Fatalf("RESET: %s", got)
			}
			conn.wantUsable()
			e.wantUntouched(t)
		})
	}
}

// TestFunctionCallAfterStaleSetInPipelineRefused: a FunctionCall after an
// unsynced Execute of SET to a stale token is refused (0A000): nothing
// lands.
//
// A transaction checked with token 200, then in one unsynced extended
// sequence an Execute of SET lock.fencing_token = 41 and a fast-path
// FunctionCall of a function that writes: the FunctionCall is refused,
// nothing lands.
func TestFunctionCallAfterStaleSetInPipelineRefused(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(), "CREATE FUNCTION w() RETURNS int LANGUAGE sql AS $$ UPDATE accounts SET balance = 7 WHERE id = 1 RETURNING 1 $$")
	var oid uint32
	admin := rawConnect(t, e.direct())
	res, err := admin.Exec(t.Context(), "SELECT 'w'::regproc::oid").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Sscan(string(res[0].Rows[0][0]), &oid)
	conn := readyConn(t, e, "")
	if got := conn.transcript(1, &pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 200; BEGIN; SELECT 1"}); got != "CCCTDCZ" {
		t.Fatalf("setup: %s", got)
	}
	got := conn.transcript(2, pipeline(pbe("SET lock.fencing_token = 41"), []pgproto3.FrontendMessage{
		&pgproto3.FunctionCall{Function: oid, ResultFormatCode: 0}, &pgproto3.Sync{},
	})...)
	t.Logf("pipeline %s", got)
	if !strings.Contains(got, "E{0A000}") {
		t.Errorf("FunctionCall after the stale SET: %s, want 0A000", got)
	}
	conn.transcript(1, &pgproto3.Query{String: "COMMIT"})
	e.wantUntouched(t)
}

// TestNoBlockStatementInOpenSequenceRefusedWithToken: a statement that
// cannot run in a transaction block, sent as a Query in an open extended
// sequence of a session with a token, is refused (0A000) and runs nothing.
//
// A statement that cannot run inside a transaction block (README: refused
// with 0A000 when sent as a simple Query in a session whose
// lock.fencing_token holds a token), sent as a Query while an extended
// sequence is open. The pre-check of its own was skipped there, and the
// statement ran with the token set after a Parse, a Parse and Describe, or a
// Close (the server runs it: only an Execute earlier in the sequence makes
// it refuse, 25001).
func TestNoBlockStatementInOpenSequenceRefusedWithToken(t *testing.T) {
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
			px := readyConn(t, e, "")
			px.transcript(1, set)
			got := px.transcript(2, msgs...)
			if !strings.Contains(got, "E{0A000}") || strings.Contains(got, "C") && !strings.Contains(got, "E") {
				t.Errorf("%q after %T…: %s, want 0A000", stmt, pre[0], got)
			}
			px.wantUsable()
			if n := e.count(t, "SELECT count(*) FROM pg_class WHERE relname = 'acc_bal'"); n != 0 {
				t.Errorf("%q after %T…: the index was built with a token set", stmt, pre[0])
			}
			if n := e.count(t, "SELECT count(*) FROM pg_database WHERE datname = 'h4db'"); n != 0 {
				t.Errorf("%q after %T…: the database was created with a token set", stmt, pre[0])
			}
			harnessExec(t, e.direct(), "DROP INDEX IF EXISTS acc_bal", "DROP DATABASE IF EXISTS h4db")
		}
	}
	// Without a token the same order runs, as it does directly.
	for _, direct := range []bool{true, false} {
		c := directConn(t, e)
		if !direct {
			c = readyConn(t, e, "")
		}
		got := c.transcript(2, &pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Query{String: "CREATE INDEX CONCURRENTLY acc_bal ON accounts (balance)"}, &pgproto3.Sync{})
		if got != "1CZZ" {
			t.Errorf("no token, direct=%v: %s, want 1CZZ", direct, got)
		}
		harnessExec(t, e.direct(), "DROP INDEX IF EXISTS acc_bal")
	}
}

// TestCloseAllThenBindOfEarlierStatementIsAnswered: a pipeline running CLOSE
// ALL and then binding an earlier statement, one Sync at the end, is
// answered: the session does not hang.
//
// In a session that may carry a token, a pipeline that runs CLOSE ALL and
// then binds a statement prepared earlier (one Sync at the end, as a pgx
// batch sends it) makes the gate Wait for replies the server has not flushed
// (no Sync or Flush yet): the session hangs for good.
func TestCloseAllThenBindOfEarlierStatementIsAnswered(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "closeall")
	conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/9'; SET lock.fencing_token = 1"})
	conn.send(&pgproto3.Parse{Name: "s1", Query: "SELECT 1"})
	conn.send(&pgproto3.Sync{})
	conn.flush()
	if codes, _, to := conn.readyCount(2, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	conn.send(&pgproto3.Parse{Query: "CLOSE ALL"})
	conn.send(&pgproto3.Bind{})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Bind{PreparedStatement: "s1"})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Sync{})
	conn.flush()
	codes, rows, to := conn.readyCount(1, 10*time.Second)
	if to {
		t.Fatalf("no ReadyForQuery within 10 s: the session hangs (CLOSE ALL, then Bind of s1, one Sync)")
	}
	if len(codes) > 0 || rows != 1 {
		t.Fatalf("codes %v rows %d", codes, rows)
	}
}

// TestPipelinedBindOfEarlierParseIsAnswered: a unit that binds a statement
// parsed by an earlier, still unanswered unit is answered: the session does
// not hang.
//
// Two extended units sent together (as pgconn's Pipeline does, a Sync after
// each): the second Parses s2, then Binds s1, parsed by the first unit. s1
// is still in flight, so the gate says Wait — but Settled also needs the
// reply to the second unit's own Parse, which the server does not send
// before a Sync or Flush. Even a plain session (no token) hangs for good.
func TestPipelinedBindOfEarlierParseIsAnswered(t *testing.T) {
	e := newFencedEnv(t, nil)
	conn := readyConn(t, e, "pipeline-wait")
	conn.send(&pgproto3.Parse{Name: "s1", Query: "SELECT pg_sleep(0.3)"})
	conn.send(&pgproto3.Bind{PreparedStatement: "s1"})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Sync{})
	conn.send(&pgproto3.Parse{Name: "s2", Query: "SELECT 2"})
	conn.send(&pgproto3.Bind{PreparedStatement: "s1"})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Sync{})
	conn.flush()
	codes, rows, to := conn.readyCount(2, 10*time.Second)
	if to {
		t.Fatalf("no second ReadyForQuery within 10 s: the session hangs")
	}
	if len(codes) > 0 || rows != 2 {
		t.Fatalf("codes %v rows %d", codes, rows)
	}
}

// TestPipelinedUnitAfterEncodingChangeIsAnswered: a unit pipelined behind
// one that sets client_encoding is answered: the session does not hang.
//
// A unit that sets client_encoding, then (pipelined, before its answer)
// Parse, Bind, Execute of a text that needs analysis: the gate waits for the
// lexing change with the current unit's Parse and Bind unanswered and
// unflushed: the session hangs.
func TestPipelinedUnitAfterEncodingChangeIsAnswered(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "pipeline-lex")
	conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/9'; SET lock.fencing_token = 1"})
	conn.send(&pgproto3.Parse{Query: "SET client_encoding = 'UTF8'"})
	conn.send(&pgproto3.Bind{})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Sync{})
	conn.send(&pgproto3.Parse{Query: "SELECT 2"})
	conn.send(&pgproto3.Bind{})
	conn.send(&pgproto3.Execute{})
	conn.send(&pgproto3.Sync{})
	conn.flush()
	codes, rows, to := conn.readyCount(3, 10*time.Second)
	if to {
		t.Fatalf("no third ReadyForQuery within 10 s: the session hangs")
	}
	if len(codes) > 0 || rows != 1 {
		t.Fatalf("codes %v rows %d", codes, rows)
	}
}

// TestPipelineErrorInTheMiddle: Parse(bad), Query, Sync in one go — the
// server skips the Query after the failed Parse and sends no ReadyForQuery
// for it. The session must stay in step and usable.
func TestPipelineErrorInTheMiddle(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "pipeline-error")
	conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"})
	conn.send(&pgproto3.Parse{Query: "SELEC 1"})
	conn.send(&pgproto3.Query{String: "UPDATE accounts SET balance = 1"})
	conn.send(&pgproto3.Sync{})
	conn.send(&pgproto3.Query{String: "RESET lock.fencing_token; SELECT 42"})
	conn.flush()
	var codes []string
	var rows, ready int
	for ready < 3 {
		msg, err := conn.fe.Receive()
		if err != nil {
			t.Fatalf("after %d ReadyForQuery: %v", ready, err)
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			codes = append(codes, m.Code)
		case *pgproto3.DataRow:
			rows++
			if string(m.Values[0]) != "42" {
				t.Fatalf("row %q, want 42", m.Values[0])
			}
		case *pgproto3.ReadyForQuery:
			ready++
		}
	}
	if len(codes) != 1 || codes[0] != "42601" || rows != 1 {
		t.Fatalf("errors %v, rows %d; want one 42601 (the Parse; the UPDATE skipped) and the row of SELECT 42", codes, rows)
	}
	e.wantUntouched(t)
}

// TestPipelines: a pgx batch of writes with rising comment tokens lands and
// the mark ends at the last; a batch with one stale token is refused whole
// (55Z01).
func TestPipelines(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeCacheStatement)
	batch := &pgx.Batch{}
	for i := 1; i <= 20; i++ {
		batch.Queue(fmt.Sprintf("/* fencing_token=%d resource=pipe */ INSERT INTO log (resource, token) VALUES ('pipe', %d)", i, i))
	}
	if err := c.SendBatch(t.Context(), batch).Close(); err != nil {
		t.Fatal(err)
	}
	if m := e.mark(t, "pipe"); m != 20 {
		t.Fatalf("mark %d after a batch up to 20, want 20", m)
	}
	// A batch whose middle statement is stale: the batch is one implicit
	// transaction, so nothing of it stays.
	batch = &pgx.Batch{}
	batch.Queue("/* fencing_token=21 resource=pipe */ INSERT INTO log (resource, token) VALUES ('pipe', 21)")
	batch.Queue("/* fencing_token=3 resource=pipe */ INSERT INTO log (resource, token) VALUES ('pipe', 3)")
	batch.Queue("/* fencing_token=22 resource=pipe */ INSERT INTO log (resource, token) VALUES ('pipe', 22)")
	err := c.SendBatch(t.Context(), batch).Close()
	wantCode(t, err, "55Z01")
	var n int
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM log WHERE resource = 'pipe'").Scan(&n); err != nil || n != 20 {
		t.Fatalf("log has %d rows (%v), want 20", n, err)
	}
	if m := e.mark(t, "pipe"); m != 20 {
		t.Fatalf("mark %d, want 20 (the failed batch rolled back)", m)
	}
}
