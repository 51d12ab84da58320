package gate

import (
	"fmt"
	"strings"
	"testing"
)

// scalingShapes build one message of n repeated parts, for each statement
// shape whose analysis cost could grow faster than the message: names in a
// TRUNCATE, rows of an INSERT, items of an IN list, statements in one Query,
// tables of a join, SET clauses of an UPDATE, CTEs.
var scalingShapes = map[string]func(n int) string{
	"truncate_names": func(n int) string { return "TRUNCATE " + join(n, ", ", "t%d") },
	"insert_rows":    func(n int) string { return "INSERT INTO t VALUES " + join(n, ", ", "(%d, 'x')") },
	"in_list":        func(n int) string { return "SELECT * FROM t WHERE v IN (" + join(n, ", ", "%d") + ")" },
	"statements":     func(n int) string { return join(n, "; ", "UPDATE t%d SET v = 1") },
	"join_tables":    func(n int) string { return "SELECT 1 FROM " + join(n, ", ", "t%d") },
	"set_clauses":    func(n int) string { return "UPDATE t SET " + join(n, ", ", "c%d = 1") },
	"ctes":           func(n int) string { return "WITH " + join(n, ", ", "w%d AS (DELETE FROM t RETURNING 1)") + " SELECT 1" },
	"drop_tables":    func(n int) string { return "DROP TABLE " + join(n, ", ", "t%d") },
}

func join(n int, sep, format string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(format, i)
	}
	return strings.Join(parts, sep)
}

// BenchmarkAnalyzeScaling: the analysis of one message costs time linear in
// its size for every shape: compare ns/op across n (10× the parts should
// cost about 10× the time). A client may send up to 4 MiB in one message.
// A text refused (a bound, 54001, or unreadable) is measured too, as
// "refused": that is what it costs the proxy.
func BenchmarkAnalyzeScaling(b *testing.B) {
	for name, shape := range scalingShapes {
		for _, n := range []int{1000, 10000, 100000} {
			benchAnalyze(b, fmt.Sprintf("%s/n=%d", name, n), shape(n))
		}
	}
}

// benchAnalyze runs Analyze(sql) as a sub-benchmark; refused reports 1 when
// Analyze refused the text (*ParseError).
func benchAnalyze(b *testing.B, name, sql string) {
	b.Run(name, func(b *testing.B) {
		b.SetBytes(int64(len(sql)))
		refused := 0.0
		for b.Loop() {
			if _, err := Analyze(sql); err != nil {
				if _, ok := err.(*ParseError); !ok {
					b.Fatal(err)
				}
				refused = 1
			}
		}
		b.ReportMetric(refused, "refused")
	})
}

// hugeShapes are messages of about 4 MiB, the longest text the proxy
// analyses (MaxAnalyzeBytes): names, rows, items, statements, one literal.
var hugeShapes = map[string]func() string{
	"truncate_names": func() string { return "TRUNCATE " + join(450000, ", ", "t%d") },
	"insert_rows":    func() string { return "INSERT INTO t VALUES " + join(270000, ", ", "(%d, 'x')") },
	"in_list":        func() string { return "SELECT * FROM t WHERE v IN (" + join(500000, ", ", "%d") + ")" },
	"statements":     func() string { return join(160000, "; ", "UPDATE t%d SET v = 1") },
	"literal":        func() string { return "SELECT '" + strings.Repeat("x", MaxAnalyzeBytes-20) + "'" },
	"unterminated":   func() string { return "INSERT INTO t VALUES " + join(270000, ", ", "(%d, 'x')") + " '" },
	"operators":      func() string { return "SELECT 1" + strings.Repeat("+1", MaxAnalyzeBytes/2-10) },
}

// boundShapes are the costliest messages the proxy parses: just under the
// token bound, with nothing to shorten.
var boundShapes = map[string]func() string{
	"truncate_names": func() string { return "TRUNCATE " + join(maxParseTokens/2-1, ", ", "t%d") },
	"statements":     func() string { return join(maxParseTokens/7-1, "; ", "UPDATE t%d SET v = 1") },
}

// BenchmarkAnalyzeAtTokenBound measures the messages of boundShapes.
func BenchmarkAnalyzeAtTokenBound(b *testing.B) {
	for name, shape := range boundShapes {
		benchAnalyze(b, name, shape())
	}
}

// BenchmarkAnalyze4MiB measures one message of about 4 MiB per shape.
func BenchmarkAnalyze4MiB(b *testing.B) {
	for name, shape := range hugeShapes {
		sql := shape()
		if len(sql) > MaxAnalyzeBytes {
			b.Fatalf("%s: %d bytes", name, len(sql))
		}
		benchAnalyze(b, name, sql)
	}
}
