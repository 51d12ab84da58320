package gate

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// PostgreSQL's scanner, through pg_query, costs about half a microsecond per
// token (its result is a protobuf message per token): 0.3–0.8 s for a 4 MiB
// message, whatever the parser then sees. prescan finds the same
// reductions (see reductions) with a byte scanner a few times cheaper per
// byte, and the C scanner then scans only the reduced text; verifyPrescan
// checks every edit against the C scanner's tokens of the reduced text, and
// any doubt falls back to scanning the whole text.
//
// prescan follows scan.l with standard_conforming_strings on, as pg_query
// does: '…' strings with doubled quotes (also after B, X, N and U&), E'…'
// with backslash escapes, "…" identifiers, $tag$…$tag$ and $n, -- and
// nested /* */ comments, identifiers of letters, digits, '_', '$' and bytes
// ≥ 0x80. It does not need to tell operators or numbers apart exactly: no
// quote begins inside either, and it looks for a comment at every byte, as
// scan.l ends an operator where a comment begins ("+--").

// prescanned is what prescan found.
type prescanned struct {
	edits []edit
	// runs[i] is the offset of the bracket or VALUES that opens the run of
	// edits[i], or -1 when edits[i] shortens a literal.
	runs []int
	// atLeast is a lower bound on the tokens the parser sees after the
	// edits (comments, literals and operators are not counted).
	atLeast int
}

// prescan scans sql; ok is false when it met something it does not follow
// (an unterminated quote or comment).
func prescan(sql string) (p prescanned, ok bool) {
	inOperator := false // the previous byte was an operator's
	for i := 0; i < len(sql); {
		c := sql[i]
		operator := isOperatorByte(c) && !commentAt(sql, i)
		if operator && !inOperator {
			p.atLeast++ // a run of operator bytes holds at least one token
		}
		inOperator = operator
		switch {
		case operator:
			i++
		case isBlank(c):
			i++
		case c == '-': // "--"
			j := strings.IndexAny(sql[i:], "\n\r")
			if j < 0 {
				return p, true
			}
			i += j
		case c == '/': // "/*"
			j, ok := blockCommentEnd(sql, i)
			if !ok {
				return p, false
			}
			i = j
		case c == '\'':
			j, ok := quotedEnd(sql, i, '\'')
			if !ok {
				return p, false
			}
			p.literal(sql, i, j)
			i = j
		case c == '"':
			j, ok := quotedEnd(sql, i, '"')
			if !ok {
				return p, false
			}
			p.atLeast++
			i = j
		case c == '$':
			j, quoted, ok := dollarEnd(sql, i)
			if !ok {
				return p, false
			}
			if quoted {
				p.literal(sql, i, j)
			}
			i = j
		case isDigit(c):
			p.atLeast++
			i = numberEnd(sql, i)
		case isIdentStart(c):
			j, ok := p.word(sql, i)
			if !ok {
				return p, false
			}
			i = j
		case c == '(' || c == '[':
			p.atLeast++
			i = p.run(sql, i, i+1, false)
		case c == ')' || c == ']' || c == ',' || c == ';':
			p.atLeast++
			i++
		default:
			i++ // '.', and bytes the scanner refuses
		}
	}
	return p, true
}

// word scans the identifier or keyword at sql[i], with what it prefixes:
// the string of E'…' (backslash escapes) or of U&'…' and U&"…" (one token
// with it), or the run of constants after VALUES. It returns where
// scanning goes on; ok is false for an unterminated quote.
func (p *prescanned) word(sql string, i int) (int, bool) {
	j := i + 1
	for j < len(sql) && isIdentCont(sql[j]) {
		j++
	}
	p.atLeast++
	one := j == i+1
	switch {
	case one && (sql[i] == 'e' || sql[i] == 'E') && j < len(sql) && sql[j] == '\'':
		return escapeStringEnd(sql, j)
	case one && (sql[i] == 'u' || sql[i] == 'U') && j+1 < len(sql) && sql[j] == '&' && (sql[j+1] == '\'' || sql[j+1] == '"'):
		return quotedEnd(sql, j+1, sql[j+1])
	case j-i == 6 && strings.EqualFold(sql[i:j], "values"):
		return p.run(sql, i, j, true), true
	}
	return j, true
}

// numberEnd returns the end of the number at sql[i]: digits, '.', an
// exponent with its sign, and letters or '_' run into it (0x1F, 1_000, or
// junk PostgreSQL refuses), all one token.
func numberEnd(sql string, i int) int {
	for i < len(sql) {
		c := sql[i]
		switch {
		case (c == 'e' || c == 'E') && i+2 < len(sql) && (sql[i+1] == '+' || sql[i+1] == '-') && isDigit(sql[i+2]):
			i += 2
		case isDigit(c) || c == '.' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			i++
		default:
			return i
		}
	}
	return i
}

// isOperatorByte reports whether c can be part of an operator (or of
// "::", ":=", "=>") to PostgreSQL's scanner.
func isOperatorByte(c byte) bool { return strings.IndexByte("~!@#^&|`?+-*/%<>=:", c) >= 0 }

// commentAt reports whether a comment starts at sql[i].
func commentAt(sql string, i int) bool {
	return i+1 < len(sql) && (sql[i] == '-' && sql[i+1] == '-' || sql[i] == '/' && sql[i+1] == '*')
}

// literal records the edit that shortens the string literal sql[i:j] when
// it is long, plain, and neither continues another nor is continued
// ('a'\n'b' is one string).
func (p *prescanned) literal(sql string, i, j int) {
	if j-i <= maxLiteralBytes || i > 0 && !strings.ContainsRune(" \t\n\r(,=", rune(sql[i-1])) {
		return
	}
	if k := skipBlanks(sql, j); k < len(sql) && sql[k] == '\'' {
		return
	}
	k := i
	for k > 0 && isBlank(sql[k-1]) {
		k--
	}
	if k > 0 && sql[k-1] == '\'' {
		return
	}
	if r, ok := shortLiteral(sql[i:j]); ok {
		p.edits = append(p.edits, edit{i, j, r})
		p.runs = append(p.runs, -1)
	}
}

// run looks for a run of constants that starts at sql[j], past the bracket
// or VALUES at open, and records its edit when it is long. It returns where
// scanning goes on: past the run, or j.
func (p *prescanned) run(sql string, open, j int, values bool) int {
	elems, secondEnd, k := 0, 0, j
	for {
		e, ok := constElemBytes(sql, skipBlanks(sql, k))
		if !ok {
			return j
		}
		elems++
		if elems == 2 {
			secondEnd = e
		}
		k = skipBlanks(sql, e)
		if k < len(sql) && sql[k] == ',' {
			k++
			continue
		}
		closed := k < len(sql) && (sql[k] == ')' || sql[k] == ']')
		if elems <= minConstRun || !values && !closed || mentionsFence(sql[secondEnd:e]) {
			return j
		}
		if !values {
			p.atLeast++ // the closing bracket
			k++
		}
		p.edits = append(p.edits, edit{secondEnd, e, ""})
		p.runs = append(p.runs, open)
		p.atLeast += 3 // at least two elements and a comma
		return k
	}
}

// constElemBytes returns the end of the constant element at sql[i]: a
// literal or a parenthesised list of literals.
func constElemBytes(sql string, i int) (int, bool) {
	if i >= len(sql) || sql[i] != '(' {
		return literalBytes(sql, i)
	}
	for k := i + 1; ; {
		e, ok := literalBytes(sql, skipBlanks(sql, k))
		if !ok {
			return 0, false
		}
		k = skipBlanks(sql, e)
		switch {
		case k < len(sql) && sql[k] == ',':
			k++
		case k < len(sql) && sql[k] == ')':
			return k + 1, true
		default:
			return 0, false
		}
	}
}

// literalBytes returns the end of the literal at sql[i], in the strict
// forms only: an unsigned or signed number of digits with at most one
// '.', a plain '…' string, $n, NULL, TRUE or FALSE, each ending at a blank,
// ',', ')' or ']'.
func literalBytes(sql string, i int) (int, bool) {
	if i >= len(sql) {
		return 0, false
	}
	j := i
	switch c := sql[i]; {
	case c == '\'':
		e, ok := quotedEnd(sql, i, '\'')
		if !ok {
			return 0, false
		}
		j = e
	case c == '$':
		j++
		for j < len(sql) && isDigit(sql[j]) {
			j++
		}
		if j == i+1 {
			return 0, false
		}
	case c == '-' || c == '+' || isDigit(c):
		if !isDigit(c) {
			j++
		}
		k := j
		for j < len(sql) && isDigit(sql[j]) {
			j++
		}
		if j == k {
			return 0, false
		}
		if j < len(sql) && sql[j] == '.' {
			j++
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
		}
	case isIdentStart(c):
		for j < len(sql) && isIdentCont(sql[j]) {
			j++
		}
		if w := sql[i:j]; !strings.EqualFold(w, "null") && !strings.EqualFold(w, "true") && !strings.EqualFold(w, "false") {
			return 0, false
		}
	default:
		return 0, false
	}
	if j < len(sql) && !strings.ContainsRune(" \t\n\r,)]", rune(sql[j])) {
		return 0, false
	}
	return j, true
}

// quotedEnd returns the end of the '…' or "…" run at sql[i], doubled
// quotes included.
func quotedEnd(sql string, i int, q byte) (int, bool) {
	for j := i + 1; ; {
		k := strings.IndexByte(sql[j:], q)
		if k < 0 {
			return 0, false
		}
		j += k + 1
		if j >= len(sql) || sql[j] != q {
			return j, true
		}
		j++
	}
}

// escapeStringEnd returns the end of the E'…' string whose quote is at
// sql[i]: a backslash escapes the next byte.
func escapeStringEnd(sql string, i int) (int, bool) {
	for j := i + 1; j < len(sql); j++ {
		switch sql[j] {
		case '\\':
			j++
		case '\'':
			if j+1 < len(sql) && sql[j+1] == '\'' {
				j++
				continue
			}
			return j + 1, true
		}
	}
	return 0, false
}

// dollarEnd returns the end of what starts with the '$' at sql[i]: $n, a
// $tag$…$tag$ string (quoted), or a lone '$' (a token of its own, which the
// grammar refuses). ok is false for an unterminated string.
func dollarEnd(sql string, i int) (end int, quoted, ok bool) {
	j := i + 1
	if j < len(sql) && isDigit(sql[j]) {
		for j < len(sql) && isDigit(sql[j]) {
			j++
		}
		return j, false, true
	}
	if j < len(sql) && isIdentStart(sql[j]) {
		for j < len(sql) && isIdentCont(sql[j]) && sql[j] != '$' {
			j++
		}
	}
	if j >= len(sql) || sql[j] != '$' {
		return i + 1, false, true
	}
	tag := sql[i : j+1]
	k := strings.Index(sql[j+1:], tag)
	if k < 0 {
		return 0, false, false
	}
	return j + 1 + k + len(tag), true, true
}

// skipBlanks returns the index of the first byte at or after i that is not
// white space.
func skipBlanks(sql string, i int) int {
	for i < len(sql) && isBlank(sql[i]) {
		i++
	}
	return i
}

// isBlank reports whether c is white space to PostgreSQL's scanner.
func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}
func isIdentCont(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }

// verifyPrescan checks each edit of p against toks, the C scanner's tokens
// of the reduced text: a shortened literal is one string token exactly
// where the replacement is; a run opens with its bracket or VALUES token
// where prescan saw it, holds only constant tokens up to the edit, and a
// token ends exactly at the edit. The text up to the first edit is the
// original's, so the C scanner's state there is the true one; from a true
// state, the strict forms prescan removes end where it says, so the state
// after each edit is the true one too.
func verifyPrescan(p prescanned, toks []token) bool {
	t, shift := 0, 0
	for i, e := range p.edits {
		at := e.start + shift
		if p.runs[i] < 0 {
			for t < len(toks) && toks[t].start < at {
				t++
			}
			if t >= len(toks) || toks[t].start != at || toks[t].end != at+len(e.repl) || toks[t].kind != pg_query.Token_SCONST {
				return false
			}
		} else {
			open := p.runs[i] + shift
			for t < len(toks) && toks[t].start < open {
				t++
			}
			if t >= len(toks) || toks[t].start != open || !opensRun(toks[t].kind) {
				return false
			}
			for t++; t < len(toks) && toks[t].end < at; t++ {
				if !constantToken(toks[t].kind) {
					return false
				}
			}
			if t >= len(toks) || toks[t].end != at || !constantToken(toks[t].kind) {
				return false
			}
		}
		shift += len(e.repl) - (e.end - e.start)
	}
	return true
}

// opensRun reports whether a token can open a run of constants.
func opensRun(k pg_query.Token) bool {
	return k == '(' || k == '[' || k == pg_query.Token_VALUES
}

// constantToken reports whether a token can be part of a run of constants.
func constantToken(k pg_query.Token) bool {
	switch k {
	case '(', ')', ',', '-', '+', pg_query.Token_ICONST, pg_query.Token_FCONST, pg_query.Token_SCONST,
		pg_query.Token_PARAM, pg_query.Token_NULL_P, pg_query.Token_TRUE_P, pg_query.Token_FALSE_P:
		return true
	}
	return false
}
