package gate

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Directive keys recognized in statement comments. Keys match ASCII
// case-insensitively: a token someone meant to send must not be dropped
// silently because of its spelling.
const (
	keyToken    = "fencing_token"
	keyResource = "resource"
)

// Directives are the fencing token and resource named in a statement's
// comments, the strongest source of both (docs/design.md, "Where the token and the
// resource come from"). The zero value means that the comments name neither.
type Directives struct {
	Token    int64  // 0 when absent
	Resource string // "" when absent
}

// IsZero reports whether d names neither a token nor a resource.
func (d Directives) IsZero() bool { return d.Token == 0 && d.Resource == "" }

// Comment renders d as one sqlcommenter-style comment, for example
// /*fencing_token='42',resource='orders%2F42'*/, that ParseDirectives reads
// back as d. Absent fields are left out; the zero value renders as "".
func (d Directives) Comment() string {
	var parts []string
	if d.Token != 0 {
		parts = append(parts, keyToken+"='"+strconv.FormatInt(d.Token, 10)+"'")
	}
	if d.Resource != "" {
		// PathEscape escapes every byte that could end the quoted value or the
		// comment ('\'', '*', '/', ',', space).
		parts = append(parts, keyResource+"='"+url.PathEscape(d.Resource)+"'")
	}
	if len(parts) == 0 {
		return ""
	}
	return "/*" + strings.Join(parts, ",") + "*/"
}

// ParseDirectives returns the directives in the comments of sql, a whole
// Query string. Comments are found with PostgreSQL's own scanner, so text
// that only looks like a comment inside a string literal, a quoted
// identifier or a dollar-quoted body is never read. All comments count, in
// any position; keys other than fencing_token and resource are ignored.
//
// Errors: *TokenError for a malformed or conflicting token, *DirectiveError
// for a malformed or conflicting resource, *ParseError when sql cannot be
// scanned. Analyze attributes comments to the statement they belong to; this
// function is for callers that hold text outside a parse (tests, tools).
func ParseDirectives(sql string) (Directives, error) {
	if !mayHaveDirectives(sql) {
		return Directives{}, nil
	}
	comments, err := scanComments(sql)
	if err != nil {
		return Directives{}, err
	}
	var b directiveBuilder
	for _, c := range comments {
		if err := b.addComment(sql[c.start:c.end]); err != nil {
			return Directives{}, err
		}
	}
	return b.d, nil
}

// span is a half-open byte range [start, end) of a query string.
type span struct{ start, end int }

// mayHaveDirectives is a cheap filter run before the scanner: without a
// comment marker and one of our keys, no directive can be present. Keys
// are compared with strings.EqualFold, whose Unicode folding also reads the
// Kelvin sign as 'k' and the long s as 's' ("fencing_to\u212Aen",
// "re\u017Fource"): a text holding either is scanned too, or such a key
// would count only when the other key is spelled in ASCII beside it.
func mayHaveDirectives(sql string) bool {
	if !strings.Contains(sql, "/*") && !strings.Contains(sql, "--") {
		return false
	}
	return containsFold(sql, keyToken) || containsFold(sql, keyResource) ||
		strings.Contains(sql, "\u212A") || strings.Contains(sql, "\u017F")
}

// mayCarryDirective reports whether text may hold a directive however the
// server lexes it: a comment marker, and one of our keys (compared as
// directive keys are, strings.EqualFold) followed by optional spaces and
// '=' past the first comment marker, which the bytes show whatever is
// comment and whatever is literal.
// A text the gate cannot read, or reads under settings it is unsure of, is
// refused where this holds (cannotAnalyse): forwarded unread, a stale
// token in its comment would never be checked.
func mayCarryDirective(text string) bool {
	if !mayHaveDirectives(text) {
		return false
	}
	// A directive is in a comment: past the first comment marker.
	from := len(text)
	for _, marker := range [...]string{"/*", "--"} {
		if i := strings.Index(text, marker); i >= 0 {
			from = min(from, i)
		}
	}
	for i := from; i < len(text); i++ {
		if text[i] != '=' {
			continue
		}
		j := i
		for j > 0 && isSpace(text[j-1]) {
			j--
		}
		if hasKeySuffix(text[:j], keyToken) || hasKeySuffix(text[:j], keyResource) {
			return true
		}
	}
	return false
}

// hasKeySuffix reports whether s ends with key, a lower-case ASCII word,
// under strings.EqualFold's folding (which reads the Kelvin sign as 'k'
// and the long s as 's').
func hasKeySuffix(s, key string) bool {
	for k := len(key) - 1; k >= 0; k-- {
		r, size := utf8.DecodeLastRuneInString(s)
		if size == 0 || !foldsTo(r, key[k]) {
			return false
		}
		s = s[:len(s)-size]
	}
	return true
}

// foldsTo reports whether strings.EqualFold reads r as the lower-case
// ASCII byte c.
func foldsTo(r rune, c byte) bool {
	for f := unicode.SimpleFold(r); ; f = unicode.SimpleFold(f) {
		if f == rune(c) {
			return true
		}
		if f == r {
			return r == rune(c)
		}
	}
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// ignoring ASCII case, without allocating.
func containsFold(s, sub string) bool {
	if sub == "" {
		return true
	}
	first, upper := sub[0], sub[0]-'a'+'A'
	for i := 0; i+len(sub) <= len(s); i++ {
		if (s[i] == first || s[i] == upper) && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// scanComments returns the byte spans of all comments in sql, as
// PostgreSQL's scanner (via pg_query) sees them.
func scanComments(sql string) ([]span, error) {
	if strings.IndexByte(sql, 0) >= 0 {
		// The C scanner would stop at the NUL; offsets past it would lie.
		return nil, &ParseError{Message: "query text contains a NUL byte"}
	}
	res, err := pg_query.Scan(sql)
	if err != nil {
		return nil, newParseError(err)
	}
	var out []span
	for _, tok := range res.GetTokens() {
		if tok.Token == pg_query.Token_C_COMMENT || tok.Token == pg_query.Token_SQL_COMMENT {
			s, e := int(tok.Start), int(tok.End)
			if s < 0 || e > len(sql) || s > e {
				return nil, &ParseError{Message: "scanner returned a comment outside the text"}
			}
			out = append(out, span{s, e})
		}
	}
	return out, nil
}

// directiveBuilder accumulates directives from several comments and refuses
// conflicting values: two different tokens for one statement are ambiguous,
// and the proxy fails closed.
type directiveBuilder struct {
	d Directives
}

// addComment reads the key/value pairs of one comment, delimiters included
// ("/* … */" or "-- …").
func (b *directiveBuilder) addComment(c string) error {
	switch {
	case strings.HasPrefix(c, "/*"):
		c = strings.TrimSuffix(c[2:], "*/")
	case strings.HasPrefix(c, "--"):
		c = c[2:]
	}
	for _, p := range splitPairs(c) {
		if err := b.add(p); err != nil {
			return err
		}
	}
	return nil
}

func (b *directiveBuilder) add(p pair) error {
	switch {
	case strings.EqualFold(p.key, keyToken):
		raw, err := p.unescaped()
		if err != nil {
			return &TokenError{Value: p.value, Reason: "invalid URL encoding"}
		}
		tok, err := ParseToken(raw)
		if err != nil {
			return err
		}
		if b.d.Token != 0 && b.d.Token != tok {
			return &TokenError{Value: raw, Reason: "conflicts with fencing_token=" + strconv.FormatInt(b.d.Token, 10) + " in the same statement"}
		}
		b.d.Token = tok
	case strings.EqualFold(p.key, keyResource):
		res, err := p.unescaped()
		if err != nil {
			return &DirectiveError{Key: keyResource, Value: p.value, Reason: "invalid URL encoding"}
		}
		if err := checkResource(res); err != nil {
			return err
		}
		if b.d.Resource != "" && b.d.Resource != res {
			return &DirectiveError{Key: keyResource, Value: res, Reason: "conflicts with resource " + strconv.Quote(b.d.Resource) + " in the same statement"}
		}
		b.d.Resource = res
	}
	return nil
}

// checkResource rejects resource names PostgreSQL could not store as text.
func checkResource(r string) error {
	switch {
	case r == "":
		return &DirectiveError{Key: keyResource, Reason: "empty"}
	case strings.IndexByte(r, 0) >= 0:
		return &DirectiveError{Key: keyResource, Value: r, Reason: "contains a NUL byte"}
	case !utf8.ValidString(r):
		return &DirectiveError{Key: keyResource, Value: r, Reason: "not valid UTF-8"}
	}
	return nil
}

// ParseToken validates a fencing token given as text (a directive value, the
// lock.fencing_token setting, a startup option): a decimal integer in
// 1..math.MaxInt64, with an optional leading '+' and no spaces. Errors are
// *TokenError (SQLSTATE 22023).
func ParseToken(s string) (int64, error) {
	if s == "" {
		return 0, &TokenError{Value: s, Reason: "empty"}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		reason := "not an integer"
		if errors.Is(err, strconv.ErrRange) {
			reason = "out of range for a 64-bit integer"
		}
		return 0, &TokenError{Value: s, Reason: reason}
	}
	if n <= 0 {
		return 0, &TokenError{Value: s, Reason: "not positive"}
	}
	return n, nil
}
