package integration

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

// BenchmarkCompare puts fenceproxy beside PgBouncer (session mode), both
// on loopback in front of the same PostgreSQL, and runs pgbench workloads
// through each, alternating A B A B over b.N rounds (reversing the order
// every other round). Each run is a fixed number of transactions (-t); the
// proxy's cost is its process's CPU time (utime+stime from /proc/PID/stat)
// over the run divided by the transactions: steadier than TPS on a shared
// machine. It prints one table of medians. Fenced rows compare fenceproxy
// with itself: the same tpcb-like script setting lock.fencing_token and
// lock.resource against one setting bench.* instead.
//
// Run with: make bench-compare (ROUNDS=5 for more rounds). With
// BENCH_ROWS=REGEXP only the rows whose name matches run; with
// BENCH_PROFILE=DIR it also saves a 3-second CPU profile of fenceproxy in
// each workload's first round, as DIR/<workload>.pprof.
func BenchmarkCompare(b *testing.B) {
	if b.N < benchtimeRounds() {
		// The framework's first call, with b.N = 1, before the one with
		// the rounds asked for: skip its minutes of setup and runs.
		return
	}
	c := newComparison(b)
	for round := 0; round < b.N; round++ {
		for i := range c.pairs {
			c.runPair(&c.pairs[i], round)
		}
	}
	c.print(os.Stdout, b.N)
	c.report()
}

// benchtimeRounds is N of -benchtime Nx, else 1.
func benchtimeRounds() int {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return 1
	}
	n, err := strconv.Atoi(strings.TrimSuffix(f.Value.String(), "x"))
	if err != nil || !strings.HasSuffix(f.Value.String(), "x") {
		return 1
	}
	return n
}

// TestCompareHarness checks the pieces of BenchmarkCompare cheaply: that
// PgBouncer starts, that pgbench runs through it and through a fenceproxy
// process, and that their CPU time is read.
func TestCompareHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: starts PostgreSQL, PgBouncer and fenceproxy (make test runs it)")
	}
	c := newComparisonSized(t, 1)
	smoke := []string{"-S", "-M", "extended", "-c", "2", "-j", "1", "-t", "50"}
	for _, tg := range []*benchTarget{c.pgb, c.fp, c.fpGoroutines, c.fpEpoll} {
		m := c.run(tg, "smoke", smoke)
		if m.txns != 100 || m.tps <= 0 || m.latencyMs <= 0 {
			t.Errorf("%s: %+v from pgbench", tg.name, m)
		}
	}
	// fenceproxy with server_reuse keeps the two backends of a run and
	// serves the next run on them.
	before := c.clientBackends()
	c.run(c.fpReuse, "reuse", smoke)
	kept := c.clientBackends()
	if m := c.run(c.fpReuse, "reuse", smoke); m.txns != 100 {
		t.Errorf("server_reuse: %+v from pgbench", m)
	}
	if after := c.clientBackends(); len(kept) != len(before)+2 || !slices.Equal(kept, after) {
		t.Errorf("server_reuse: backends %v before a run, %v after it, %v after the next; want 2 kept, then the same", before, kept, after)
	}
	// PgBouncer serves the next run on new server connections once its
	// pooled ones are ended.
	c.endIdleBackends()
	if m := c.run(c.pgb, "fresh", []string{"-S", "-c", "2", "-j", "1", "-t", "50"}); m.txns != 100 {
		t.Errorf("pgbouncer after its server connections ended: %+v", m)
	}
	fenced := c.run(c.fp, "fenced", []string{"-M", "extended", "-c", "2", "-j", "1", "-t", "5", "-D", "scale=1", "-f", c.fencedScript})
	if fenced.txns != 10 {
		t.Errorf("fenced: %+v", fenced)
	}
	if m := harness.Mark(t, c.direct, "bench/1"); m != 1 {
		t.Errorf("mark of bench/1 = %d: the fenced script was not fenced", m)
	}
	if ticks, err := cpuTicks(c.fp.pid); err != nil || ticks <= 0 {
		t.Errorf("fenceproxy CPU ticks %d, %v", ticks, err)
	}
}

// benchTarget is a proxy process pgbench can be pointed at.
type benchTarget struct {
	name string
	host string
	port int
	pid  int
}

// measure is one pgbench run's outcome.
type measure struct {
	tps, latencyMs, cpuUsPerTxn float64
	p99Ms                       float64 // from per-transaction logs, on sides that keep them
	txns                        int
}

// side is one half of a pair: a target and the pgbench arguments.
type side struct {
	label  string
	target *benchTarget
	args   []string
	runs   []measure
	// p99 has pgbench log each transaction (-l) for the run's p99 latency.
	p99 bool
	// unavailable, when set, says why this side cannot be measured: it
	// is not run, and its row shows the reason.
	unavailable string
	// before, when set, runs before each of the side's runs.
	before func()
}

// pair is one row of the table: B measured against A.
type pair struct {
	name string
	a, b side
}

type comparison struct {
	tb             testing.TB
	pgbench        string
	db             string
	direct         string
	fp, pgb        *benchTarget
	fpGoroutines   *benchTarget // fenceproxy with relay: goroutines
	fpEpoll        *benchTarget // fenceproxy with relay: epoll
	fpReuse        *benchTarget // fenceproxy with server_reuse, auth_type trust as PgBouncer's
	metricsAddr    string
	profileDir     string
	fencedScript   string
	unfencedScript string
	pairs          []pair
}

// The fenced tpcb-like transaction: pgbench's tpcb-like with the resource
// and the token set for the transaction, each client its own resource (as 8
// independent lock holders). SET cannot take a bind parameter, so the
// resource is set with set_config(…, true), SET LOCAL's equivalent, in
// both protocols, before the token: only pg_catalog.set_config with
// literal arguments passes unchecked (the hand-over form), so this one is
// checked, under no token yet, which does nothing. The unfenced script is
// the same with bench.* settings.
const fencedTPCB = `\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
SELECT set_config('lock.resource', 'bench/' || :client_id, true);
SET LOCAL lock.fencing_token = 1;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
`

const compareScale = 10

func newComparison(b *testing.B) *comparison {
	c := newComparisonSized(b, compareScale)
	c.profileDir = os.Getenv("BENCH_PROFILE")
	c.pairs = chosenRows(comparePairs(c))
	return c
}

// chosenRows returns the rows whose name matches BENCH_ROWS, a regular
// expression; all when it is not set.
func chosenRows(ps []pair) []pair {
	rows := os.Getenv("BENCH_ROWS")
	if rows == "" {
		return ps
	}
	re := regexp.MustCompile(rows)
	return slices.DeleteFunc(ps, func(p pair) bool { return !re.MatchString(p.name) })
}

// newComparisonSized starts PostgreSQL with a pgbench database of the
// scale, the fence schema, PgBouncer and a fenceproxy serve process.
func newComparisonSized(tb testing.TB, scale int) *comparison {
	pg := harness.Postgres(tb)
	db := harness.CreateDB(tb, pg)
	c := &comparison{tb: tb, pgbench: harness.Tool(tb, pg, "pgbench"), db: db, direct: pg.DSN(pgcluster.Superuser, db)}
	harness.Migrate(tb, c.direct)
	c.pgbenchRun("127.0.0.1", pg.Port, "-i", "-q", "-s", strconv.Itoa(scale))
	bouncer := harness.StartPgBouncer(tb, pg)
	c.pgb = &benchTarget{name: "pgbouncer", host: bouncer.Host, port: bouncer.Port, pid: bouncer.Pid}
	c.fp = c.startFenceproxy(pg.Addr(), "")
	c.fpGoroutines = c.startFenceproxy(pg.Addr(), "relay: goroutines\n")
	c.fpEpoll = c.startFenceproxy(pg.Addr(), "relay: epoll\n")
	c.fpReuse = c.startFenceproxy(pg.Addr(), "server_reuse: true\nauth_type: trust\n")
	dir := tb.TempDir()
	c.fencedScript = filepath.Join(dir, "fenced.sql")
	c.unfencedScript = filepath.Join(dir, "unfenced.sql")
	writeScript(tb, c.fencedScript, fencedTPCB)
	writeScript(tb, c.unfencedScript, strings.NewReplacer("'lock.", "'bench.", "LOCAL lock.", "LOCAL bench.").Replace(fencedTPCB))
	return c
}

// startFenceproxy starts a fenceproxy serve process with extra settings;
// the first one started serves the profiler.
func (c *comparison) startFenceproxy(upstream, extra string) *benchTarget {
	cfg := filepath.Join(c.tb.TempDir(), "fenceproxy.yaml")
	settings := "listen: 127.0.0.1:0\nupstream: " + upstream + "\nupstream_tls: disable\nmax_client_conns: 300\n" + extra
	if c.metricsAddr == "" {
		c.metricsAddr = freeAddr(c.tb)
		settings += "metrics_listen: " + c.metricsAddr + "\ndebug_pprof: true\n"
	}
	writeScript(c.tb, cfg, settings)
	addr, cmd, _ := startServe(c.tb, nil, "--config", cfg)
	host, port := splitHostPort(c.tb, addr)
	return &benchTarget{name: "fenceproxy", host: host, port: port, pid: cmd.Process.Pid}
}

// comparePairs are the table's rows.
func comparePairs(c *comparison) []pair {
	var ps []pair
	versus := func(name string, args ...string) {
		ps = append(ps, pair{name: name,
			a: side{label: "pgbouncer", target: c.pgb, args: args},
			b: side{label: "fenceproxy", target: c.fp, args: args}})
	}
	for _, mode := range []string{"simple", "extended", "prepared"} {
		versus("select-only c=1 "+mode, "-S", "-M", mode, "-c", "1", "-j", "1", "-t", "12000")
		versus("select-only c=16 "+mode, "-S", "-M", mode, "-c", "16", "-j", "2", "-t", "5000")
	}
	versus("tpcb-like c=16 simple", "-b", "tpcb-like", "-M", "simple", "-c", "16", "-j", "2", "-t", "600")
	// PgBouncer's session mode hands a new client a server connection an
	// earlier client used; fenceproxy's session mode opens one per client,
	// whose backend starts cold (its first touch of each shared buffer is a
	// page fault). This row takes that away: PgBouncer's server connections
	// are ended before each of its runs, so both sides start new backends.
	fresh := []string{"-S", "-M", "simple", "-c", "16", "-j", "2", "-t", "5000"}
	ps = append(ps, pair{name: "select-only c=16 simple, new backends each run",
		a: side{label: "pgbouncer", target: c.pgb, args: fresh, before: c.endIdleBackends},
		b: side{label: "fenceproxy", target: c.fp, args: fresh}})
	// With server_reuse fenceproxy's session mode reuses server
	// connections as PgBouncer's does: the like-for-like rows.
	for _, mode := range []string{"simple", "extended", "prepared"} {
		args := []string{"-S", "-M", mode, "-c", "16", "-j", "2", "-t", "5000"}
		ps = append(ps, pair{name: "select-only c=16 " + mode + ", server_reuse",
			a: side{label: "pgbouncer", target: c.pgb, args: args},
			b: side{label: "fenceproxy", target: c.fpReuse, args: args}})
	}
	// The relays side by side: the default (the loop over io_uring) against
	// two goroutines per session and against the loop over epoll.
	for _, mode := range []string{"simple", "prepared"} {
		args := []string{"-S", "-M", mode, "-c", "16", "-j", "2", "-t", "5000"}
		for _, other := range []*side{{label: "goroutines", target: c.fpGoroutines}, {label: "epoll", target: c.fpEpoll}} {
			other.args = args
			ps = append(ps, pair{name: "relay select-only c=16 " + mode, a: *other, b: side{label: "loop", target: c.fp, args: args}})
		}
	}
	for _, mode := range []string{"simple", "extended"} {
		args := []string{"-M", mode, "-c", "8", "-j", "2", "-t", "800", "-D", "scale=" + strconv.Itoa(compareScale), "-f"}
		ps = append(ps, pair{name: "fenced tpcb c=8 " + mode,
			a: side{label: "unfenced", target: c.fp, args: append(append([]string{}, args...), c.unfencedScript)},
			b: side{label: "fenced", target: c.fp, args: append(append([]string{}, args...), c.fencedScript)}})
	}
	return ps
}

// runPair runs both sides of p once, A first in even rounds.
func (c *comparison) runPair(p *pair, round int) {
	first, second := &p.a, &p.b
	if round%2 == 1 {
		first, second = second, first
	}
	for _, s := range []*side{first, second} {
		if s.unavailable != "" {
			continue
		}
		if s.before != nil {
			s.before()
		}
		var prof func()
		if round == 0 && c.profileDir != "" && s.target == c.fp {
			prof = c.profile(p.name + " " + s.label)
		}
		if s.p99 {
			s.runs = append(s.runs, c.runP99(s.target, p.name, s.args))
		} else {
			s.runs = append(s.runs, c.run(s.target, p.name, s.args))
		}
		if prof != nil {
			prof()
		}
	}
}

// clientBackends returns the PIDs of the benchmark database's client
// backends, other than its own, once those that are ending have gone.
func (c *comparison) clientBackends() []int {
	time.Sleep(300 * time.Millisecond)
	conn, err := pgx.Connect(context.Background(), c.direct)
	if err != nil {
		c.tb.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pids []int
	if err := conn.QueryRow(context.Background(), `SELECT coalesce(array_agg(pid ORDER BY pid), '{}') FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&pids); err != nil {
		c.tb.Fatal(err)
	}
	return pids
}

// endIdleBackends ends the benchmark database's idle backends (PgBouncer's
// pooled server connections) and waits until they are gone and PgBouncer
// has seen them close.
func (c *comparison) endIdleBackends() {
	ctx := context.Background()
	const idle = `FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle'
		AND backend_type = 'client backend' AND pid <> pg_backend_pid()`
	conn, err := pgx.Connect(ctx, c.direct)
	if err != nil {
		c.tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) "+idle); err != nil {
		c.tb.Fatal(err)
	}
	for n := 1; n > 0; {
		if err := conn.QueryRow(ctx, "SELECT count(*) "+idle).Scan(&n); err != nil {
			c.tb.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(250 * time.Millisecond) // PgBouncer reads each closed socket's end
}

// run runs pgbench against t and measures t's CPU time over the run.
func (c *comparison) run(t *benchTarget, name string, args []string) measure {
	before, err := cpuTicks(t.pid)
	if err != nil {
		c.tb.Fatal(err)
	}
	out := c.pgbenchRun(t.host, t.port, args...)
	after, err := cpuTicks(t.pid)
	if err != nil {
		c.tb.Fatal(err)
	}
	m := parsePgbench(c.tb, out)
	if m.txns == 0 {
		c.tb.Fatalf("%s via %s: no transactions\n%s", name, t.name, out)
	}
	m.cpuUsPerTxn = float64(after-before) * 1e6 / clockTicksPerSecond / float64(m.txns)
	return m
}

func (c *comparison) pgbenchRun(host string, port int, args ...string) string {
	return pgbenchCmd(c.tb, c.pgbench, host, port, c.db, args...)
}

// profile starts a CPU profile of fenceproxy; the function returned waits
// for it and saves it.
func (c *comparison) profile(name string) func() {
	done := make(chan []byte, 1)
	go func() {
		resp, err := http.Get("http://" + c.metricsAddr + "/debug/pprof/profile?seconds=3")
		if err != nil {
			done <- nil
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		done <- data
	}()
	time.Sleep(100 * time.Millisecond) // let the profile start with the run
	return func() {
		data := <-done
		file := filepath.Join(c.profileDir, strings.NewReplacer(" ", "_", "=", "").Replace(name)+".pprof")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			c.tb.Logf("profile %s: %v", name, err)
		}
	}
}

var (
	pgbenchLatency   = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
	pgbenchProcessed = regexp.MustCompile(`number of transactions actually processed: (\d+)`)
)

func parsePgbench(tb testing.TB, out string) measure {
	var m measure
	if f := pgbenchFailed.FindStringSubmatch(out); f != nil && f[1] != "0" {
		tb.Fatalf("pgbench: %s failed transactions\n%s", f[1], out)
	}
	for re, dst := range map[*regexp.Regexp]*float64{pgbenchTPS: &m.tps, pgbenchLatency: &m.latencyMs} {
		if f := re.FindStringSubmatch(out); f != nil {
			*dst, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if f := pgbenchProcessed.FindStringSubmatch(out); f != nil {
		m.txns, _ = strconv.Atoi(f[1])
	}
	return m
}

// clockTicksPerSecond is Linux's USER_HZ, the unit of /proc/PID/stat's
// utime and stime: 100 on every architecture Go supports on Linux.
const clockTicksPerSecond = 100

// cpuTicks returns a process's user plus system CPU time, all threads, in
// clock ticks (/proc/PID/stat fields 14 and 15).
func cpuTicks(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from its ')'.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return utime + stime, nil
}

// print writes the table of medians.
func (c *comparison) print(w io.Writer, rounds int) {
	fmt.Fprintf(w, "\nbench-compare %s, %d rounds (A B A B …), medians; CPU = the proxy process's utime+stime per transaction\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), rounds)
	fmt.Fprintln(w, "| workload | A | B | TPS A | TPS B | B/A | latency ms A | B | CPU µs/txn A | CPU µs/txn B | B/A |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, p := range c.pairs {
		a, b := medians(p.a.runs), medians(p.b.runs)
		fmt.Fprintf(w, "| %s | %s | %s | %.0f | %.0f | %.2f | %.3f | %.3f | %.1f | %.1f | %.2f |\n",
			p.name, p.a.label, p.b.label, a.tps, b.tps, b.tps/a.tps, a.latencyMs, b.latencyMs,
			a.cpuUsPerTxn, b.cpuUsPerTxn, b.cpuUsPerTxn/a.cpuUsPerTxn)
	}
	fmt.Fprintln(w)
}

// report hands the CPU ratios to the benchmark framework too.
func (c *comparison) report() {
	b, ok := c.tb.(*testing.B)
	if !ok {
		return
	}
	for _, p := range c.pairs {
		if p.a.unavailable != "" || p.b.unavailable != "" {
			continue
		}
		unit := strings.NewReplacer(" ", "-", "=", "").Replace(p.name) + "-cpu-ratio"
		b.ReportMetric(medians(p.b.runs).cpuUsPerTxn/medians(p.a.runs).cpuUsPerTxn, unit)
	}
}

func medians(ms []measure) measure {
	pick := func(f func(measure) float64) float64 {
		v := make([]float64, len(ms))
		for i, m := range ms {
			v[i] = f(m)
		}
		return median(v)
	}
	return measure{
		tps:         pick(func(m measure) float64 { return m.tps }),
		latencyMs:   pick(func(m measure) float64 { return m.latencyMs }),
		cpuUsPerTxn: pick(func(m measure) float64 { return m.cpuUsPerTxn }),
		p99Ms:       pick(func(m measure) float64 { return m.p99Ms }),
	}
}

func writeScript(tb testing.TB, path, text string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// pgbenchCmd runs pgbench as the superuser and returns its output.
func pgbenchCmd(tb testing.TB, bin, host string, port int, db string, args ...string) string {
	tb.Helper()
	base := []string{"-h", host, "-p", strconv.Itoa(port), "-U", pgcluster.Superuser}
	out, err := exec.Command(bin, append(append(base, args...), db)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("pgbench %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func freeAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func splitHostPort(tb testing.TB, addr string) (string, int) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		tb.Fatal(err)
	}
	return host, p
}
