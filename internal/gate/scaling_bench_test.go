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
func BenchmarkAnalyzeScaling(b *testing.B) {
	for name, shape := range scalingShapes {
		for _, n := range []int{1000, 10000, 100000} {
			sql := shape(n)
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				b.SetBytes(int64(len(sql)))
				for b.Loop() {
					if _, err := Analyze(sql); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
