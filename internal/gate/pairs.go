package gate

import (
	"net/url"
	"strings"
)

// pair is one key=value item of a directive comment. quoted is true for the
// sqlcommenter form key='value', whose value is URL-encoded.
type pair struct {
	key, value string
	quoted     bool
}

// unescaped returns the value as meant: sqlcommenter values are URL-decoded
// with PathUnescape (not QueryUnescape, which would turn a literal '+' into a
// space); bare values are taken as written.
func (p pair) unescaped() (string, error) {
	if !p.quoted {
		return p.value, nil
	}
	return url.PathUnescape(p.value)
}

// isPairSep reports whether c separates pairs: docs/design.md allows spaces and
// commas; other whitespace is treated as space.
func isPairSep(c byte) bool {
	return c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isSpace(c byte) bool { return c != ',' && isPairSep(c) }

// splitPairs reads the key=value pairs of a comment body. Grammar, loosely:
// items separated by spaces or commas; an item is key, optional spaces, '=',
// optional spaces, then either a single-quoted value (sqlcommenter: ' inside
// is escaped as \') or a bare value running to the next separator. Words that
// are not followed by '=' are prose and skipped, so an ordinary comment yields
// no pairs. A quoted value without its closing quote is taken to the end.
func splitPairs(body string) []pair {
	var out []pair
	i := 0
	for i < len(body) {
		for i < len(body) && isPairSep(body[i]) {
			i++
		}
		start := i
		for i < len(body) && !isPairSep(body[i]) && body[i] != '=' {
			i++
		}
		key := body[start:i]
		j := i
		for j < len(body) && isSpace(body[j]) {
			j++
		}
		if j >= len(body) || body[j] != '=' {
			continue // a word of prose (key is never empty here)
		}
		j++
		for j < len(body) && isSpace(body[j]) {
			j++
		}
		var p pair
		p, i = readValue(body, j)
		p.key = key
		if key != "" {
			out = append(out, p)
		}
	}
	return out
}

// readValue reads a value starting at body[i] and returns it with the index
// just past it.
func readValue(body string, i int) (pair, int) {
	if i < len(body) && body[i] == '\'' {
		var b strings.Builder
		i++
		for i < len(body) {
			c := body[i]
			switch {
			case c == '\\' && i+1 < len(body):
				b.WriteByte(body[i+1])
				i += 2
				continue
			case c == '\'':
				return pair{value: b.String(), quoted: true}, i + 1
			}
			b.WriteByte(c)
			i++
		}
		return pair{value: b.String(), quoted: true}, i
	}
	start := i
	for i < len(body) && !isPairSep(body[i]) {
		i++
	}
	return pair{value: body[start:i]}, i
}
