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
	// parse tree's round trip costs about 2 µs of CPU per token
	// (BenchmarkAnalyzeAtTokenBound), so a message of names (TRUNCATE t0,
	// …, tN; thousands of statements) costs at most about 0.2 s. A text
	// with more is refused (54001) where fencing is possible.
	maxParseTokens = 100_000
)

// SQLSTATEs of texts the proxy cannot analyse safely.
const (
	codeTooComplex = sqlstate.StatementTooComplex
	codeTooLong    = sqlstate.ProgramLimitExceeded
)

// prepare returns the text the parser is to see for sql, and the edits
// that made it from sql (see reductions), or an error for a text the
// parser must not see: too long (54000), nested too deeply or holding too
// many tokens (54001). A text of up to safeParseBytes is parsed as it is.
func prepare(sql string) (string, []edit, error) {
	if len(sql) <= safeParseBytes {
		return sql, nil, nil
	}
	if len(sql) > MaxAnalyzeBytes {
		return "", nil, &ParseError{Code: codeTooLong, Message: "statement of " + strconv.Itoa(len(sql)) + " bytes is longer than the proxy analyses (" + strconv.Itoa(MaxAnalyzeBytes) + ")"}
	}
	if reduceLarge && prescanLarge {
		p, ok := prescan(sql)
		switch {
		case !ok:
			// An unterminated quote or comment: PostgreSQL's scanner says
			// so at once (it builds its result only for a text it reads).
		case p.atLeast > maxParseTokens:
			return "", nil, tooManyTokens("at least " + strconv.Itoa(p.atLeast))
		case len(p.edits) > 0:
			reduced := reduceText(sql, p.edits)
			if toks, err := scanTokens(reduced); err == nil && verifyPrescan(p, toks) {
				return reduced, p.edits, checkTokens(toks, countTokens(toks))
			}
		}
	}
	toks, err := scanTokens(sql)
	if err != nil {
		return "", nil, newParseError(err)
	}
	if !reduceLarge {
		return sql, nil, checkTokens(toks, 0)
	}
	edits, left := reductions(sql, toks)
	if err := checkTokens(toks, left); err != nil {
		return "", nil, err
	}
	return reduceText(sql, edits), edits, nil
}

// checkTokens refuses a text whose tokens nest too deeply for the parser,
// or of which more than maxParseTokens (left of them) reach it.
func checkTokens(toks []token, left int) error {
	if d := depthBound(toks); d > maxDepth {
		return &ParseError{Code: codeTooComplex, Message: "statement is too deeply nested for the proxy to analyse safely (" + strconv.Itoa(d) + " levels; at most " + strconv.Itoa(maxDepth) + ")"}
	}
	if left > maxParseTokens {
		return tooManyTokens(strconv.Itoa(left))
	}
	return nil
}

// countTokens returns the number of toks that are not comments.
func countTokens(toks []token) int {
	n := 0
	for _, t := range toks {
		if t.kind != pg_query.Token_C_COMMENT && t.kind != pg_query.Token_SQL_COMMENT {
			n++
		}
	}
	return n
}

// tooManyTokens is the refusal of a text with n tokens left to parse.
func tooManyTokens(n string) *ParseError {
	return &ParseError{Code: codeTooComplex, Message: "statement has " + n + " tokens besides long lists of constants; the proxy parses at most " + strconv.Itoa(maxParseTokens) + " in one message (send fewer statements or names per message)"}
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
