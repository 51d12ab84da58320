package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

// BenchmarkCompareTxn puts fenceproxy in transaction pool mode beside
// PgBouncer in transaction mode: 64 pgbench clients over a pool of 16
// server connections, measured as BenchmarkCompare measures (fixed -t,
// interleaved rounds, the pooler process's CPU per transaction, medians),
// plus each run's p99 latency from pgbench's per-transaction log (-l).
// Fenced rows compare fenceproxy in transaction mode with itself, as
// BenchmarkCompare's do in session mode.
//
// fenceproxy's side is started from its configuration keys (pool_mode:
// transaction, pool_size, auth_type, auth_file). When the proxy refuses
// them, its rows say so, PgBouncer's are still measured and printed, and
// the benchmark fails with the proxy's log. A PgBouncer older than 1.21
// cannot run -M prepared in transaction mode (no max_prepared_statements):
// its side of those rows is printed as not measurable, with the reason.
//
// Run with: make bench-compare (ROUNDS=5 for more rounds).
func BenchmarkCompareTxn(b *testing.B) {
	if b.N < benchtimeRounds() {
		return // the framework's first call, b.N = 1: see BenchmarkCompare
	}
	c := newTxnComparison(b, compareScale)
	c.pairs = chosenRows(txnPairs(c))
	for round := 0; round < b.N; round++ {
		for i := range c.pairs {
			c.runPair(&c.pairs[i], round)
		}
	}
	c.printTxn(os.Stdout, b.N)
	c.report()
	if c.fpErr != nil {
		b.Fatalf("fenceproxy refused transaction pool mode, so its rows were not measured:\n%v", c.fpErr)
	}
}

// TestCompareTxnHarness checks BenchmarkCompareTxn's PgBouncer side
// cheaply: PgBouncer in transaction mode really shares its 16 server
// connections among more clients, pgbench runs through it, and the p99
// comes from one logged latency per transaction. (fenceproxy's side joins
// this test when its transaction mode lands.)
func TestCompareTxnHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: starts PostgreSQL and PgBouncer (make test runs it)")
	}
	c := newTxnComparison(t, 1)
	m := c.runP99(c.pgb, "smoke", []string{"-S", "-M", "simple", "-c", "20", "-j", "2", "-t", "50"})
	if m.txns != 1000 || m.tps <= 0 || m.p99Ms <= 0 {
		t.Errorf("pgbouncer transaction mode: %+v from pgbench", m)
	}
	if c.preparedUnavailable == "" {
		m := c.runP99(c.pgb, "smoke prepared", []string{"-S", "-M", "prepared", "-c", "20", "-j", "2", "-t", "50"})
		if m.txns != 1000 {
			t.Errorf("pgbouncer transaction mode, -M prepared: %+v from pgbench", m)
		}
	}
}

const (
	txnClients  = 64 // pgbench clients in the transaction-mode rows
	txnPoolSize = 16 // server connections in both poolers' pool
)

// txnComparison is a comparison whose targets pool transactions.
type txnComparison struct {
	*comparison
	pgbVersion string
	// preparedUnavailable says why PgBouncer cannot run -M prepared in
	// transaction mode, or is "" when it can.
	preparedUnavailable string
	// fpErr is why fenceproxy did not start in transaction mode; c.fp is
	// then nil.
	fpErr error
	// fencedScripts and unfencedScripts are the fenced tpcb-like scripts
	// by protocol mode (txnFencedTPCB).
	fencedScripts, unfencedScripts map[string]string
}

// newTxnComparison starts PostgreSQL with a pgbench database of the scale
// and the fence schema, PgBouncer in transaction mode, and a fenceproxy
// serve process configured for transaction mode, and checks that each
// pooler that started shares its server connections.
func newTxnComparison(tb testing.TB, scale int) *txnComparison {
	pg := harness.Postgres(tb)
	db := harness.CreateDB(tb, pg)
	c := &txnComparison{fencedScripts: map[string]string{}, unfencedScripts: map[string]string{}, comparison: &comparison{tb: tb, pgbench: harness.Tool(tb, pg, "pgbench"), db: db,
		direct: pg.DSN(pgcluster.Superuser, db), profileDir: os.Getenv("BENCH_PROFILE")}}
	harness.Migrate(tb, c.direct)
	c.pgbenchRun("127.0.0.1", pg.Port, "-i", "-q", "-s", strconv.Itoa(scale))

	major, minor := harness.PgBouncerVersion(tb)
	c.pgbVersion = fmt.Sprintf("%d.%d", major, minor)
	bc := harness.PgBouncerConfig{Upstream: pg.Addr(), PoolMode: "transaction", PoolSize: txnPoolSize}
	if major > 1 || minor >= 21 {
		bc.MaxPreparedStatements = 200
	} else {
		c.preparedUnavailable = "PgBouncer " + c.pgbVersion + " cannot run -M prepared in transaction mode (max_prepared_statements is 1.21's)"
	}
	bouncer := harness.StartPgBouncerWith(tb, bc)
	c.pgb = &benchTarget{name: "pgbouncer transaction mode", host: bouncer.Host, port: bouncer.Port, pid: bouncer.Pid}
	checkPooling(tb, pg, db, c.pgb)

	c.fp, c.fpErr = c.startFenceproxyTxn(pg.Addr())
	if c.fp != nil {
		checkPooling(tb, pg, db, c.fp)
	}

	dir := tb.TempDir()
	unfenced := strings.NewReplacer("'lock.", "'bench.", "LOCAL lock.", "LOCAL bench.")
	for mode, script := range txnFencedTPCB {
		c.fencedScripts[mode] = filepath.Join(dir, "fenced-"+mode+".sql")
		c.unfencedScripts[mode] = filepath.Join(dir, "unfenced-"+mode+".sql")
		writeScript(tb, c.fencedScripts[mode], script)
		writeScript(tb, c.unfencedScripts[mode], unfenced.Replace(script))
	}
	return c
}

// txnFencedTPCB is fencedTPCB for each protocol mode in transaction pool
// mode, where a fencing setting's value must be one the proxy can tell
// the transaction set: a constant or a parameter, not the expression
// 'bench/' || :client_id (refused 55Z05, as under token_scope:
// transaction). pgbench writes :client_id into the text in simple mode,
// quotes included, and sends it as $1 in the extended protocol. The call
// is schema-qualified, as pgxfence sends it: a set_config that can be only
// PostgreSQL's sets the resource for the transaction alone, and the next
// transaction starts unchecked; an unqualified one may be a user's, which
// keeps every later transaction checked (docs/fencing.md).
var txnFencedTPCB = map[string]string{
	"simple":   txnFenced.Replace(strings.Replace(fencedTPCB, "'bench/' || :client_id", "'bench/:client_id'", 1)),
	"extended": txnFenced.Replace(strings.Replace(fencedTPCB, "'bench/' || :client_id", ":client_id", 1)),
}

var txnFenced = strings.NewReplacer("SELECT set_config(", "SELECT pg_catalog.set_config(")

// startFenceproxyTxn starts `fenceproxy serve` in transaction pool mode
// (harness.TransactionPoolSettings), serving the profiler.
func (c *txnComparison) startFenceproxyTxn(upstream string) (*benchTarget, error) {
	c.metricsAddr = freeAddr(c.tb)
	settings := harness.TransactionPoolSettings(c.tb, txnPoolSize) + "metrics_listen: " + c.metricsAddr + "\ndebug_pprof: true\n"
	p, err := harness.StartProxyProcessConfig(c.tb, upstream, settings)
	if err != nil {
		return nil, err
	}
	host, port := splitHostPort(c.tb, p.Addr)
	return &benchTarget{name: "fenceproxy transaction mode", host: host, port: port, pid: p.Pid()}, nil
}

// checkPooling fails the benchmark unless t really pools transactions:
// 20 client connections that each ran a query and stay open hold at most
// txnPoolSize server connections (in session mode they would hold 20).
func checkPooling(tb testing.TB, pg *pgcluster.Cluster, db string, t *benchTarget) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, pg.DSN(pgcluster.Superuser, "postgres"))
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close(ctx)
	backends := func() int {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'", db).Scan(&n); err != nil {
			tb.Fatal(err)
		}
		return n
	}
	before := backends()
	const clients = 20
	dsn := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", pgcluster.Superuser, t.host, t.port, db)
	for range clients {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Fatalf("%s: connect: %v", t.name, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			tb.Fatalf("%s: SELECT 1: %v", t.name, err)
		}
	}
	if n := backends() - before; n > txnPoolSize {
		tb.Fatalf("%s does not pool transactions: %d idle clients hold %d server connections (pool size %d)", t.name, clients, n, txnPoolSize)
	}
}

// txnPairs are the transaction-mode table's rows.
func txnPairs(c *txnComparison) []pair {
	var ps []pair
	clients := []string{"-c", strconv.Itoa(txnClients), "-j", "2"}
	versus := func(name, mode string, args ...string) {
		args = append(append(args, "-M", mode), clients...)
		if mode == "prepared" && slices.Contains(args, "tpcb-like") {
			// pgbench prepares a client's statements with a synchronous
			// PQprepare at its first command: in a thread whose other
			// clients hold every server connection in open transactions
			// it waits for good (query_wait_timeout ends it). One thread
			// per client cannot block another's.
			args[len(args)-1] = strconv.Itoa(txnClients)
		}
		p := pair{name: name,
			a: side{label: "pgbouncer", target: c.pgb, args: args, p99: true},
			b: side{label: "fenceproxy", target: c.fp, args: args, p99: true}}
		if mode == "prepared" {
			p.a.unavailable = c.preparedUnavailable
		}
		ps = append(ps, p)
	}
	for _, mode := range []string{"simple", "extended", "prepared"} {
		versus(fmt.Sprintf("txn select-only c=%d %s", txnClients, mode), mode, "-S", "-t", "1500")
	}
	for _, mode := range []string{"simple", "prepared"} {
		versus(fmt.Sprintf("txn tpcb-like c=%d %s", txnClients, mode), mode, "-b", "tpcb-like", "-t", "150")
	}
	for _, mode := range []string{"simple", "extended"} {
		args := append([]string{"-M", mode, "-t", "100", "-D", "scale=" + strconv.Itoa(compareScale)}, clients...)
		ps = append(ps, pair{name: fmt.Sprintf("txn fenced tpcb c=%d %s", txnClients, mode),
			a: side{label: "unfenced", target: c.fp, args: append(slices.Clone(args), "-f", c.unfencedScripts[mode]), p99: true},
			b: side{label: "fenced", target: c.fp, args: append(slices.Clone(args), "-f", c.fencedScripts[mode]), p99: true}})
	}
	if c.fpErr != nil {
		for i := range ps {
			for _, s := range []*side{&ps[i].a, &ps[i].b} {
				if s.target == nil {
					s.unavailable = "fenceproxy did not start in transaction mode (the error follows the table)"
				}
			}
		}
	}
	return ps
}

// runP99 is run with pgbench logging each transaction's latency, and the
// p99 of those latencies.
func (c *comparison) runP99(t *benchTarget, name string, args []string) measure {
	dir, err := os.MkdirTemp("", "pgbench-log-")
	if err != nil {
		c.tb.Fatal(err)
	}
	defer os.RemoveAll(dir)
	m := c.run(t, name, append([]string{"-l", "--log-prefix", filepath.Join(dir, "txn")}, args...))
	lat := pgbenchLogLatencies(c.tb, dir)
	if len(lat) != m.txns {
		c.tb.Fatalf("%s via %s: %d transactions logged, %d processed", name, t.name, len(lat), m.txns)
	}
	m.p99Ms = percentileMs(lat, 99)
	return m
}

// pgbenchLogLatencies reads every per-transaction log in dir (pgbench -l:
// "client_id transaction_no time script_no time_epoch time_us", time the
// latency in µs) and returns the latencies in µs.
func pgbenchLogLatencies(tb testing.TB, dir string) []float64 {
	files, err := filepath.Glob(filepath.Join(dir, "txn.*"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no pgbench log in %s: %v", dir, err)
	}
	var lat []float64
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			tb.Fatal(err)
		}
		lat = append(lat, readLatencies(tb, name, f)...)
		f.Close()
	}
	return lat
}

func readLatencies(tb testing.TB, name string, r io.Reader) []float64 {
	var lat []float64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			tb.Fatalf("%s: line %q: want 6 fields or more", name, sc.Text())
		}
		us, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			tb.Fatalf("%s: line %q: latency %q (a failed or skipped transaction?)", name, sc.Text(), f[2])
		}
		lat = append(lat, us)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return lat
}

// percentileMs is the p-th percentile (nearest rank) of latencies in µs,
// in ms.
func percentileMs(us []float64, p int) float64 {
	if len(us) == 0 {
		return 0
	}
	s := slices.Clone(us)
	slices.Sort(s)
	rank := int(math.Ceil(float64(p) / 100 * float64(len(s))))
	return s[max(rank, 1)-1] / 1000
}

// printTxn writes the transaction-mode table of medians, n/a for a side
// that could not be measured, and the reasons below.
func (c *txnComparison) printTxn(w io.Writer, rounds int) {
	fmt.Fprintf(w, "\nbench-compare transaction mode %s, %d rounds (A B A B …), medians; %d clients over %d server connections "+
		"(PgBouncer %s pool_mode = transaction, fenceproxy pool_mode: transaction); CPU = the pooler process's utime+stime per transaction; "+
		"p99 from pgbench's per-transaction log\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), rounds, txnClients, txnPoolSize, c.pgbVersion)
	fmt.Fprintln(w, "| workload | A | B | TPS A | TPS B | B/A | p99 ms A | p99 ms B | CPU µs/txn A | CPU µs/txn B | B/A |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	var reasons []string
	for _, p := range c.pairs {
		a, b := medians(p.a.runs), medians(p.b.runs)
		cell := func(s side, v float64, format string) string {
			if s.unavailable != "" {
				if !slices.Contains(reasons, s.unavailable) {
					reasons = append(reasons, s.unavailable)
				}
				return "n/a"
			}
			return fmt.Sprintf(format, v)
		}
		ratio := func(vb, va float64) string {
			if p.a.unavailable != "" || p.b.unavailable != "" {
				return "—"
			}
			return fmt.Sprintf("%.2f", vb/va)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			p.name, p.a.label, p.b.label,
			cell(p.a, a.tps, "%.0f"), cell(p.b, b.tps, "%.0f"), ratio(b.tps, a.tps),
			cell(p.a, a.p99Ms, "%.3f"), cell(p.b, b.p99Ms, "%.3f"),
			cell(p.a, a.cpuUsPerTxn, "%.1f"), cell(p.b, b.cpuUsPerTxn, "%.1f"), ratio(b.cpuUsPerTxn, a.cpuUsPerTxn))
	}
	fmt.Fprintln(w)
	for _, r := range reasons {
		fmt.Fprintf(w, "n/a: %s\n", r)
	}
	if len(reasons) > 0 {
		fmt.Fprintln(w)
	}
}
