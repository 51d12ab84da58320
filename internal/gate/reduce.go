package gate

import (
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Long lists of constants (bulk VALUES rows, IN lists, ARRAY[…] of
// literals) and long string literals make up most of a large query text,
// and the parse tree pg_query returns for them costs ten times the parse
// itself (its protobuf round trip): 0.7 MB/s for a bulk INSERT. The
// classification reads nothing in them: the walk never descends into a
// constant (A_Const), and the few places that read a constant's value
// (set_config's first two arguments, an option's value) hold short ones
// near the start of their list. So a text longer than safeParseBytes is
// parsed reduced: each run of more than minConstRun constant elements loses
// all but its first two, and each string literal longer than
// maxLiteralBytes becomes a short one that reads the same to the
// classification (see shortLiteral). Statement spans are mapped back to the
// original text, and directives are read from it.
//
// A syntax error keeps its message (naming a shortened literal as "a
// literal of N bytes") but loses its position. A list the grammar refuses
// for its length (OVERLAPS takes rows of two) may parse once shortened:
// the server still refuses the text, and PostgreSQL parses a whole Query
// string before it runs any of it.
const (
	minConstRun     = 16
	maxLiteralBytes = 256
)

// reduceLarge turns the reductions on, prescanLarge finding them with
// prescan; tests compare with them off.
var reduceLarge, prescanLarge = true, true

// edit replaces sql[start:end] of the original text with repl.
type edit struct {
	start, end int
	repl       string
}

// reduceText returns sql with the edits applied, or sql itself when there
// are none.
func reduceText(sql string, edits []edit) string {
	if len(edits) == 0 {
		return sql
	}
	var b strings.Builder
	prev := 0
	for _, e := range edits {
		b.WriteString(sql[prev:e.start])
		b.WriteString(e.repl)
		prev = e.end
	}
	b.WriteString(sql[prev:])
	return b.String()
}

// offsets maps statement boundaries of the reduced text back to the
// original text. Boundaries must be asked for in order (a statement's start,
// its end, the next one's start, …): the map walks the edits once.
type offsets struct {
	edits []edit
	next  int // the first edit not passed yet
	shift int // what the passed edits added to the text's length
}

// orig returns the original offset of pos. A boundary at or inside a
// replacement maps to the replaced span's end: there a statement can only
// end (at its last row or literal), never start (an edit follows a bracket,
// VALUES or a literal's start, all within a statement).
func (m *offsets) orig(pos int) int {
	for ; m.next < len(m.edits); m.next++ {
		e := m.edits[m.next]
		newStart := e.start + m.shift
		if pos < newStart {
			break
		}
		if pos <= newStart+len(e.repl) {
			return e.end
		}
		m.shift += len(e.repl) - (e.end - e.start)
	}
	return pos - m.shift
}

// reductions returns the edits that shorten the text of toks, in order,
// and the number of tokens left for the parser (comments not counted).
func reductions(sql string, toks []token) ([]edit, int) {
	var edits []edit
	left := 0
	for i := 0; i < len(toks); {
		t := toks[i]
		if t.kind != pg_query.Token_C_COMMENT && t.kind != pg_query.Token_SQL_COMMENT {
			left++
		}
		if t.kind == '(' || t.kind == '[' || t.kind == pg_query.Token_VALUES {
			if e, kept, next, ok := constRun(sql, toks, i+1, t.kind == pg_query.Token_VALUES); ok {
				edits = append(edits, e)
				left += kept
				i = next
				continue
			}
		}
		if t.kind == pg_query.Token_SCONST && t.end-t.start > maxLiteralBytes {
			if r, ok := shortLiteral(sql[t.start:t.end]); ok {
				edits = append(edits, edit{t.start, t.end, r})
			}
		}
		i++
	}
	return edits, left
}

// constRun looks at the list that starts at toks[i], just past an opening
// bracket or VALUES. When it is a run of more than minConstRun constant
// elements separated by commas, up to its closing bracket (for VALUES, up
// to whatever follows its last row), it returns the edit that removes all
// elements but the first two, the number of tokens it keeps, and the index
// of the token after the run. A list that mentions fence in what it would
// lose is left whole.
func constRun(sql string, toks []token, i int, values bool) (edit, int, int, bool) {
	elems, secondEnd, kept := 0, 0, 0
	for start := i; ; {
		j, ok := constElem(toks, i)
		if !ok {
			return edit{}, 0, 0, false
		}
		elems++
		if elems == 2 {
			secondEnd, kept = toks[j-1].end, j-start
		}
		if j < len(toks) && toks[j].kind == ',' {
			i = j + 1
			continue
		}
		if values || j < len(toks) && (toks[j].kind == ')' || toks[j].kind == ']') {
			if elems <= minConstRun {
				return edit{}, 0, 0, false
			}
			end := toks[j-1].end
			if mentionsFence(sql[secondEnd:end]) {
				return edit{}, 0, 0, false
			}
			return edit{secondEnd, end, ""}, kept, j, true
		}
		return edit{}, 0, 0, false
	}
}

// constElem returns the index just past the constant element at toks[i]:
// a literal (a number, with its sign, a string, NULL, TRUE, FALSE or a
// parameter), or a parenthesised list of literals (a VALUES row).
func constElem(toks []token, i int) (int, bool) {
	if i < len(toks) && toks[i].kind == '(' {
		for j := i + 1; j < len(toks); j += 2 {
			k, ok := literal(toks, j)
			if !ok || k >= len(toks) {
				return 0, false
			}
			switch toks[k].kind {
			case ')':
				return k + 1, true
			case ',':
				j = k - 1
				continue
			}
			return 0, false
		}
		return 0, false
	}
	return literal(toks, i)
}

// literal returns the index just past the literal at toks[i].
func literal(toks []token, i int) (int, bool) {
	if i >= len(toks) {
		return 0, false
	}
	switch toks[i].kind {
	case '-', '+':
		if i+1 < len(toks) && (toks[i+1].kind == pg_query.Token_ICONST || toks[i+1].kind == pg_query.Token_FCONST) {
			return i + 2, true
		}
	case pg_query.Token_ICONST, pg_query.Token_FCONST, pg_query.Token_SCONST, pg_query.Token_PARAM,
		pg_query.Token_NULL_P, pg_query.Token_TRUE_P, pg_query.Token_FALSE_P:
		return i + 1, true
	}
	return 0, false
}

// shortLiteral returns a short standard string literal that the
// classification reads as it reads lit, a long one: a long value is never a
// setting's or schema's name, never a boolean word ('off', 'no'), and only
// its mentioning fence is read (a DO block's or function's body). It says
// what it stands for, as a syntax error may quote it. It refuses forms
// whose prefix matters (E'…', U&'…' are other tokens or escape rules) by
// taking only plain '…' and $tag$…$tag$ literals.
func shortLiteral(lit string) (string, bool) {
	if lit[0] != '\'' && lit[0] != '$' {
		return "", false
	}
	r := "'" + shortPrefix + strconv.Itoa(len(lit)) + " bytes"
	if mentionsFence(lit) {
		r += " mentioning fence" // and not "fence" itself
	}
	return r + "'", true
}

const shortPrefix = "a literal of "

// maybeShortened reports whether v, a string constant's value, may be what
// shortLiteral put in place of a long literal: where a value is kept or
// read for what it says (transaction pool mode's tracked resource, a
// search_path), it is not the client's.
func maybeShortened(v string) bool {
	return strings.HasPrefix(v, shortPrefix) && strings.Contains(v, " bytes")
}
