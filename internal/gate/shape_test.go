package gate

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestLiteralShape(t *testing.T) {
	tests := []struct {
		sql, want string // want "" means not shaped
	}{
		{"UPDATE pgbench_accounts SET abalance = abalance + -4231 WHERE aid = 774411;", "UPDATE pgbench_accounts SET abalance = abalance + -1 WHERE aid = 1;"},
		{"select abalance from pgbench_accounts where aid = 007", "select abalance from pgbench_accounts where aid = 1"},
		{"SELECT 0, 000, 10 LIMIT 0", "SELECT 0, 0, 1 LIMIT 0"},
		{"INSERT INTO h (tid, bid) VALUES (3, 4)", "INSERT INTO h (tid, bid) VALUES (1, 1)"},
		{"  delete from t1 where x2 = 5 -- 42\n", "  delete from t1 where x2 = 1 -- 42\n"},
		{"SELECT '12', \"c7\", 12 /* 9 /* 9 */ 9 */", "SELECT '12', \"c7\", 1 /* 9 /* 9 */ 9 */"},
		{"SELECT 'it''s 5', 5", "SELECT 'it''s 5', 1"},
		{"SELECT t.5 FROM t WHERE a = 2", "SELECT t.5 FROM t WHERE a = 1"},
		{"SELECT 1 FROM t", "SELECT 1 FROM t"},
		// Not shaped:
		{"SELECT abalance FROM a", ""},            // no literal
		{"SELECT 1.5", ""},                        // not an integer
		{"SELECT 1e5", ""},                        //
		{"SELECT 0x1F", ""},                       //
		{"SELECT 1_000", ""},                      //
		{"SELECT 12abc", ""},                      // trailing junk
		{"SELECT 1234567890", ""},                 // may lex as a Float
		{"SELECT $1 + 1", ""},                     // parameters, dollar quotes
		{"SELECT E'\\'' || 1", ""},                // backslash
		{"SELECT 'é', 1", ""},                     // non-ASCII
		{"SELECT 'unterminated, 1", ""},           //
		{"SELECT 1 /* unterminated", ""},          //
		{"EXPLAIN (ANALYZE 0) DELETE FROM t", ""}, // not plain DML
		{"WITH d AS (DELETE FROM t) SELECT 1", ""},
		{"SET x = 1", ""},
		{"SELECT set_config('lock.fencing_token', '1', false), 1", ""}, // matters
		{"SELECT 1; COMMIT", ""}, //
		{"/* fencing_token=5 */ UPDATE t SET a = 1", ""},
		{"SELECTx 1", ""},
	}
	for _, tt := range tests {
		got, ok := literalShape(tt.sql, mayMatter(tt.sql))
		if !ok {
			got = ""
		}
		if got != tt.want {
			t.Errorf("literalShape(%q) = %q, %v; want %q", tt.sql, got, ok, tt.want)
		}
	}
}

// shapeTemplates are texts with %d for integer literals.
var shapeTemplates = []string{
	"UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d;",
	"SELECT abalance FROM pgbench_accounts WHERE aid = %d",
	"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (%d, %d, %d, %d, CURRENT_TIMESTAMP);  -- tail",
	"  select a, b::varchar(%d) from t where c in (%d, %d) order by %d limit %d /* c 7 */ ",
	"DELETE FROM t WHERE id = %d RETURNING *",
	"SELECT * FROM t ORDER BY a LIMIT %d OFFSET %d",
	"UPDATE t SET a = 'x7y' || %d",
}

// TestLiteralShapeStandsForParse: for texts of one shape, the analysis
// cached for one, adapted by forText, is what Analyze returns for the
// other, field by field.
func TestLiteralShapeStandsForParse(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	num := func() any {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return r.IntN(10)
		default:
			return r.IntN(1_000_000_000)
		}
	}
	for _, tmpl := range shapeTemplates {
		n := strings.Count(tmpl, "%d")
		for range 50 {
			args1, args2 := make([]any, n), make([]any, n)
			for i := range args1 {
				args1[i], args2[i] = num(), num()
				if (args1[i] == 0) != (args2[i] == 0) {
					args2[i] = args1[i] // same zero class, or the shapes differ
				}
			}
			sql1, sql2 := fmt.Sprintf(tmpl, args1...), fmt.Sprintf(tmpl, args2...)
			s1, ok1 := literalShape(sql1, mayMatter(sql1))
			s2, ok2 := literalShape(sql2, mayMatter(sql2))
			if !ok1 || !ok2 || s1 != s2 {
				t.Fatalf("%q and %q: shapes %q (%v) and %q (%v)", sql1, sql2, s1, ok1, s2, ok2)
			}
			a1, err1 := Analyze(sql1)
			a2, err2 := Analyze(sql2)
			if err1 != nil || err2 != nil {
				t.Fatalf("Analyze: %v, %v", err1, err2)
			}
			if got := a1.forText(sql2, len(sql1)); !reflect.DeepEqual(got, a2) {
				t.Fatalf("for %q from %q:\n got %+v\nwant %+v", sql2, sql1, got.Statements[0], a2.Statements[0])
			}
		}
	}
}

// TestAnalyzerShapeCache: a text of a cached shape is not parsed again,
// and its analysis is its own.
func TestAnalyzerShapeCache(t *testing.T) {
	c := NewAnalyzer(16)
	sql1 := "UPDATE pgbench_accounts SET abalance = abalance + 5 WHERE aid = 12;"
	sql2 := "UPDATE pgbench_accounts SET abalance = abalance + 12345 WHERE aid = 987654;"
	if _, err := c.Analyze(sql1); err != nil {
		t.Fatal(err)
	}
	got, err := c.Analyze(sql2)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Analyze(sql2)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shape hit: got %+v, want %+v", got.Statements[0], want.Statements[0])
	}
	if c.Len() != 1 {
		t.Errorf("%d texts cached; the second should have been a shape hit, not parsed", c.Len())
	}
	// A zero where the cached text had a non-zero literal is another shape.
	if _, err := c.Analyze("UPDATE pgbench_accounts SET abalance = abalance + 0 WHERE aid = 12;"); err != nil || c.Len() != 2 {
		t.Errorf("zero literal: err %v, %d texts cached, want 2", err, c.Len())
	}
}

func BenchmarkAnalyzerShapeHit(b *testing.B) {
	c := NewAnalyzer(16)
	c.Analyze("UPDATE pgbench_accounts SET abalance = abalance + 5 WHERE aid = 12;")
	for i := 0; b.Loop(); i++ {
		c.Analyze(fmt.Sprintf("UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d;", i%5000+1, i+1))
	}
}

func BenchmarkAnalyzeCold(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		Analyze(fmt.Sprintf("UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d;", i%5000+1, i+1))
	}
}
