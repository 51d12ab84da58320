package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/fencestore"
)

// BenchmarkCheckGuardCost measures, straight against PostgreSQL, what the
// guard of token_scope: transaction adds to a fencing check: a transaction
// of one check (each pgbench client its own resource, so nothing
// serializes), with the plain CALL the proxy sends where the transaction
// set both settings itself, and with the guarded arguments it sends where a
// setting would be read that the transaction did not set
// (fencestore.AppendGuardedCall). pgbench -M simple -c 8, 5 s runs, the two
// alternating over b.N rounds; reports median TPS and their ratio.
// Run with: go test -run '^$' -bench CheckGuardCost -benchtime 5x ./integration/
func BenchmarkCheckGuardCost(b *testing.B) {
	e := newFencedEnv(b, nil)
	args := fencestore.CheckArgs{Token: "1", Resource: "bench/CLIENT", Advance: true}
	plainSQL := string(fencestore.AppendLiteralCall(nil, args))
	guardedSQL := string(fencestore.AppendGuardedCall(nil, args, true, true))
	dir := b.TempDir()
	script := func(name, call string) string {
		p := filepath.Join(dir, name)
		call = strings.Replace(call, "CLIENT", "' || :client_id || '", 1)
		// pgbench substitutes :client_id anywhere; the quotes around it
		// close and reopen the literal.
		if err := os.WriteFile(p, []byte("BEGIN;\n"+call+";\nCOMMIT;\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		return p
	}
	plain, guarded := script("plain.sql", plainSQL), script("guarded.sql", guardedSQL)
	run := func(file string) float64 {
		out := pgbench(b, e.pg, "127.0.0.1", e.pg.Port, e.db, "-n", "-M", "simple", "-c", "8", "-j", "2", "-T", "5", "-f", file)
		if m := pgbenchFailed.FindStringSubmatch(out); m != nil && m[1] != "0" {
			b.Fatalf("pgbench %s: %s failed transactions\n%s", file, m[1], out)
		}
		return tps(b, out)
	}
	var p, g []float64
	for i := 0; i < b.N; i++ {
		p = append(p, run(plain))
		g = append(g, run(guarded))
	}
	if m := harness.Mark(b, e.direct(), "bench/0"); m != 1 {
		b.Fatalf("mark of bench/0 = %d: the checks did not run", m)
	}
	b.ReportMetric(median(p), "tps-plain")
	b.ReportMetric(median(g), "tps-guarded")
	b.ReportMetric(median(g)/median(p), "ratio-guarded")
}
