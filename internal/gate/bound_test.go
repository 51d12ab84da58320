package gate

import (
	"strings"
	"testing"
)

// TestBoundsPerStatement: the depth bound that guards the parser (a deep
// left-recursive chain crashes pg_query's C code) counts each statement of
// a text on its own, since each has a tree of its own: a script of
// thousands of statements is analysed, while one deep chain, alone or
// among others, or split over the statements of a BEGIN ATOMIC body (one
// tree), is still refused (54001).
func TestBoundsPerStatement(t *testing.T) {
	chain := "SELECT 1" + strings.Repeat("+1", 9000)
	many := join(3000, "; ", "UPDATE t%d SET v = v + 1 WHERE id = 1")
	atomic := "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC " +
		strings.Repeat("SELECT 1"+strings.Repeat("+1", 500)+"; ", 5) + "END"
	for name, tt := range map[string]struct {
		sql    string
		refuse bool
	}{
		"many statements":           {many, false},
		"one deep chain":            {chain, true},
		"deep chain among many":     {many + "; " + chain, true},
		"chain over an atomic body": {atomic + strings.Repeat(" ", safeParseBytes), true},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := prepare(tt.sql)
			if got := err != nil; got != tt.refuse {
				t.Fatalf("len %d: prepare = %v, want refused %v", len(tt.sql), err, tt.refuse)
			}
			if err != nil && err.(*ParseError).Code != codeTooComplex {
				t.Fatalf("refused with %v, want 54001", err)
			}
		})
	}
}

// TestParseTokenBound: a message whose parse would take seconds, because
// it holds hundreds of thousands of names or statements, is refused (54001,
// naming the limit) before the parser sees it; a message as long made of
// rows, list items or one literal is analysed, and one just under the bound
// too.
func TestParseTokenBound(t *testing.T) {
	for name, tt := range map[string]struct {
		sql    string
		refuse bool
	}{
		"4 MiB of names":       {hugeShapes["truncate_names"](), true},
		"4 MiB of statements":  {hugeShapes["statements"](), true},
		"4 MiB of rows":        {hugeShapes["insert_rows"](), false},
		"4 MiB IN list":        {hugeShapes["in_list"](), false},
		"4 MiB literal":        {hugeShapes["literal"](), false},
		"names under the cap":  {"TRUNCATE " + join(maxParseTokens/2-1, ", ", "t%d"), false},
		"names over the cap":   {"TRUNCATE " + join(maxParseTokens/2+1, ", ", "t%d"), true},
		"rows of expressions":  {"INSERT INTO t VALUES " + join(maxParseTokens/4, ", ", "(%d, f(x))"), true},
		"rows of a few values": {"INSERT INTO t VALUES " + join(maxParseTokens, ", ", "(%d, 'x', NULL)"), false},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := Analyze(tt.sql)
			if !tt.refuse {
				if err != nil || len(a.Statements) == 0 {
					t.Fatalf("%d bytes: %v, want analysed", len(tt.sql), err)
				}
				return
			}
			pe, ok := err.(*ParseError)
			if !ok || pe.Code != codeTooComplex || !strings.Contains(pe.Message, "at most 100000") {
				t.Fatalf("%d bytes: %v, want 54001 naming the limit", len(tt.sql), err)
			}
		})
	}
}
