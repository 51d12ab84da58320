package gate

import "strings"

// maxShapeDigits bounds the integer literals literalShape stands in for:
// nine digits always lex as an Integer constant, never as a Float.
const maxShapeDigits = 9

// shapeWords are the first words of the texts that literalShape shapes:
// plain DML, whose integer literals are data (the walk never reads
// A_Const values) and never an option whose value changes what runs.
var shapeWords = [...]string{"select", "insert", "update", "delete"}

// literalShape returns sql with each unsigned integer literal replaced by
// "0" when its value is zero and "1" otherwise, and true when the result
// may stand for sql in the analysis cache: two texts of one shape lex into
// the same tokens but for those literals' values, so they parse into the
// same statement, the same tables and the same kind. It returns false for
// any text where that is not certain from bytes alone:
//
//   - a text that may matter to fencing (mayMatter): a setting, a
//     directive, schema fence, a transaction's end, prepared statements;
//   - a text not starting with SELECT, INSERT, UPDATE or DELETE;
//   - a byte ≥ 0x80, a backslash, a '$' (dollar quotes, parameters) or a
//     NUL: then lexing may depend on the session's encoding or
//     standard_conforming_strings, or is beyond this scanner;
//   - a literal that is not a plain integer of at most nine digits
//     (1.5, 1e5, 0x1F, 1_000, 12abc), or an unterminated quote or comment;
//   - a text with no literal to replace (the exact text is its own key), or
//     longer than checkBounds analyses without a bound check.
//
// The scanner follows PostgreSQL's scan.l for what it keeps: '…' strings
// and "…" identifiers (doubled quotes inside), "--" comments to the end
// of the line, nested /* */ comments.
//
// matters is mayMatter(sql), which the caller has already.
func literalShape(sql string, matters bool) (string, bool) {
	if len(sql) > safeParseBytes || !startsWithDML(sql) || matters {
		return "", false
	}
	for i := 0; i < len(sql); i++ {
		if c := sql[i]; c >= 0x80 || c == '\\' || c == '$' || c == 0 {
			return "", false
		}
	}
	var b strings.Builder
	b.Grow(len(sql)) // a shape is never longer than its text
	replaced := false
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(sql[i+1:], c)
			if j < 0 {
				return "", false
			}
			b.WriteString(sql[i : i+j+2]) // a doubled quote reads as two quoted runs: the same bytes
			i += j + 2
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			j := strings.IndexAny(sql[i:], "\n\r")
			if j < 0 {
				j = len(sql) - i
			}
			b.WriteString(sql[i : i+j])
			i += j
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			j, ok := blockCommentEnd(sql, i)
			if !ok {
				return "", false
			}
			b.WriteString(sql[i:j])
			i = j
		case c >= '0' && c <= '9' && (i == 0 || !isIdentByte(sql[i-1]) && sql[i-1] != '.'):
			j := i
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			if j-i > maxShapeDigits || j < len(sql) && (isIdentByte(sql[j]) || sql[j] == '.') {
				return "", false
			}
			if strings.Trim(sql[i:j], "0") == "" {
				b.WriteByte('0')
			} else {
				b.WriteByte('1')
			}
			replaced = true
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), replaced
}

// blockCommentEnd returns the index just past the /* */ comment (nested,
// as PostgreSQL nests them) that starts at i.
func blockCommentEnd(sql string, i int) (int, bool) {
	depth := 0
	for i+1 < len(sql) {
		switch {
		case sql[i] == '/' && sql[i+1] == '*':
			depth++
			i += 2
		case sql[i] == '*' && sql[i+1] == '/':
			depth--
			i += 2
			if depth == 0 {
				return i, true
			}
		default:
			i++
		}
	}
	return 0, false
}

// startsWithDML reports whether the first word of sql, past blanks, is one
// of shapeWords.
func startsWithDML(sql string) bool {
	s := strings.TrimLeft(sql, " \t\r\n\f\v")
	for _, w := range shapeWords {
		if hasFoldAt(s, 0, w) && (len(s) == len(w) || !isIdentByte(s[len(w)])) {
			return true
		}
	}
	return false
}
