package integration

import (
	"sort"
	"strconv"
	"testing"
)

// BenchmarkPgbenchSelectOnly runs pgbench's built-in select-only script with
// 16 clients straight against PostgreSQL and through the proxy, alternating
// in each iteration so both see the same machine, and reports the median TPS
// of each and their ratio. Run with: make bench-pgbench
func BenchmarkPgbenchSelectOnly(b *testing.B) {
	e := newEnv(b)
	pgbench(b, e.pg, "127.0.0.1", e.pg.Port, e.db, "-i", "-q", "-s", "10")
	var direct, proxied []float64
	for i := 0; i < b.N; i++ {
		direct = append(direct, tps(b, pgbench(b, e.pg, "127.0.0.1", e.pg.Port, e.db, "-S", "-M", "prepared", "-c", "16", "-j", "2", "-T", "5")))
		proxied = append(proxied, tps(b, pgbench(b, e.pg, e.proxy.Host, e.proxy.Port, e.db, "-S", "-M", "prepared", "-c", "16", "-j", "2", "-T", "5")))
	}
	d, p := median(direct), median(proxied)
	b.ReportMetric(d, "tps-direct")
	b.ReportMetric(p, "tps-proxy")
	b.ReportMetric(p/d, "ratio")
}

func tps(b *testing.B, out string) float64 {
	m := pgbenchTPS.FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("no tps in pgbench output:\n%s", out)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
