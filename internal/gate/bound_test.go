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
			err := checkBounds(tt.sql)
			if got := err != nil; got != tt.refuse {
				t.Fatalf("len %d: checkBounds = %v, want refused %v", len(tt.sql), err, tt.refuse)
			}
			if err != nil && err.(*ParseError).Code != codeTooComplex {
				t.Fatalf("refused with %v, want 54001", err)
			}
		})
	}
}
