package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
)

// These tests try, as a hostile or merely unusual client would, to get a
// stale or unfenced write past the proxy where its reading of the text or
// of the session could differ from the server's (docs/design.md "Fail closed").
// Each sets the mark of acct/1 to 100 first; a write with token 41 must be
// refused, and the balance must stay 0.

// staleEnv is a fenced environment whose resource acct/1 has mark 100.
func staleEnv(t *testing.T) *env {
	t.Helper()
	e := newFencedEnv(t, nil)
	harnessExec(t, e.direct(), "INSERT INTO fence.hwm VALUES ('acct/1', 100, now())")
	return e
}

// wantUntouched fails unless the balance is still 0.
func (e *env) wantUntouched(t *testing.T) {
	t.Helper()
	if got := e.balance(t); got != 0 {
		t.Fatalf("balance = %d: a stale or unfenced write landed", got)
	}
}

// TestDeepExpressionDoesNotStopTheProxy: 25,000 terms crash pg_query's C
// code; the proxy must refuse the text and keep serving everyone.
func TestDeepExpressionDoesNotStopTheProxy(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	if err := rawExec(t, c, "SET lock.resource = 'acct/1'; SET lock.fencing_token = 41"); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"SELECT 1" + strings.Repeat("+1", 25000) + "; UPDATE accounts SET balance = 1",
		"SELECT " + strings.Repeat("(", 20000) + "1" + strings.Repeat(")", 20000) + "; UPDATE accounts SET balance = 1",
		"SELECT 1" + strings.Repeat("::int", 40000) + "; UPDATE accounts SET balance = 1",
	} {
		err := rawExec(t, c, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || !strings.HasPrefix(pgErr.Code, "54") && pgErr.Code != "42601" {
			t.Fatalf("%d bytes: got %v, want a 54xxx refusal", len(sql), err)
		}
	}
	e.wantUntouched(t)
	stillServes(t, e)
	// The session itself still works, and is still fenced.
	wantCode(t, rawExec(t, c, "SELECT 1"), "55Z01")
}

// TestPlainSessionGetsNothingAdded: a session with no token source sends
// its text unchanged and the proxy counts no check (pgbench-like traffic).
func TestPlainSessionGetsNothingAdded(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	for i := 0; i < 3; i++ {
		mustExec(t, c, "UPDATE accounts SET balance = balance + 1 WHERE id = 1")
		var b int
		if err := c.QueryRow(t.Context(), "SELECT balance FROM accounts WHERE id = 1").Scan(&b); err != nil {
			t.Fatal(err)
		}
	}
	var calls int
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM fence.hwm").Scan(&calls); err != nil || calls != 0 {
		t.Fatalf("marks %d (%v), want none", calls, err)
	}
}

// TestDynamicSQLCannotLowerAMark: a superuser's DO block that builds the
// table's name hides the write from any text filter; the store's own
// triggers refuse it (55Z04), so the stale holder stays fenced off.
func TestDynamicSQLCannotLowerAMark(t *testing.T) {
	e := staleEnv(t)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	for _, sql := range []string{
		"DO $$BEGIN EXECUTE 'update fe' || 'nce.hwm set token = 1'; END$$",
		"DO $$BEGIN EXECUTE 'delete from ' || chr(102) || 'ence.hwm'; END$$",
		"DO $$BEGIN EXECUTE format('truncate %I.hwm', 'fe' || 'nce'); END$$",
	} {
		_, err := c.Exec(t.Context(), sql)
		wantCode(t, err, "55Z04")
	}
	mustExec(t, c, "SET lock.fencing_token = 41")
	mustExec(t, c, "SET lock.resource = 'acct/1'")
	_, err := c.Exec(t.Context(), "UPDATE accounts SET balance = 1 WHERE id = 1")
	wantCode(t, err, "55Z01")
	e.wantUntouched(t)
}

// TestPlainPgbenchCountsNoChecks: pgbench, which never carries a token, gets
// nothing added in any protocol mode, read-only or writing: the proxy's
// fenceproxy_fence_checks_total stays 0 (docs/design.md: unfenced traffic passes
// through with nothing added). One fenced statement then counts, so the
// counter is shown able to move.
func TestPlainPgbenchCountsNoChecks(t *testing.T) {
	pg := harness.Postgres(t)
	db := harness.CreateDB(t, pg)
	reg := prometheus.NewRegistry()
	proxy := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Metrics: reg,
		Fencing: &gate.Config{Analyzer: gate.NewAnalyzer(1024)}})
	harness.Migrate(t, pg.DSN(pgcluster.Superuser, db))
	pgbench(t, pg, proxy.Host, proxy.Port, db, "-i", "-q", "-s", "1")
	for _, mode := range []string{"simple", "extended", "prepared"} {
		for _, script := range []string{"select-only", "tpcb-like"} {
			pgbench(t, pg, proxy.Host, proxy.Port, db, "-M", mode, "-b", script, "-c", "2", "-t", "50")
		}
	}
	if n := counter(t, reg, "fenceproxy_fence_checks_total"); n != 0 {
		t.Fatalf("plain pgbench: fenceproxy_fence_checks_total = %v, want 0", n)
	}
	c := connect(t, proxy.DSN(pgcluster.Superuser, "", db), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "/* fencing_token=5 resource=r */ UPDATE pgbench_branches SET bbalance = 0")
	if n := counter(t, reg, "fenceproxy_fence_checks_total"); n != 1 {
		t.Fatalf("after one fenced statement: fenceproxy_fence_checks_total = %v, want 1", n)
	}
}

// counter returns the value of the counter named name in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// TestExtendedReadAfterCheckSeesOlderHoldersCommit: a SELECT's portal takes
// its snapshot at Bind. A new holder's check waits on the mark's row lock for
// the old holder's commit; the read must then see that commit, so the check
// runs before the Bind (found by the chaos suite as a lost update).
func TestExtendedReadAfterCheckSeesOlderHoldersCommit(t *testing.T) {
	e := newFencedEnv(t, nil)
	old := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	for _, s := range []string{"BEGIN", "SET LOCAL lock.fencing_token = 5", "SET LOCAL lock.resource = 'acct/1'",
		"UPDATE accounts SET balance = 1 WHERE id = 1"} {
		mustExec(t, old, s)
	}
	next := connect(t, e.viaProxy(), pgx.QueryExecModeCacheStatement)
	mustExec(t, next, "SET lock.resource = 'acct/1'")
	mustExec(t, next, "SET lock.fencing_token = 6")
	got := make(chan int, 1)
	go func() {
		var b int
		if err := next.QueryRow(context.Background(), "SELECT balance FROM accounts WHERE id = $1", 1).Scan(&b); err != nil {
			b = -1
		}
		got <- b
	}()
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	waitFor(t, 10*time.Second, func() bool {
		var n int
		err := admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'", e.db).Scan(&n)
		return err == nil && n > 0
	})
	mustExec(t, old, "COMMIT")
	select {
	case b := <-got:
		if b != 1 {
			t.Fatalf("the new holder read balance %d after waiting for the old holder's commit, want 1", b)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the new holder's read did not finish")
	}
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
