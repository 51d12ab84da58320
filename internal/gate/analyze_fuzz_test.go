package gate

import (
	"strings"
	"testing"
)

func FuzzAnalyze(f *testing.F) {
	for _, s := range []string{
		"SELECT 1",
		"BEGIN; /* fencing_token=42 resource=orders/42 */ UPDATE t SET a = 1; COMMIT",
		"WITH x AS (DELETE FROM fence.hwm RETURNING *) SELECT * FROM x",
		"SELECT set_config('lock.fencing_token', '42', false)",
		"COPY t FROM STDIN; SET LOCAL lock.resource = 'r'; DISCARD ALL; RESET ALL",
		"PREPARE p AS INSERT INTO t VALUES ($1) /*fencing_token='1'*/",
		"EXPLAIN ANALYZE WITH d AS (DELETE FROM a RETURNING *) SELECT * INTO b FROM d",
		"VACUUM; CREATE INDEX CONCURRENTLY ON t (a); DO $$ BEGIN END $$",
		"SELECT '/* fencing_token=1 */', $q$ -- resource=x $q$; SELECT 2; -- fencing_token=3",
		"GRANT ALL ON ALL TABLES IN SCHEMA fence TO app; DROP SCHEMA fence CASCADE",
	} {
		f.Add(s)
	}
	cache := NewAnalyzer(64)
	f.Fuzz(func(t *testing.T, sql string) {
		a, err := Analyze(sql)
		ca, cerr := cache.Analyze(sql)
		if (err == nil) != (cerr == nil) || (err != nil && err.Error() != cerr.Error()) {
			t.Fatalf("Analyzer and Analyze disagree on %q: %v vs %v", sql, cerr, err)
		}
		if err != nil {
			return
		}
		if len(ca.Statements) != len(a.Statements) {
			t.Fatalf("Analyzer and Analyze disagree on %q", sql)
		}
		prevEnd := 0
		for i, st := range a.Statements {
			if st.Start < prevEnd || st.Start > st.End || st.End > len(sql) {
				t.Fatalf("%q: statement %d span [%d,%d) out of order", sql, i, st.Start, st.End)
			}
			prevEnd = st.End
			if !strings.Contains(sql[st.Start:st.End], st.Text) {
				t.Fatalf("%q: statement %d text %q not in its span", sql, i, st.Text)
			}
			if st.Kind > NoTxnBlock {
				t.Fatalf("%q: statement %d kind %v", sql, i, st.Kind)
			}
			if st.Directives.Token < 0 {
				t.Fatalf("%q: negative token", sql)
			}
		}
	})
}
