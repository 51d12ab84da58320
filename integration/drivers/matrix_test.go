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

// result is one line of a driver program's output.
type result struct {
	Case     string `json:"case"`
	SQLState string `json:"sqlstate"` // of the stale write, read through the driver's error API
	ErrType  string `json:"errtype"`  // the driver's error class
	Message  string `json:"message"`
	Error    string `json:"error"` // anything that went wrong besides the expected refusal
}

// target is where a driver connects: the proxy, as the superuser.
type target struct {
	Host, User, DB string
	Port           int
}

func (tg target) env() []string {
	return []string{"FP_HOST=" + tg.Host, "FP_PORT=" + strconv.Itoa(tg.Port), "FP_USER=" + tg.User, "FP_DB=" + tg.DB}
}

type driver struct {
	name  string
	cases []string // allCases minus what the driver cannot do
	run   func(t *testing.T, tg target) []result
}

var drivers = []driver{
	{name: "psql", cases: without(caseParams), run: runPsql},
	{name: "pgx", cases: allCases, run: runPgx},
	{name: "lib/pq", cases: allCases, run: runLibpq},
	{name: "psycopg", cases: without(caseParams), run: runPsycopg},
	{name: "asyncpg", cases: allCases, run: runAsyncpg},
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
			summary = append(summary, checkDriver(t, d, got, pg.DSN(pgcluster.Superuser, db))...)
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
	for _, c := range allCases {
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
// rows with what each case must leave, and returns a summary line per case.
func checkDriver(t *testing.T, d driver, got []result, dsn string) []string {
	t.Helper()
	byCase := map[string]result{}
	for _, r := range got {
		byCase[r.Case] = r
	}
	rows, marks := readState(t, dsn)
	var lines []string
	for _, c := range d.cases {
		r, ok := byCase[c]
		err := caseError(c, r, ok, rows[c], marks["drv/"+c])
		if err != "" {
			t.Errorf("%s %s: %s", d.name, c, err)
		}
		lines = append(lines, fmt.Sprintf("%-14s %-13s %-5s %s %s", d.name, c, passFail(err), r.SQLState, r.ErrType))
	}
	return lines
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
