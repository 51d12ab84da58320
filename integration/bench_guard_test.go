package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
	"github.com/fenceproxy/fenceproxy/internal/guard"
	"github.com/jackc/pgx/v5"
)

// tpcbChecked is pgbench's tpcb-like transaction with the fence check a
// holder of resource "bank" runs first (the same in both runs: the
// benchmark measures the guard triggers, not the check).
const tpcbChecked = `\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
CALL fence.check('1', 'bank', '', '', false, true);
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
`

// guardBenchCase is one pgbench configuration of BenchmarkGuardCost: a
// fixed number of transactions per client, so that both runs do the same
// work and the server's CPU time per transaction compares directly.
type guardBenchCase struct {
	name    string
	clients int
	mode    string // pgbench -M
	txs     int    // per client
}

var guardBenchCases = []guardBenchCase{
	{"c1-prepared", 1, "prepared", 2000},
	{"c1-simple", 1, "simple", 2000},
	{"c8-prepared", 8, "prepared", 250},
	{"c8-simple", 8, "simple", 250},
}

// BenchmarkGuardCost measures the database guard (fenceproxy protect):
// pgbench tpcb-like with the pgbench tables protected and not (c=1 and c=8,
// -M prepared and simple, a fixed -t), and a 100,000-row COPY FROM STDIN,
// for each of guardVariants: no guard, the PL/pgSQL fence.guard and the C
// one. Each iteration is a round that runs every case under the three
// back to back, in that order in even rounds and reversed in odd ones, so
// that they see the same machine and drift hits all alike. Besides TPS,
// which the shared machine makes noisy, it measures the PostgreSQL server's
// CPU time (user + system, all of the cluster's processes: see serverCPU)
// per transaction. It reports the medians and, the metric, the median of
// the rounds' ratios of each guard to no guard, and prints a table. Run
// with: make bench-guard
func BenchmarkGuardCost(b *testing.B) {
	e := newFencedEnv(b, nil)
	pgbench(b, e.pg, "127.0.0.1", e.pg.Port, e.db, "-i", "-q", "-s", "1")
	admin := connect(b, e.direct(), pgx.QueryExecModeExec)
	// Commits without waiting for the disk: the shared machine's fsync
	// times would drown the triggers' CPU cost. No autovacuum (the cluster
	// is this test process's own): a worker that happens to run during
	// one run, e.g. on the catalogs after protect's DDL, would count in
	// that run's CPU.
	setup := []string{"CREATE TABLE copy_target (id int, a text, n int)", "ALTER DATABASE " + e.db + " SET synchronous_commit = off",
		"ALTER SYSTEM SET autovacuum = off", "SELECT pg_reload_conf()"}
	for _, s := range setup {
		if _, err := admin.Exec(b.Context(), s); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		harness.Exec(context.Background(), e.direct(), "ALTER SYSTEM RESET autovacuum", "SELECT pg_reload_conf()")
	})
	cpu := newServerCPU(b, admin)
	script := filepath.Join(b.TempDir(), "tpcb.sql")
	if err := os.WriteFile(script, []byte(tpcbChecked), 0o644); err != nil {
		b.Fatal(err)
	}
	var rows strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&rows, "%d\tsome text %d\t%d\n", i, i, i*3)
	}
	type series struct{ tps, cpuPerTx [3][]float64 } // by guardVariants
	results := make(map[string]*series)
	for _, c := range guardBenchCases {
		results[c.name] = &series{}
	}
	var copyMs, copyCPU [3][]float64
	load0 := loadAvg(b)
	for i := 0; i < b.N; i++ {
		order := []int{0, 1, 2}
		if i%2 == 1 {
			order = []int{2, 1, 0} // none always goes first
		}
		// Each case runs its variants back to back, so that they see the
		// same machine: the other work on it comes and goes within
		// seconds and can double the CPU time of a transaction.
		for _, c := range guardBenchCases {
			for _, v := range order {
				setGuard(b, admin, guardVariants[v])
				// Unmeasured: the first sessions after protect's DDL
				// rebuild caches that later ones share.
				pgbench(b, e.pg, "127.0.0.1", e.pg.Port, e.db, "-n", "-f", script, "-c", "2", "-t", "20")
				if _, err := admin.Exec(b.Context(), "CHECKPOINT"); err != nil {
					b.Fatal(err)
				}
				before := cpu.read(b)
				out := pgbench(b, e.pg, "127.0.0.1", e.pg.Port, e.db, "-n", "-f", script, "-M", c.mode,
					"-c", strconv.Itoa(c.clients), "-j", strconv.Itoa(min(c.clients, 2)), "-t", strconv.Itoa(c.txs))
				used := cpu.read(b) - before
				if want := fmt.Sprintf("number of transactions actually processed: %d/%d", c.clients*c.txs, c.clients*c.txs); !strings.Contains(out, want) {
					b.Fatalf("pgbench %s: want %q in\n%s", c.name, want, out)
				}
				r := results[c.name]
				r.tps[v] = append(r.tps[v], tps(b, out))
				r.cpuPerTx[v] = append(r.cpuPerTx[v], used.Seconds()*1e6/float64(c.clients*c.txs))
			}
		}
		for _, v := range order {
			setGuard(b, admin, guardVariants[v])
			before := cpu.read(b)
			copyMs[v] = append(copyMs[v], copyMillis(b, admin, rows.String()))
			copyCPU[v] = append(copyCPU[v], float64((cpu.read(b) - before).Milliseconds()))
		}
	}
	load1 := loadAvg(b)
	var table strings.Builder
	fmt.Fprintf(&table, "rounds %d, load average %s at the start, %s at the end; ratios are the median of each round's on/off\n", b.N, load0, load1)
	fmt.Fprintf(&table, "%-12s %26s %15s %26s %15s\n", "", "server cpu µs/tx", "cpu ratio", "tps", "tps ratio")
	fmt.Fprintf(&table, "%-12s %8s %8s %8s %7s %7s %8s %8s %8s %7s %7s\n", "case", "off", "plpgsql", "c", "plpgsql", "c", "off", "plpgsql", "c", "plpgsql", "c")
	for _, c := range guardBenchCases {
		r := results[c.name]
		fmt.Fprintf(&table, "%-12s %8.1f %8.1f %8.1f %7.3f %7.3f %8.0f %8.0f %8.0f %7.3f %7.3f\n", c.name,
			median(r.cpuPerTx[0]), median(r.cpuPerTx[1]), median(r.cpuPerTx[2]),
			median(ratios(r.cpuPerTx, 1)), median(ratios(r.cpuPerTx, 2)),
			median(r.tps[0]), median(r.tps[1]), median(r.tps[2]),
			median(ratios(r.tps, 1)), median(ratios(r.tps, 2)))
		fmt.Fprintf(&table, "%-12s   cpu µs/tx by round, off %v, plpgsql %v, c %v\n", "", rounded(r.cpuPerTx[0], 0), rounded(r.cpuPerTx[1], 0), rounded(r.cpuPerTx[2], 0))
		for v := 1; v < 3; v++ {
			b.ReportMetric(median(ratios(r.cpuPerTx, v)), c.name+"-cpu-ratio-"+guardVariants[v])
			b.ReportMetric(median(ratios(r.tps, v)), c.name+"-tps-ratio-"+guardVariants[v])
		}
	}
	fmt.Fprintf(&table, "copy 100,000 rows, ms off / plpgsql / c: %.0f / %.0f / %.0f (ratios %.3f, %.3f); server cpu ms %.0f / %.0f / %.0f (ratios %.3f, %.3f)\n",
		median(copyMs[0]), median(copyMs[1]), median(copyMs[2]), median(ratios(copyMs, 1)), median(ratios(copyMs, 2)),
		median(copyCPU[0]), median(copyCPU[1]), median(copyCPU[2]), median(ratios(copyCPU, 1)), median(ratios(copyCPU, 2)))
	fmt.Fprintf(&table, "copy ms by round, off %v, plpgsql %v, c %v\n", rounded(copyMs[0], 0), rounded(copyMs[1], 0), rounded(copyMs[2], 0))
	b.ReportMetric(median(ratios(copyMs, 2)), "copy-ratio-c")
	// Printed, not logged: the testing package cuts long benchmark logs.
	fmt.Print(table.String())
}

// ratios is variant v over off (guardVariants[0]) in each round.
func ratios(v [3][]float64, k int) []float64 {
	var r []float64
	for i := range v[0] {
		r = append(r, v[k][i]/v[0][i])
	}
	return r
}

// rounded formats v with prec decimals.
func rounded(v []float64, prec int) []string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.FormatFloat(x, 'f', prec, 64))
	}
	return s
}

func loadAvg(b *testing.B) string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Fatal(err)
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

var guardBenchTables = []string{"pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history", "copy_target"}

// guardVariants are what BenchmarkGuardCost compares: no guard, the
// PL/pgSQL fence.guard and the C one (ext/fence_guard).
var guardVariants = []string{"off", guard.GuardPLpgSQL, guard.GuardC}

// setGuard protects the pgbench tables and copy_target (resource "bank")
// with the variant's fence.guard, or removes the guard ("off").
func setGuard(b *testing.B, admin *pgx.Conn, variant string) {
	on := variant != "off"
	var entries []guard.Entry
	if on {
		for _, t := range guardBenchTables {
			entries = append(entries, guard.Entry{Schema: "public", Name: t, Resource: "bank", Where: "bench"})
		}
	}
	if _, err := guard.Protect(b.Context(), fencestorepgx.Querier{Conn: admin}, entries, guard.Options{Remove: !on, Guard: variant}); err != nil {
		b.Fatal(err)
	}
}

// serverCPU reads the CPU time of a PostgreSQL cluster from /proc: the
// postmaster's own user and system time, its cutime and cstime (the times
// of the children it has reaped: every backend that exited, such as
// pgbench's, which end with the run), and the times of its live children
// (checkpointer, WAL writer, the benchmark's own session …). A child that
// has exited but is not yet reaped still shows its times in /proc until
// it is, so read waits until every child that was not there at the start
// is gone: then a backend is counted exactly once, in cutime and cstime.
type serverCPU struct {
	postmaster int
	tick       float64 // seconds per clock tick
	baseline   map[int]bool
}

func newServerCPU(b *testing.B, admin *pgx.Conn) *serverCPU {
	var backend int
	if err := admin.QueryRow(b.Context(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		b.Fatal(err)
	}
	f := procStat(b, backend)
	if f == nil {
		b.Fatalf("no /proc/%d/stat: the benchmark must run on the server's machine", backend)
	}
	pm, _ := strconv.Atoi(f[1]) // ppid
	s := &serverCPU{postmaster: pm, tick: 0.01}
	s.baseline = s.children(b)
	return s
}

// procStat returns the fields of /proc/PID/stat after the command name
// (f[0] is the state, f[1] the ppid, f[11] utime …), or nil when the
// process is gone.
func procStat(b *testing.B, pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if os.IsNotExist(err) || strings.Contains(err.Error(), "no such process") {
			return nil
		}
		b.Fatal(err)
	}
	i := strings.LastIndexByte(string(data), ')')
	return strings.Fields(string(data[i+1:]))
}

// children lists the postmaster's child processes.
func (s *serverCPU) children(b *testing.B) map[int]bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	kids := make(map[int]bool)
	pm := strconv.Itoa(s.postmaster)
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if f := procStat(b, pid); f != nil && f[1] == pm {
			kids[pid] = true
		}
	}
	return kids
}

func ticks(b *testing.B, f []string, idx ...int) int64 {
	var n int64
	for _, i := range idx {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		n += v
	}
	return n
}

// read returns the cluster's CPU time so far, after the children that came
// since the start (backends of finished clients) have been reaped.
func (s *serverCPU) read(b *testing.B) time.Duration {
	deadline := time.Now().Add(10 * time.Second)
	for {
		kids := s.children(b)
		extra := 0
		for k := range kids {
			if !s.baseline[k] {
				extra++
			}
		}
		if extra == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d server processes besides the long-lived ones still run 10 s after the clients ended", extra)
		}
		time.Sleep(5 * time.Millisecond)
	}
	pm := procStat(b, s.postmaster)
	if pm == nil {
		b.Fatal("postmaster gone")
	}
	n := ticks(b, pm, 11, 12, 13, 14) // utime, stime, cutime, cstime
	for k := range s.baseline {
		if f := procStat(b, k); f != nil {
			n += ticks(b, f, 11, 12)
		}
	}
	return time.Duration(float64(n) * s.tick * float64(time.Second))
}

// copyMillis copies rows into an emptied copy_target in one checked
// transaction and returns how long the COPY took.
func copyMillis(b *testing.B, admin *pgx.Conn, rows string) float64 {
	ctx := b.Context()
	tx, err := admin.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, s := range []string{"CALL fence.check('1', 'bank', '', '', false, true)", "TRUNCATE copy_target"} {
		if _, err := tx.Exec(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	if _, err := tx.Conn().PgConn().CopyFrom(ctx, strings.NewReader(rows), "COPY copy_target FROM STDIN"); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	return float64(d.Microseconds()) / 1000
}

// perStatementLoop times n write statements inside one backend, with no
// client round trip: a zero-row UPDATE of one of three tables fires its
// statement trigger once (none on unguarded, a PL/pgSQL one that does
// nothing on noop, fence_guard on guarded). It returns microseconds per
// statement. The statements are static, so PL/pgSQL plans each once.
const perStatementLoop = `CREATE PROCEDURE guard_loop(p_table text, p_n int, INOUT p_us float8 DEFAULT 0)
LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz;
BEGIN
	CALL fence.check('1', 'bank', '', '', false, true);
	t0 := clock_timestamp();
	CASE p_table
	WHEN 'guarded' THEN
		FOR i IN 1 .. p_n LOOP UPDATE guarded SET v = v WHERE id = -1; END LOOP;
	WHEN 'noop' THEN
		FOR i IN 1 .. p_n LOOP UPDATE noop SET v = v WHERE id = -1; END LOOP;
	ELSE
		FOR i IN 1 .. p_n LOOP UPDATE unguarded SET v = v WHERE id = -1; END LOOP;
	END CASE;
	p_us := extract(epoch FROM clock_timestamp() - t0) * 1e6 / p_n;
END$$`

// BenchmarkGuardPerStatement measures what the guard trigger adds to one
// write statement, inside one backend: no client, no network, no commit.
// Each round times 50,000 zero-row UPDATEs of an unguarded table (off), of
// one with a PL/pgSQL statement trigger that does nothing (the floor of any
// PL/pgSQL guard), and of a guarded one under the PL/pgSQL and the C
// fence.guard, in that order in even rounds and reversed in odd ones; it
// reports the medians and each trigger's median cost over off. Run with:
// make bench-guard
func BenchmarkGuardPerStatement(b *testing.B) {
	e := newFencedEnv(b, nil)
	admin := connect(b, e.direct(), pgx.QueryExecModeExec)
	for _, s := range []string{"CREATE TABLE guarded (id int PRIMARY KEY, v int)", "CREATE TABLE unguarded (id int PRIMARY KEY, v int)",
		"CREATE TABLE noop (id int PRIMARY KEY, v int)",
		"CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'",
		"CREATE TRIGGER noop BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON noop FOR EACH STATEMENT EXECUTE FUNCTION noop()",
		perStatementLoop} {
		if _, err := admin.Exec(b.Context(), s); err != nil {
			b.Fatal(err)
		}
	}
	protect := func(impl string) {
		entry := []guard.Entry{{Schema: "public", Name: "guarded", Resource: "bank", Where: "bench"}}
		if _, err := guard.Protect(b.Context(), fencestorepgx.Querier{Conn: admin}, entry, guard.Options{Guard: impl}); err != nil {
			b.Fatal(err)
		}
	}
	variants := []struct{ name, table, impl string }{
		{"off", "unguarded", ""}, {"noop", "noop", ""}, {"plpgsql", "guarded", guard.GuardPLpgSQL}, {"c", "guarded", guard.GuardC},
	}
	const n = 50000
	us := make([][]float64, len(variants))
	for i := 0; i < b.N; i++ {
		for j := range variants {
			if i%2 == 1 {
				j = len(variants) - 1 - j
			}
			v := variants[j]
			if v.impl != "" {
				protect(v.impl)
			}
			var x float64
			if err := admin.QueryRow(b.Context(), "CALL guard_loop($1, $2)", v.table, n).Scan(&x); err != nil {
				b.Fatal(err)
			}
			us[j] = append(us[j], x)
		}
	}
	off := median(us[0])
	fmt.Printf("µs per zero-row UPDATE in one backend, %d rounds of %d: off %.2f", b.N, n, off)
	for j, v := range variants[1:] {
		fmt.Printf(", %s %.2f (+%.2f)", v.name, median(us[j+1]), median(us[j+1])-off)
		b.ReportMetric(median(us[j+1])-off, v.name+"-us/stmt")
	}
	fmt.Println()
	for j, v := range variants {
		fmt.Printf("%s by round: %v\n", v.name, rounded(us[j], 2))
	}
}
