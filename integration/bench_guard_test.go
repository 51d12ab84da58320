package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// BenchmarkGuardCost measures the database guard (fenceproxy protect):
// pgbench tpcb-like (one holder, -c 1, 5 s, synchronous_commit off) and a 100,000-row COPY FROM
// STDIN, each with the pgbench tables (and the COPY target) protected and
// not, alternating in each iteration so both see the same machine; it
// reports the medians and the ratios. Run with:
//
//	go test -run '^$' -bench BenchmarkGuardCost -benchtime 5x ./integration/
func BenchmarkGuardCost(b *testing.B) {
	e := newFencedEnv(b, nil)
	pgbench(b, e.pg, "127.0.0.1", e.pg.Port, e.db, "-i", "-q", "-s", "1")
	admin := connect(b, e.direct(), pgx.QueryExecModeExec)
	// Commits without waiting for the disk: the shared machine's fsync
	// times would drown the triggers' CPU cost.
	if _, err := admin.Exec(b.Context(), "CREATE TABLE copy_target (id int, a text, n int); ALTER DATABASE "+e.db+" SET synchronous_commit = off"); err != nil {
		b.Fatal(err)
	}
	script := filepath.Join(b.TempDir(), "tpcb.sql")
	if err := os.WriteFile(script, []byte(tpcbChecked), 0o644); err != nil {
		b.Fatal(err)
	}
	var rows strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&rows, "%d\tsome text %d\t%d\n", i, i, i*3)
	}
	var tpsOff, tpsOn, copyOff, copyOn []float64
	for i := 0; i < b.N; i++ {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false} // neither always goes first
		}
		for _, on := range order {
			setGuard(b, admin, on)
			t := tps(b, pgbench(b, e.pg, "127.0.0.1", e.pg.Port, e.db, "-n", "-f", script, "-c", "1", "-T", "5"))
			c := copyMillis(b, admin, rows.String())
			if on {
				tpsOn, copyOn = append(tpsOn, t), append(copyOn, c)
			} else {
				tpsOff, copyOff = append(tpsOff, t), append(copyOff, c)
			}
		}
	}
	b.ReportMetric(median(tpsOff), "tps-off")
	b.ReportMetric(median(tpsOn), "tps-on")
	b.ReportMetric(median(tpsOn)/median(tpsOff), "tps-ratio")
	b.ReportMetric(median(copyOff), "copy-ms-off")
	b.ReportMetric(median(copyOn), "copy-ms-on")
	b.ReportMetric(median(copyOn)/median(copyOff), "copy-ratio")
}

// setGuard protects the pgbench tables and copy_target (resource "bank"),
// or removes the guard.
func setGuard(b *testing.B, admin *pgx.Conn, on bool) {
	var entries []guard.Entry
	if on {
		for _, t := range []string{"pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history", "copy_target"} {
			entries = append(entries, guard.Entry{Schema: "public", Name: t, Resource: "bank", Where: "bench"})
		}
	}
	if _, err := guard.Protect(b.Context(), pgxhwm.Querier{Conn: admin}, entries, guard.Options{Remove: !on}); err != nil {
		b.Fatal(err)
	}
}

// copyMillis copies rows into an emptied copy_target in one checked
// transaction and returns how long the COPY took.
func copyMillis(b *testing.B, admin *pgx.Conn, rows string) float64 {
	ctx := b.Context()
	tx, err := admin.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
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
