package gate

import (
	"strconv"
	"testing"
)

// pgbench tpcb-like statements, as the extended protocol sends them.
var benchQueries = []struct{ name, sql string }{
	{"update", "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"},
	{"select", "SELECT abalance FROM pgbench_accounts WHERE aid = $1"},
	{"update_sqlcommenter", "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2 /*fencing_token='42',resource='bench%2F1'*/"},
}

func BenchmarkAnalyzeCached(b *testing.B) {
	for _, q := range benchQueries {
		b.Run(q.name, func(b *testing.B) {
			c := NewAnalyzer(1024)
			if _, err := c.Analyze(q.sql); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Analyze(q.sql); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAnalyzeCachedParallel(b *testing.B) {
	c := NewAnalyzer(1024)
	sql := benchQueries[0].sql
	if _, err := c.Analyze(sql); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Analyze(sql)
		}
	})
}

func BenchmarkAnalyzeUncached(b *testing.B) {
	for _, q := range benchQueries {
		b.Run(q.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Analyze(q.sql); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAnalyzeMiss measures the cache on a stream of distinct texts (a
// new token in a comment per statement): every call misses, parses and
// evicts.
func BenchmarkAnalyzeMiss(b *testing.B) {
	c := NewAnalyzer(1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		sql := "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2 /* fencing_token=" + strconv.Itoa(i) + " */"
		if _, err := c.Analyze(sql); err != nil {
			b.Fatal(err)
		}
	}
}
