package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
)

// tpcbScript is pgbench's built-in tpcb-like transaction, fenced the way an
// application holding a lock would be: each client, on its first
// transaction, sets lock.fencing_token and lock.resource for its session
// (pgbench variables persist per client, so the \if runs once per client).
// RES is replaced by the resource expression: 'bench/' || :client_id gives
// each client its own resource, as 8 independent lock holders would have.
const tpcbScript = `\if :fenced = 0
SELECT set_config('lock.resource', RES, false), set_config('lock.fencing_token', '1', false);
\set fenced 1
\endif
\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
`

// BenchmarkPgbenchFencedTPCB compares, in one run and through the proxy,
// pgbench's tpcb-like with -c 8 (scale 10): unfenced, fenced with one
// resource per client, and fenced with one resource shared by all clients
// (which serializes them on its mark, as it should), in -M prepared and
// -M simple. Reports median TPS and the ratios to unfenced.
// Run with: make bench-pgbench
func BenchmarkPgbenchFencedTPCB(b *testing.B) {
	e := newFencedEnv(b, nil)
	pgbench(b, e.pg, "127.0.0.1", e.pg.Port, e.db, "-i", "-q", "-s", "10")
	dir := b.TempDir()
	own := filepath.Join(dir, "own.sql")
	shared := filepath.Join(dir, "shared.sql")
	os.WriteFile(own, []byte(strings.Replace(tpcbScript, "RES", "'bench/' || :client_id", 1)), 0o644)
	os.WriteFile(shared, []byte(strings.Replace(tpcbScript, "RES", "'bench/shared'", 1)), 0o644)
	run := func(mode string, args ...string) float64 {
		args = append([]string{"-M", mode, "-c", "8", "-j", "2", "-T", "5", "-D", "scale=10", "-D", "fenced=0"}, args...)
		out := pgbench(b, e.pg, e.proxy.Host, e.proxy.Port, e.db, args...)
		if m := pgbenchFailed.FindStringSubmatch(out); m != nil && m[1] != "0" {
			b.Fatalf("pgbench %v: %s failed transactions\n%s", args, m[1], out)
		}
		return tps(b, out)
	}
	var plain, fenced, serial, plainS, fencedS []float64
	for i := 0; i < b.N; i++ {
		plain = append(plain, run("prepared", "-b", "tpcb-like"))
		fenced = append(fenced, run("prepared", "-f", own))
		serial = append(serial, run("prepared", "-f", shared))
		plainS = append(plainS, run("simple", "-b", "tpcb-like"))
		fencedS = append(fencedS, run("simple", "-f", own))
	}
	if m := harness.Mark(b, e.direct(), "bench/0"); m != 1 {
		b.Fatalf("mark of bench/0 = %d: the fenced runs were not fenced", m)
	}
	p, f, s := median(plain), median(fenced), median(serial)
	b.ReportMetric(p, "tps-unfenced")
	b.ReportMetric(f, "tps-fenced")
	b.ReportMetric(f/p, "ratio-fenced")
	b.ReportMetric(s, "tps-shared")
	b.ReportMetric(s/p, "ratio-shared")
	b.ReportMetric(median(fencedS)/median(plainS), "ratio-fenced-simple")
}
