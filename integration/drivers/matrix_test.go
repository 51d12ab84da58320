package drivers

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
)

// The cases every driver program runs. Case c fences resource "drv/c",
// whose mark starts at 100: it writes v+1 to row c with token 101, tries
// v+1000 with the stale token 99, and writes v+1 with 101 again on the same
// connection. So the database must end with v = 2 and the mark at 101.
const (
	caseSet          = "set"          // SET lock.resource / lock.fencing_token
	caseComment      = "comment"      // /* fencing_token=N resource=R */
	caseSQLCommenter = "sqlcommenter" // trailing /*fencing_token='N',resource='R%2F…'*/
	caseOptions      = "options"      // startup options=-c lock.fencing_token=N -c lock.resource=R
	caseParams       = "params"       // lock.fencing_token and lock.resource as startup parameters of their own
	casePrepared     = "prepared"     // the driver's prepared-statement path, token by SET
	caseSetLocal     = "setlocal"     // BEGIN; SET LOCAL …; write; COMMIT
)

var allCases = []string{caseSet, caseComment, caseSQLCommenter, caseOptions, caseParams, casePrepared, caseSetLocal}

// asyncpg's cases of its own (testdata/python/asyncpg_driver.py).
const (
	casePreparedSet = "preparedset" // prepare() (Parse, Describe, Flush: no Sync), then SET at once
	casePoolReset   = "poolreset"   // a Pool as it comes: release() runs asyncpg's reset query
	casePool        = "pool"        // a Pool whose reset query is RESET ALL alone
)

var asyncpgCases = append(append([]string{}, allCases...), casePreparedSet, casePoolReset, casePool)

// result is one line of a driver program's output.
type result struct {
	Case     string `json:"case"`
	SQLState string `json:"sqlstate"` // of the stale write, read through the driver's error API
	ErrType  string `json:"errtype"`  // the driver's error class
	Message  string `json:"message"`
	Error    string `json:"error"` // anything that went wrong besides the expected refusal
}

// target is where a driver connects: the proxy, as the superuser.
// Password, when set, reaches the libpq-based programs as PGPASSWORD;
// Pooled says the proxy is in transaction pool mode.
type target struct {
	Host, User, DB, Password string
	Port                     int
	Pooled                   bool
}

func (tg target) env() []string {
	env := []string{"FP_HOST=" + tg.Host, "FP_PORT=" + strconv.Itoa(tg.Port), "FP_USER=" + tg.User, "FP_DB=" + tg.DB}
	if tg.Password != "" {
		env = append(env, "PGPASSWORD="+tg.Password)
	}
	return env
}

type driver struct {
	name  string
	cases []string // allCases minus what the driver cannot do, plus its own
	run   func(t *testing.T, tg target) []result
	// session and pooled are the cases whose outcome is not a fenced
	// case's, in session and in transaction pool mode (TestDriverMatrix,
	// TestDriverMatrixTransactionPool), with the outcome each must have.
	session, pooled map[string]outcome
}

// outcome is what a case must report and leave in the database when it is
// not what a fenced case must (the stale write refused with 55Z01, v = 2,
// the mark 101).
type outcome struct {
	state string // the SQLSTATE of the error the case reports; "" for none
	msg   string // a part of its message
	v     int    // the case's row
	mark  int64  // its resource's mark
	why   string // the reason, for the summary
}

// refusedBefore is a case refused before any write landed.
func refusedBefore(state, msg, why string) outcome {
	return outcome{state: state, msg: msg, mark: 100, why: why}
}

var drivers = []driver{
	{name: "psql", cases: without(caseParams), run: runPsql, pooled: map[string]outcome{
		casePrepared: refusedBefore("0A000", "PREPARE is not supported in transaction pool mode", "SQL PREPARE/EXECUTE, session state (psql 15 has no protocol-level prepare)"),
	}},
	{name: "pgx", cases: allCases, run: runPgx},
	{name: "lib/pq", cases: allCases, run: runLibpq},
	{name: "psycopg", cases: without(caseParams), run: runPsycopg},
	{name: "asyncpg", cases: asyncpgCases, run: runAsyncpg, session: map[string]outcome{
		casePoolReset: {mark: 101, why: "release() resets the connection"},
	}, pooled: map[string]outcome{
		casePreparedSet: refusedBefore("55Z05", "can be set for the session here only by a SET or RESET alone in its unit",
			"prepare() leaves its Parse unsynced (Flush), so the SET after it is not alone in its unit"),
		// SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL:
		// the RESET ALL ends the Query, and the unlock finds nothing to release.
		casePoolReset: {mark: 101, why: "release() resets the connection"},
	}},
	{name: "node-postgres", cases: without(caseParams), run: runNode},
	{name: "pgjdbc", cases: without(caseParams), run: runJDBC},
}

func without(skip string) []string {
	var cs []string
	for _, c := range allCases {
		if c != skip {
			cs = append(cs, c)
		}
	}
	return cs
}

// TestDriverMatrix runs every driver's cases through one proxy, each driver
// in a database of its own, and checks the rows and marks directly.
func TestDriverMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: starts PostgreSQL and the driver programs (make test runs it)")
	}
	pg := harness.Postgres(t)
	proxy := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), Fencing: &gate.Config{Analyzer: gate.NewAnalyzer(1024)}})
	var summary []string
	for _, d := range drivers {
		t.Run(strings.ReplaceAll(d.name, "/", "_"), func(t *testing.T) {
			db := matrixDB(t, pg)
			tg := target{Host: proxy.Host, Port: proxy.Port, User: pgcluster.Superuser, DB: db}
			got := d.run(t, tg)
			summary = append(summary, checkDriver(t, d, d.session, got, pg.DSN(pgcluster.Superuser, db))...)
		})
	}
	sort.Strings(summary)
	t.Logf("driver matrix:\n%s", strings.Join(summary, "\n"))
}

// matrixDB makes a database with the fence store, a row per case and each
// case's resource at mark 100.
func matrixDB(t *testing.T, pg *pgcluster.Cluster) string {
	t.Helper()
	db := harness.CreateDB(t, pg)
	dsn := pg.DSN(pgcluster.Superuser, db)
	harness.Migrate(t, dsn)
	stmts := []string{"CREATE TABLE fenced (id text PRIMARY KEY, v int NOT NULL DEFAULT 0)"}
	for _, c := range asyncpgCases {
		stmts = append(stmts,
			fmt.Sprintf("INSERT INTO fenced (id) VALUES ('%s')", c),
			fmt.Sprintf("INSERT INTO fence.hwm VALUES ('drv/%s', 100, now())", c))
	}
	if err := harness.Exec(context.Background(), dsn, stmts...); err != nil {
		t.Fatal(err)
	}
	return db
}

// checkDriver compares a driver's reported results and the database's
// rows with what each case must leave (a fenced case's, or its outcome in
// other), and returns a summary line per case.
func checkDriver(t *testing.T, d driver, other map[string]outcome, got []result, dsn string) []string {
	t.Helper()
	byCase := map[string]result{}
	for _, r := range got {
		byCase[r.Case] = r
	}
	rows, marks := readState(t, dsn)
	var lines []string
	for _, c := range d.cases {
		r, ok := byCase[c]
		var err, why string
		if o, differs := other[c]; differs {
			err, why = outcomeError(o, r, ok, rows[c], marks["drv/"+c]), "("+o.why+")"
		} else {
			err = caseError(c, r, ok, rows[c], marks["drv/"+c])
		}
		if err != "" {
			t.Errorf("%s %s: %s", d.name, c, err)
		}
		lines = append(lines, strings.TrimSpace(fmt.Sprintf("%-14s %-13s %-5s %s %s %s", d.name, c, passFail(err), r.SQLState, r.ErrType, why)))
	}
	return lines
}

// outcomeError compares a case's result and row with the outcome it must
// have.
func outcomeError(o outcome, r result, reported bool, v int, mark int64) string {
	switch {
	case !reported:
		return "the driver program reported nothing for this case"
	case r.Error != "":
		return r.Error
	case r.SQLState != o.state:
		return fmt.Sprintf("SQLSTATE %q (%s: %s), want %q", r.SQLState, r.ErrType, r.Message, o.state)
	case !strings.Contains(r.Message, o.msg):
		return fmt.Sprintf("message %q, want one with %q", r.Message, o.msg)
	case v != o.v || mark != o.mark:
		return fmt.Sprintf("row v = %d and mark %d, want %d and %d", v, mark, o.v, o.mark)
	}
	return ""
}

func caseError(c string, r result, reported bool, v int, mark int64) string {
	switch {
	case !reported:
		return "the driver program reported nothing for this case"
	case r.Error != "":
		return r.Error
	case r.SQLState != "55Z01":
		return fmt.Sprintf("stale write gave SQLSTATE %q (%s: %s), want 55Z01", r.SQLState, r.ErrType, r.Message)
	case !strings.Contains(r.Message, `stale fencing token 99 for resource "drv/`+c+`"`):
		return fmt.Sprintf("stale write's message %q does not name token and resource", r.Message)
	case v != 2:
		return fmt.Sprintf("row %s has v = %d, want 2 (two writes with token 101, the stale one refused)", c, v)
	case mark != 101:
		return fmt.Sprintf("mark of drv/%s is %d, want 101", c, mark)
	}
	return ""
}

func passFail(err string) string {
	if err == "" {
		return "pass"
	}
	return "FAIL"
}

// readState reads every row of fenced and every mark, straight from the
// database.
func readState(t *testing.T, dsn string) (map[string]int, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows := map[string]int{}
	var id string
	var v int
	_, err = pgx.ForEachRow(mustQuery(t, conn, "SELECT id, v FROM fenced"), []any{&id, &v}, func() error { rows[id] = v; return nil })
	if err != nil {
		t.Fatal(err)
	}
	marks := map[string]int64{}
	var res string
	var tok int64
	_, err = pgx.ForEachRow(mustQuery(t, conn, "SELECT resource, token FROM fence.hwm"), []any{&res, &tok}, func() error { marks[res] = tok; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return rows, marks
}

func mustQuery(t *testing.T, conn *pgx.Conn, sql string) pgx.Rows {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestMatrixCatchesStaleWrites is the matrix's control: pgx's cases straight
// against PostgreSQL, without the proxy, must each fail — the stale write
// lands — or the matrix could not tell a working proxy from a broken one.
func TestMatrixCatchesStaleWrites(t *testing.T) {
	pg := harness.Postgres(t)
	db := matrixDB(t, pg)
	tg := target{Host: "127.0.0.1", Port: pg.Port, User: pgcluster.Superuser, DB: db}
	got := runPgx(t, tg)
	rows, marks := readState(t, pg.DSN(pgcluster.Superuser, db))
	for _, r := range got {
		if caseError(r.Case, r, true, rows[r.Case], marks["drv/"+r.Case]) == "" {
			t.Errorf("%s passed straight against PostgreSQL: the case cannot catch a stale write", r.Case)
		}
	}
	if len(got) != len(allCases) {
		t.Errorf("ran %d cases, want %d", len(got), len(allCases))
	}
}
