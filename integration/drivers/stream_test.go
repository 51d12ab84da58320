package drivers

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
)

// The stream cases read a result larger than one batch through a
// server-side cursor — SQL DECLARE/FETCH or a portal executed a few rows at
// a time, whichever the driver uses — and report every row in order. Each
// driver program (run with the argument "stream") reads streamSQL in batches
// of 3 over streamRowCount rows, in sessions with no token, with the current
// token 101 and with the stale token 99 of resource drv/stream (mark 100),
// both carried as startup options.
const (
	streamSQL      = "SELECT id, v FROM streamed ORDER BY id"
	streamRowCount = 11 // batches of 3, 3, 3 and 2
	streamResource = "drv/stream"
	tokenCurrent   = 101
	tokenStale     = 99
)

// streamResult is one line of a driver program's stream output: the rows
// it read, as "id v", also those before a failure; the SQL error that
// stopped it, read through the driver's error API; and anything else that
// went wrong.
type streamResult struct {
	Case     string   `json:"case"`
	Rows     []string `json:"rows"`
	SQLState string   `json:"sqlstate"`
	ErrType  string   `json:"errtype"`
	Message  string   `json:"message"`
	Error    string   `json:"error"`
}

// streamCase is what a case must read: token is the session's fencing
// token (0: none); with tokenStale the proxy must refuse it (55Z01) where
// PostgreSQL, which does not fence, answers want.
type streamCase struct {
	name  string
	token int
	want  []string
}

type streamDriver struct {
	name  string
	cases []streamCase
	run   func(t *testing.T, tg target) []streamResult
}

// streamRows are the rows of SELECT id, 'r' || id for ids 1..n.
func streamRows(ids ...int) []string {
	rows := make([]string, len(ids))
	for i, id := range ids {
		rows[i] = fmt.Sprintf("%d r%d", id, id)
	}
	return rows
}

func streamSeq(n int) []string {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i + 1
	}
	return streamRows(ids...)
}

var (
	allStreamRows = streamSeq(streamRowCount)
	// psqlScroll: FETCH 2, FETCH 2, FETCH LAST, FETCH BACKWARD 2,
	// FETCH ABSOLUTE 3, MOVE RELATIVE 1, FETCH 1.
	psqlScrollRows = streamRows(1, 2, 3, 4, 11, 10, 9, 3, 5)
	pgxLargeCount  = 100_000
)

// tokenCases: the current token streams everything; the stale one is
// refused.
func tokenCases(want []string) []streamCase {
	return []streamCase{{"token", tokenCurrent, want}, {"stale", tokenStale, want}}
}

var streamDrivers = []streamDriver{
	{name: "psql", run: streamPsql, cases: []streamCase{
		{"scroll", 0, psqlScrollRows},
		{"withhold", 0, allStreamRows},
		{"token", tokenCurrent, psqlScrollRows},
		{"stale", tokenStale, psqlScrollRows},
		// a WITH HOLD cursor declared with no token, then FETCHed after
		// SET lock.fencing_token = 99: the FETCH is refused
		{"stale-fetch", tokenStale, allStreamRows},
	}},
	{name: "pgx", run: streamPgx, cases: append([]streamCase{
		{"large", 0, streamSeq(pgxLargeCount)},
		{"declare", 0, allStreamRows},
	}, tokenCases(allStreamRows)...)},
	{name: "lib/pq", run: streamLibpq, cases: append([]streamCase{
		{"declare", 0, allStreamRows},
	}, tokenCases(allStreamRows)...)},
	{name: "psycopg", run: streamPython("psycopg", "python3-psycopg", "psycopg_driver.py"), cases: append([]streamCase{
		{"named", 0, allStreamRows},
		{"withhold", 0, allStreamRows},
	}, tokenCases(allStreamRows)...)},
	{name: "psycopg2", run: streamPython("psycopg2", "python3-psycopg2", "psycopg2_driver.py"), cases: append([]streamCase{
		{"named", 0, allStreamRows},
	}, tokenCases(allStreamRows)...)},
	{name: "sqlalchemy", run: streamPython("sqlalchemy", "python3-sqlalchemy", "sqlalchemy_driver.py"), cases: append([]streamCase{
		{"yield_per", 0, allStreamRows},
	}, tokenCases(allStreamRows)...)},
	{name: "asyncpg", run: streamPython("asyncpg", "python3-asyncpg", "asyncpg_driver.py"), cases: append([]streamCase{
		{"prefetch", 0, allStreamRows},
		{"fetch", 0, allStreamRows},
	}, tokenCases(allStreamRows)...)},
	{name: "node-postgres", run: streamNode, cases: append([]streamCase{
		{"cursor", 0, allStreamRows},
		{"tx", 0, allStreamRows},
	}, tokenCases(allStreamRows)...)},
	{name: "pgjdbc", run: streamJDBC, cases: append([]streamCase{
		{"fetchsize", 0, allStreamRows},
	}, tokenCases(allStreamRows)...)},
}

// TestDriversStreamServerCursors streams results of several batches through
// each driver's server-side cursors, through the proxy and straight against
// PostgreSQL: with no token and with the current token the proxy's rows
// must be PostgreSQL's, all of them in order; with a stale token the proxy
// must refuse (55Z01) what PostgreSQL answers.
func TestDriversStreamServerCursors(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: starts PostgreSQL and the driver programs (make test runs it)")
	}
	pg := harness.Postgres(t)
	proxy := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Fencing: &gate.Config{Analyzer: gate.NewAnalyzer(1024)}})
	db := streamDB(t, pg)
	viaProxy := target{Host: proxy.Host, Port: proxy.Port, User: pgcluster.Superuser, DB: db}
	direct := target{Host: "127.0.0.1", Port: pg.Port, User: pgcluster.Superuser, DB: db}
	var summary []string
	for _, d := range streamDrivers {
		t.Run(strings.ReplaceAll(d.name, "/", "_"), func(t *testing.T) {
			fromPG := byCase(d.run(t, direct))
			fromProxy := byCase(d.run(t, viaProxy))
			for _, c := range d.cases {
				p, pOK := fromProxy[c.name]
				err := streamCaseError(c, p, pOK, fromPG[c.name])
				if err != "" {
					t.Errorf("%s %s: %s", d.name, c.name, err)
				}
				summary = append(summary, fmt.Sprintf("%-14s %-11s %-5s %d rows %s %s", d.name, c.name, passFail(err), len(p.Rows), p.SQLState, firstLine(p.Message)))
			}
		})
	}
	t.Logf("stream cases:\n%s", strings.Join(summary, "\n"))
	if !t.Failed() {
		// The current token was checked, and advanced the mark, at the first
		// statement of each of its transactions.
		if mark := harness.Mark(t, pg.DSN(pgcluster.Superuser, db), streamResource); mark != tokenCurrent {
			t.Errorf("mark of %s is %d, want %d", streamResource, mark, tokenCurrent)
		}
	}
}

// streamDB makes a database with the fence store, the table streamed of
// streamRowCount rows and drv/stream at mark 100.
func streamDB(t *testing.T, pg *pgcluster.Cluster) string {
	t.Helper()
	db := harness.CreateDB(t, pg)
	dsn := pg.DSN(pgcluster.Superuser, db)
	harness.Migrate(t, dsn)
	err := harness.Exec(context.Background(), dsn,
		"CREATE TABLE streamed (id int PRIMARY KEY, v text NOT NULL)",
		fmt.Sprintf("INSERT INTO streamed SELECT g, 'r' || g FROM generate_series(1, %d) g", streamRowCount),
		fmt.Sprintf("INSERT INTO fence.hwm VALUES ('%s', 100, now())", streamResource))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func byCase(rs []streamResult) map[string]streamResult {
	m := map[string]streamResult{}
	for _, r := range rs {
		m[r.Case] = r
	}
	return m
}

// streamCaseError compares what a case read through the proxy, and straight
// from PostgreSQL, with what it must read.
func streamCaseError(c streamCase, p streamResult, reported bool, pg streamResult) string {
	if pg.Error != "" || pg.SQLState != "" || !slices.Equal(pg.Rows, c.want) {
		return fmt.Sprintf("straight against PostgreSQL the case read %s: the case is broken", describe(pg, c.want))
	}
	switch {
	case !reported:
		return "the driver program reported nothing for this case through the proxy"
	case p.Error != "":
		return fmt.Sprintf("through the proxy: %s (after %d rows)", p.Error, len(p.Rows))
	case c.token == tokenStale:
		want := fmt.Sprintf("stale fencing token %d for resource %q", tokenStale, streamResource)
		if p.SQLState != "55Z01" || !strings.Contains(p.Message, want) {
			return fmt.Sprintf("through the proxy with a stale token the case read %s; want SQLSTATE 55Z01 %q", describe(p, nil), want)
		}
		if len(p.Rows) > len(c.want) || !slices.Equal(p.Rows, c.want[:len(p.Rows)]) {
			return fmt.Sprintf("before the stale token's refusal the case read rows PostgreSQL does not answer: %s", rowsDiff(p.Rows, c.want))
		}
	case p.SQLState != "" || !slices.Equal(p.Rows, pg.Rows):
		return fmt.Sprintf("through the proxy the case read %s; PostgreSQL answered all %d rows", describe(p, c.want), len(pg.Rows))
	}
	return ""
}

// describe says what a case read: its rows compared with want (unless nil)
// and the error that stopped it.
func describe(r streamResult, want []string) string {
	var parts []string
	if want != nil {
		parts = append(parts, rowsDiff(r.Rows, want))
	} else {
		parts = append(parts, fmt.Sprintf("%d rows", len(r.Rows)))
	}
	if r.SQLState != "" {
		parts = append(parts, fmt.Sprintf("then SQLSTATE %s (%s: %s)", r.SQLState, r.ErrType, r.Message))
	}
	if r.Error != "" {
		parts = append(parts, "then "+r.Error)
	}
	return strings.Join(parts, ", ")
}

// rowsDiff says how got differs from want without printing 100,000 rows.
func rowsDiff(got, want []string) string {
	if slices.Equal(got, want) {
		return fmt.Sprintf("all %d rows", len(got))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("%d rows (want %d), row %d is %q, want %q", len(got), len(want), i+1, got[i], want[i])
		}
	}
	if len(got) < len(want) {
		return fmt.Sprintf("%d of %d rows (the next is %q)", len(got), len(want), want[len(got)])
	}
	return fmt.Sprintf("%d rows (want %d), row %d is %q too many", len(got), len(want), len(want)+1, got[len(want)])
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func streamOptions(token int) string {
	return fmt.Sprintf("-c lock.fencing_token=%d -c lock.resource=%s", token, streamResource)
}

// The driver programs, each with the argument "stream".

func streamPython(module, pkg, script string) func(t *testing.T, tg target) []streamResult {
	return func(t *testing.T, tg target) []streamResult {
		needPython(t, module, pkg)
		return decodeLines[streamResult](t, programOutput(t, tg, "testdata/python", debianPython, script, "stream"))
	}
}

func streamNode(t *testing.T, tg target) []streamResult {
	node := need(t, "node", "nodejs")
	for _, mod := range []string{"pg", "pg-cursor"} {
		if _, err := os.Stat("testdata/node/node_modules/" + mod + "/package.json"); err != nil {
			t.Fatalf("%s is not installed in testdata/node/node_modules: %s", mod, installHint)
		}
	}
	return decodeLines[streamResult](t, programOutput(t, tg, "testdata/node", node, "driver.js", "stream"))
}

func streamJDBC(t *testing.T, tg target) []streamResult {
	java := need(t, "java", "default-jdk-headless")
	if _, err := os.Stat(jdbcJar); err != nil {
		t.Fatalf("pgjdbc not found at %s: %s", jdbcJar, installHint)
	}
	need(t, "javac", "default-jdk-headless")
	return decodeLines[streamResult](t, programOutput(t, tg, "testdata/java", java, "-cp", jdbcJar, "Drivers.java", "stream"))
}
