package gate

import (
	"github.com/fenceproxy/fenceproxy/internal/sqlstate"
	"strconv"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Limits on the text the proxy analyses (docs/design.md "Fail closed", rule 7).
//
// pg_query's C code turns the parse tree into a protobuf message by
// recursion, with no stack-depth check: "SELECT 1+1+…+1" with 25,000 terms
// (50 kB) overflows the thread's stack and kills the process, where
// PostgreSQL answers 54001. Measured with pg_query_go v6.2.5 on amd64: 20,000
// nested operators parse (Go's protobuf decoder then refuses the tree beyond
// 10,000 levels, gracefully), 40,000 crash. Every level of a left-recursive
// chain takes at least two bytes ("+1", "::t"); right-recursive chains and
// parentheses fill bison's stack first, which fails cleanly at 10,000. So a
// text of up to safeParseBytes cannot crash the parser, and a longer one is
// parsed only when a scan of its tokens bounds its depth.
const (
	safeParseBytes = 16 << 10
	maxDepth       = 2000
	// MaxAnalyzeBytes is the longest text the proxy analyses; a longer one
	// is refused (54000) where fencing is possible.
	MaxAnalyzeBytes = 4 << 20
	// maxParseTokens bounds the tokens of one text that the parser sees
	// after reductions (constant lists and long literals shortened): the
	// parse tree's round trip costs 2–5 µs per token, so a message of
	// names (TRUNCATE t0, …, tN; thousands of statements) costs at most a
	// few hundred milliseconds. A text with more is refused (54001) where
	// fencing is possible.
	maxParseTokens = 100_000
)

// SQLSTATEs of texts the proxy cannot analyse safely.
const (
	codeTooComplex = sqlstate.StatementTooComplex
	codeTooLong    = sqlstate.ProgramLimitExceeded
)

// checkBounds returns an error for a text the parser must not see, and
// for a text longer than safeParseBytes the scanner's tokens (nil for a
// shorter one).
func checkBounds(sql string) ([]token, error) {
	if len(sql) <= safeParseBytes {
		return nil, nil
	}
	if len(sql) > MaxAnalyzeBytes {
		return nil, &ParseError{Code: codeTooLong, Message: "statement of " + strconv.Itoa(len(sql)) + " bytes is longer than the proxy analyses (" + strconv.Itoa(MaxAnalyzeBytes) + ")"}
	}
	toks, err := scanTokens(sql)
	if err != nil {
		return nil, newParseError(err)
	}
	if d := depthBound(toks); d > maxDepth {
		return nil, &ParseError{Code: codeTooComplex, Message: "statement is too deeply nested for the proxy to analyse safely (" + strconv.Itoa(d) + " levels; at most " + strconv.Itoa(maxDepth) + ")"}
	}
	return toks, nil
}

// depthBound returns an upper bound on the depth of the parse trees of the
// scanned tokens: for each statement (the parser returns one tree per
// statement, so a ';' outside brackets starts a new count), the deepest
// nesting of brackets plus every token that can add a level without one
// (operators, casts, and keywords: AND, NOT, IS, COLLATE, UNION, CASE,
// SELECT …). Literals, identifiers, commas and the value keywords NULL,
// TRUE, FALSE and DEFAULT add none, nor does a sign directly before a
// number in a list (a bulk VALUES list stays flat). The ';' inside a
// BEGIN ATOMIC body separates statements of one tree: from the first
// ATOMIC on, each count starts from what came before it.
func depthBound(toks []token) int {
	bound, depth, maxNest, levels, base := 0, 0, 0, 0, 0
	atomic := false
	for i, t := range toks {
		if t.kind == pg_query.Token_ATOMIC {
			atomic = true
		}
		switch t.kind {
		case '(', '[':
			depth++
			maxNest = max(maxNest, depth)
		case ')', ']':
			depth = max(depth-1, 0)
		case ';':
			if depth == 0 {
				bound = max(bound, base+maxNest+levels)
				if atomic {
					base += maxNest + levels + 1
				}
				maxNest, levels = 0, 0
			}
		case ',', '.', pg_query.Token_IDENT, pg_query.Token_SCONST, pg_query.Token_USCONST,
			pg_query.Token_BCONST, pg_query.Token_XCONST, pg_query.Token_PARAM,
			pg_query.Token_NULL_P, pg_query.Token_TRUE_P, pg_query.Token_FALSE_P, pg_query.Token_DEFAULT,
			pg_query.Token_C_COMMENT, pg_query.Token_SQL_COMMENT:
		case pg_query.Token_ICONST, pg_query.Token_FCONST:
		case '-', '+':
			if signedNumber(toks, i) {
				continue
			}
			levels++
		default:
			levels++
		}
	}
	return max(bound, base+maxNest+levels)
}

// signedNumber reports whether toks[i], a sign, stands between '(' or ','
// and a number: PostgreSQL folds such a sign into the constant.
func signedNumber(toks []token, i int) bool {
	if i == 0 || i+1 >= len(toks) {
		return false
	}
	prev, next := toks[i-1].kind, toks[i+1].kind
	return (prev == '(' || prev == ',') && (next == pg_query.Token_ICONST || next == pg_query.Token_FCONST)
}
