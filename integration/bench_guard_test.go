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
	"github.com/fenceproxy/fenceproxy/internal/guard"
	"github.com/fenceproxy/fenceproxy/internal/pgxhwm"
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
// -M prepared and simple, a fixed -t), and a 100,000-row COPY FROM STDIN.
// Each iteration is a round that runs every case twice back to back, guard
// off and on, in the order off, on in even rounds and on, off in odd ones
// (A B B A …), so that the two runs of a pair see the same machine and
// drift hits both alike. Besides TPS, which the shared machine makes noisy,
// it measures the PostgreSQL server's CPU time (user + system, all of the
// cluster's processes: see serverCPU) per transaction. It reports the
// medians, the ratio of the medians and the median of the pairs' ratios
// (the metric), and prints a table. Run with: make bench-guard
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
	type series struct{ tps, cpuPerTx [2][]float64 } // [0] off, [1] on
	results := make(map[string]*series)
	for _, c := range guardBenchCases {
		results[c.name] = &series{}
	}
	var copyMs, copyCPU [2][]float64
	load0 := loadAvg(b)
	for i := 0; i < b.N; i++ {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0} // neither always goes first
		}
		// Each case runs off and on back to back, so that the two runs of
		// a pair see the same machine: the other work on it comes and goes
		// within seconds and can double the CPU time of a transaction.
		for _, c := range guardBenchCases {
			for _, on := range order {
				setGuard(b, admin, on == 1)
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
				r.tps[on] = append(r.tps[on], tps(b, out))
				r.cpuPerTx[on] = append(r.cpuPerTx[on], used.Seconds()*1e6/float64(c.clients*c.txs))
			}
		}
		for _, on := range order {
			setGuard(b, admin, on == 1)
			before := cpu.read(b)
			copyMs[on] = append(copyMs[on], copyMillis(b, admin, rows.String()))
			copyCPU[on] = append(copyCPU[on], float64((cpu.read(b) - before).Milliseconds()))
		}
	}
	load1 := loadAvg(b)
	var table strings.Builder
	fmt.Fprintf(&table, "rounds %d, load average %s at the start, %s at the end\n", b.N, load0, load1)
	fmt.Fprintf(&table, "%-12s %14s %14s %7s %7s %10s %10s %7s %7s\n", "case", "cpu µs/tx off", "cpu µs/tx on", "ratio", "pairs", "tps off", "tps on", "ratio", "pairs")
	for _, c := range guardBenchCases {
		r := results[c.name]
		cOff, cOn, tOff, tOn := median(r.cpuPerTx[0]), median(r.cpuPerTx[1]), median(r.tps[0]), median(r.tps[1])
		cPairs, tPairs := median(ratios(r.cpuPerTx)), median(ratios(r.tps))
		fmt.Fprintf(&table, "%-12s %14.1f %14.1f %7.3f %7.3f %10.0f %10.0f %7.3f %7.3f\n", c.name, cOff, cOn, cOn/cOff, cPairs, tOff, tOn, tOn/tOff, tPairs)
		fmt.Fprintf(&table, "%-12s   cpu µs/tx by round, off %v, on %v\n", "", rounded(r.cpuPerTx[0]), rounded(r.cpuPerTx[1]))
		b.ReportMetric(cOff, c.name+"-cpu-us/tx-off")
		b.ReportMetric(cOn, c.name+"-cpu-us/tx-on")
		b.ReportMetric(cPairs, c.name+"-cpu-ratio")
		b.ReportMetric(tPairs, c.name+"-tps-ratio")
	}
	mOff, mOn, pOff, pOn := median(copyMs[0]), median(copyMs[1]), median(copyCPU[0]), median(copyCPU[1])
	fmt.Fprintf(&table, "copy 100,000 rows: %.0f ms off, %.0f ms on (%.3f, pairs %.3f); server cpu %.0f ms off, %.0f ms on (%.3f, pairs %.3f)\n",
		mOff, mOn, mOn/mOff, median(ratios(copyMs)), pOff, pOn, pOn/pOff, median(ratios(copyCPU)))
	fmt.Fprintf(&table, "copy ms by round, off %v, on %v\n", rounded(copyMs[0]), rounded(copyMs[1]))
	b.ReportMetric(median(ratios(copyMs)), "copy-ratio")
	b.ReportMetric(median(ratios(copyCPU)), "copy-cpu-ratio")
	// Printed, not logged: the testing package cuts long benchmark logs.
	fmt.Print(table.String())
}

// ratios is on/off of each round's pair.
func ratios(v [2][]float64) []float64 {
	var r []float64
	for i := range v[0] {
		r = append(r, v[1][i]/v[0][i])
	}
	return r
}

func rounded(v []float64) []string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.FormatFloat(x, 'f', 0, 64))
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

// setGuard protects the pgbench tables and copy_target (resource "bank"),
// or removes the guard.
func setGuard(b *testing.B, admin *pgx.Conn, on bool) {
	var entries []guard.Entry
	if on {
		for _, t := range guardBenchTables {
			entries = append(entries, guard.Entry{Schema: "public", Name: t, Resource: "bank", Where: "bench"})
		}
	}
	if _, err := guard.Protect(b.Context(), pgxhwm.Querier{Conn: admin}, entries, guard.Options{Remove: !on}); err != nil {
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
