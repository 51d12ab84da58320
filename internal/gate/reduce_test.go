package gate

import (
	"reflect"
	"strings"
	"testing"
)

// TestReducedAnalysisEqualsFullAnalysis: a large text parsed without the
// bulk of its constant lists and long literals is classified exactly as the
// whole text is, statement spans and texts included.
func TestReducedAnalysisEqualsFullAnalysis(t *testing.T) {
	long := strings.Repeat("x", safeParseBytes)
	rows := join(3000, ", ", "(%d, 'x', -1.5, NULL, true)")
	for name, sql := range map[string]string{
		"bulk insert":         "INSERT INTO t VALUES " + rows,
		"insert on conflict":  "INSERT INTO t VALUES " + rows + " ON CONFLICT (a) DO UPDATE SET b = 1 RETURNING *",
		"insert from values":  "INSERT INTO t SELECT * FROM (VALUES " + rows + ") v",
		"in list":             "SELECT * FROM t WHERE v IN (" + join(5000, ", ", "%d") + ")",
		"array":               "SELECT * FROM t WHERE v = ANY(ARRAY[" + join(5000, ", ", "'%d'") + "])",
		"params":              "INSERT INTO t VALUES " + join(5000, ", ", "($%d)"),
		"literal":             "INSERT INTO t VALUES ('" + long + "')",
		"dollar literal":      "SELECT $q$" + long + "$q$",
		"literal with fence":  "DO $$ BEGIN PERFORM 1; -- " + long + " fence.hwm\nEND $$",
		"search_path":         "SET search_path = '" + long + "fence'",
		"schema option":       "CREATE EXTENSION e SCHEMA \"fence\" VERSION '" + long + "'",
		"escape literal":      "SELECT E'" + long + "\\''",
		"set_config":          "SELECT set_config('lock.fencing_token', '1', false, " + join(5000, ", ", "%d") + ")",
		"set_config list":     "SELECT set_config(" + join(5000, ", ", "'lock.fencing_token'") + ")",
		"fence in list":       "SELECT f(" + join(5000, ", ", "'%d'") + ", 'fence')",
		"statements":          "INSERT INTO a VALUES " + rows + "; /* fencing_token=7 */ UPDATE b SET c = 1; DELETE FROM d WHERE e IN (" + join(100, ",", "%d") + ")",
		"cte":                 "WITH w AS (INSERT INTO t VALUES " + rows + " RETURNING 1) SELECT * FROM fence.hwm",
		"short lists":         "SELECT f(" + join(3000, "), f(", "%d, 2") + ")",
		"enum":                "CREATE TYPE e AS ENUM (" + join(5000, ", ", "'v%d'") + ")",
		"prepare":             "PREPARE p AS INSERT INTO t VALUES " + rows,
		"explain analyze":     "EXPLAIN (ANALYZE true) INSERT INTO t VALUES " + rows,
		"values then set":     "INSERT INTO t VALUES " + rows + "; SET lock.fencing_token = 5",
		"syntax error":        "INSERT INTO t VALUES " + rows + " RETURNIN *",
		"error inside a list": "SELECT * FROM t WHERE v IN (" + join(5000, ", ", "%d") + ", +)",
	} {
		t.Run(name, func(t *testing.T) {
			if len(sql) <= safeParseBytes {
				t.Fatalf("%d bytes: not a large text", len(sql))
			}
			got, gotErr := Analyze(sql)
			reduceLarge = false
			want, wantErr := Analyze(sql)
			reduceLarge = true
			if (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("error %v, want %v", gotErr, wantErr)
			}
			if gotErr != nil {
				if g, w := gotErr.(*ParseError), wantErr.(*ParseError); g.Message != w.Message || g.Syntax != w.Syntax || g.Code != w.Code {
					t.Errorf("error %+v, want %+v", g, w)
				}
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("reduced analysis differs:\n got %+v\nwant %+v", summary(got), summary(want))
			}
		})
	}
}

// summary shortens statement texts for a failure message.
func summary(a *Analysis) []Statement {
	out := append([]Statement(nil), a.Statements...)
	for i := range out {
		if len(out[i].Text) > 80 {
			out[i].Text = out[i].Text[:80] + "…"
		}
		if len(out[i].Writes) > 4 {
			out[i].Writes = out[i].Writes[:4]
		}
	}
	return out
}

// TestReductionsShortenBulkTexts: what the reductions are for. A bulk
// INSERT, an IN list and a long literal shrink to a few hundred bytes.
func TestReductionsShortenBulkTexts(t *testing.T) {
	for _, sql := range []string{
		scalingShapes["insert_rows"](100000),
		scalingShapes["in_list"](100000),
		"SELECT '" + strings.Repeat("x", 1<<20) + "'",
	} {
		toks, err := checkBounds(sql)
		if err != nil {
			t.Fatal(err)
		}
		if edits, _ := reductions(sql, toks); len(reduceText(sql, edits)) > 200 {
			r := reduceText(sql, edits)
			t.Errorf("%.40q… (%d bytes) reduced to %d bytes: %.200q", sql, len(sql), len(r), r)
		}
	}
}
