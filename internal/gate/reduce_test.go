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
		"continued literal":   "SELECT 'a'\n'" + long + "', '" + long + "'\n'b', f(" + join(20, ", ", "%d") + ")",
		"lists in statements": join(500, "; ", "SELECT f("+join(20, ", ", "%d")+"), '"+strings.Repeat("q", 300)+"' /* %d */"),
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
			checkReduced(t, sql)
		})
	}
}

// checkReduced compares the analysis of sql with and without the
// reductions, found by prescan or from the scanner's tokens.
func checkReduced(t *testing.T, sql string) {
	t.Helper()
	reduceLarge = false
	want, wantErr := Analyze(sql)
	reduceLarge = true
	for _, prescanned := range []bool{true, false} {
		prescanLarge = prescanned
		got, gotErr := Analyze(sql)
		prescanLarge = true
		if wantErr != nil {
			if pe, ok := wantErr.(*ParseError); ok && pe.Code != "" && gotErr != nil {
				continue // a bound the unreduced text met, or one of its own
			}
		}
		if gotErr != nil {
			if pe, ok := gotErr.(*ParseError); ok && pe.Code == codeTooComplex && strings.Contains(pe.Message, "tokens besides") {
				continue // the token bound, which the unreduced analysis does not apply
			}
		}
		if w, ok := wantErr.(*ParseError); ok && w.Syntax && strings.Contains(w.Message, "OVERLAPS") && gotErr == nil {
			continue // a row too long for the grammar, shortened (see reductions)
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("prescan %v: error %.300v, want %.300v", prescanned, gotErr, wantErr)
		}
		if gotErr != nil {
			g, gok := gotErr.(*ParseError)
			w, wok := wantErr.(*ParseError)
			sameMessage := gok && wok && g.Syntax == w.Syntax && (g.Message == w.Message || strings.Contains(g.Message, "'a literal of "))
			if gok != wok || gok && (!sameMessage || g.Code != w.Code) || !gok && gotErr.Error() != wantErr.Error() {
				t.Errorf("prescan %v: error %.300v, want %.300v", prescanned, gotErr, wantErr)
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("prescan %v: reduced analysis differs:\n got %+v\nwant %+v", prescanned, summary(got), summary(want))
		}
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
		for _, prescanned := range []bool{true, false} {
			prescanLarge = prescanned
			text, _, err := prepare(sql)
			prescanLarge = true
			if err != nil {
				t.Fatal(err)
			}
			if len(text) > 200 {
				t.Errorf("%.40q… (%d bytes; prescan %v) reduced to %d bytes: %.200q", sql, len(sql), prescanned, len(text), text)
			}
		}
	}
}

// TestPrescanAgreesWithTheScanner: on texts where both apply, prescan finds
// exactly the edits that the scanner's tokens give, and verifyPrescan
// accepts them.
func TestPrescanAgreesWithTheScanner(t *testing.T) {
	long := strings.Repeat("y", safeParseBytes)
	for _, sql := range []string{
		scalingShapes["insert_rows"](3000),
		scalingShapes["in_list"](3000),
		"SELECT '" + long + "', $t$" + long + "$t$, (" + join(40, ", ", "-%d.5") + ")",
		"/* a ( comment (1,2,3) */ SELECT \"q\"\"(\", E'\\'(', 'it''s' FROM t WHERE a IN (" + join(4000, ",", "'%d'") + ") -- (\n",
		"INSERT INTO t VALUES " + join(3000, ",", "($%d, NULL, TRUE)") + " RETURNING *; SELECT ARRAY[" + join(3000, ",", "%d") + "]",
	} {
		p, ok := prescan(sql)
		if !ok {
			t.Fatalf("%.60q: prescan gave up", sql)
		}
		toks, err := scanTokens(sql)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := reductions(sql, toks)
		if !reflect.DeepEqual(p.edits, want) {
			t.Errorf("%.60q: prescan edits %v, scanner's %v", sql, p.edits, want)
		}
		reduced, err := scanTokens(reduceText(sql, p.edits))
		if err != nil || !verifyPrescan(p, reduced) {
			t.Errorf("%.60q: edits not verified (%v)", sql, err)
		}
	}
}

// TestPrescanDoubtFallsBack: where prescan reads a text differently from
// PostgreSQL's scanner, verifyPrescan refuses its edits.
func TestPrescanDoubtFallsBack(t *testing.T) {
	sql := "SELECT (" + join(40, ", ", "%d") + ")"
	p, ok := prescan(sql)
	if !ok || len(p.edits) != 1 {
		t.Fatalf("prescan %v %v", p, ok)
	}
	// As if prescan had missed a quote opening before the run.
	inString := "SELECT '" + sql[len("SELECT "):] + "'"
	p.runs[0]++
	p.edits[0].start++
	p.edits[0].end++
	toks, err := scanTokens(reduceText(inString, p.edits))
	if err != nil {
		t.Fatal(err)
	}
	if verifyPrescan(p, toks) {
		t.Error("edits inside a string literal were verified")
	}
}

// FuzzPrescan: whatever precedes them, a long literal and a long list of
// constants are reduced only where that leaves the analysis unchanged.
func FuzzPrescan(f *testing.F) {
	for _, s := range []string{
		"SELECT 1", "SELECT '", "SELECT $a$ x", "/* /* */", "E'\\'", "SELECT \"(\"", "U&'\\0061'", "$1", "x$y$ '", "'a'\n'b", "VALUES", "-- x",
		"SET search_path = fence,", "SELECT set_config('lock.fencing_token', ", "DO $$ fence",
		"SELECT 1e-5+-2::int<>x", "U&\"a\" U&'b' UESCAPE '!'", "0x1F 1_000 .5 1..2 $1abc", "a+--b\n-/**/-",
	} {
		f.Add(s)
	}
	tail := "\n; SELECT '" + strings.Repeat("z", safeParseBytes) + "', f(" + join(20, ", ", "%d") + "), ARRAY[" + join(20, ",", "'%d'") + "]"
	f.Fuzz(func(t *testing.T, s string) {
		checkReduced(t, s+tail)
		// prescan's count is a lower bound on the scanner's tokens.
		if strings.IndexByte(s, 0) >= 0 {
			return
		}
		if p, ok := prescan(s); ok {
			toks, err := scanTokens(reduceText(s, p.edits))
			if err == nil && verifyPrescan(p, toks) && p.atLeast > countTokens(toks) {
				t.Fatalf("%q: prescan counts %d tokens, the scanner %d", s, p.atLeast, countTokens(toks))
			}
		}
	})
}

// TestShortenedListsTheGrammarRefuses: the one known case where a reduced
// text parses and the whole one does not, and why it is harmless: the
// server refuses the whole Query string before running any of it.
func TestShortenedListsTheGrammarRefuses(t *testing.T) {
	sql := "SELECT (" + join(40, ", ", "%d") + ") OVERLAPS (1, 2); UPDATE t SET v = 1 -- " + strings.Repeat("p", safeParseBytes)
	reduceLarge = false
	_, err := Analyze(sql)
	reduceLarge = true
	if pe, ok := err.(*ParseError); !ok || !pe.Syntax {
		t.Fatalf("unreduced: %v, want a syntax error", err)
	}
	a, err := Analyze(sql)
	if err != nil || len(a.Statements) != 2 || a.Statements[1].Kind != Write {
		t.Fatalf("reduced: %v %v", a, err)
	}
}

// TestPrescanLeavesContinuedLiterals: a literal continued by another
// ('a'\n'b' is one string to PostgreSQL) is not shortened, so that the
// other edits of the text still verify and the whole text is not scanned.
func TestPrescanLeavesContinuedLiterals(t *testing.T) {
	long := strings.Repeat("x", 2*maxLiteralBytes)
	sql := "SELECT 'a'\n'" + long + "', '" + long + "'\n'b', f(" + join(20, ", ", "%d") + ")"
	p, ok := prescan(sql)
	if !ok || len(p.edits) != 1 || p.runs[0] < 0 {
		t.Fatalf("prescan %+v, %v: want only the run of constants", p.edits, ok)
	}
	toks, err := scanTokens(reduceText(sql, p.edits))
	if err != nil || !verifyPrescan(p, toks) {
		t.Errorf("edits not verified (%v)", err)
	}
}
