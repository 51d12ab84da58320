package gate

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// settings are the server's session settings that change how PostgreSQL
// reads query text, as the server last reported them in ParameterStatus
// messages (never as the client asked for them: a SET may fail, a function
// may change them). docs/design.md "Fail closed", rule 1.
type settings struct {
	scsOff   bool   // standard_conforming_strings is not "on": '\' escapes in '…'
	encoding string // client_encoding, upper case
	version  string // server_version
	fold     bool   // server_encoding is single-byte (foldsNames)
}

// riskyEncodings are the client encodings whose multibyte characters may
// end in a byte that reads as '\', '\” or another ASCII character
// (PostgreSQL: pg_wchar.h, PG_VALID_FE_ENCODING but not "safe" for the
// backend). pg_query lexes as UTF-8 would, so a text in these encodings
// with any byte ≥ 0x80 may split differently on the server.
var riskyEncodings = map[string]bool{
	"SJIS": true, "SHIFT_JIS_2004": true, "BIG5": true, "GBK": true,
	"GB18030": true, "UHC": true, "JOHAB": true,
}

// param records one ParameterStatus.
func (c *settings) param(name, value string) {
	switch name {
	case "standard_conforming_strings":
		c.scsOff = value != "on"
	case "client_encoding":
		c.encoding = strings.ToUpper(value)
	case "server_version":
		c.version = value
	case "server_encoding":
		c.fold = foldsNames(value)
	}
}

// foldsNames reports whether PostgreSQL, with server encoding e, folds a
// non-ASCII letter of an unquoted name with its locale's tolower
// (scansup.c, downcase_identifier: only in single-byte encodings, SQL_ASCII
// among them). That may make it an ASCII letter, which PostgreSQL's own
// parser, and so the proxy's, never does: in LATIN5 under a Turkish locale
// "set_conf\xDDg" (İ) calls set_config, and "pg_adv\xDDsory_lock" takes a
// session advisory lock.
func foldsNames(e string) bool {
	switch strings.ToUpper(e) {
	case "UTF8", "EUC_JP", "EUC_CN", "EUC_KR", "EUC_TW", "EUC_JIS_2004", "MULE_INTERNAL":
		return false
	}
	return true
}

// foldableName reports whether sql holds an unquoted name with a byte
// ≥ 0x80 (one a single-byte server may fold to ASCII), or cannot be
// scanned to tell.
func foldableName(sql string) bool {
	if isASCII(sql) {
		return false
	}
	toks, err := scanTokens(sql)
	if err != nil {
		return true
	}
	for _, t := range toks {
		if t.kind == pg_query.Token_IDENT && sql[t.start] != '"' && !isASCII(sql[t.start:t.end]) {
			return true
		}
	}
	return false
}

// unsafe returns why sql may not be lexed by the proxy exactly as the
// server lexes it under the current settings, or "" when it will be.
// Without a backslash, '…' strings read the same whatever
// standard_conforming_strings says; without a byte ≥ 0x80 every encoding
// reads as ASCII.
func (c *settings) unsafe(sql string) string {
	if c.scsOff && strings.IndexByte(sql, '\\') >= 0 {
		return "standard_conforming_strings is off and the text contains a backslash, which the server may read as an escape inside a string; set standard_conforming_strings = on (the default since PostgreSQL 9.1)"
	}
	if riskyEncodings[c.encoding] && !isASCII(sql) {
		return "client_encoding is " + c.encoding + ", whose multibyte characters may contain the bytes of a quote or a backslash; use client_encoding UTF8"
	}
	if c.fold && foldableName(sql) {
		return "the server's encoding is single-byte, and the server's locale may fold a non-ASCII letter of an unquoted name to an ASCII one (a Turkish locale folds the dotted capital I to i), which the proxy cannot know; quote the name, or use a UTF8 database"
	}
	return ""
}

// lexRisky reports whether sql holds a byte that some setting of
// standard_conforming_strings or client_encoding could make the server read
// differently: a backslash, or a byte ≥ 0x80.
func lexRisky(sql string) bool { return firstRisky(sql) < len(sql) }

// firstRisky returns the index of sql's first byte that lexRisky looks
// for, len(sql) when there is none. What comes before it reads the same
// under every setting of both: a backslash matters only in a literal, and
// a byte ≥ 0x80 only as a multibyte character's first byte, whose next
// byte may be a backslash or a quote.
func firstRisky(sql string) int {
	for i := 0; i < len(sql); i++ {
		if sql[i] == '\\' || sql[i] >= 0x80 {
			return i
		}
	}
	return len(sql)
}

// anywhereWords are fragments without which a text cannot: change the
// fencing settings by function (set_config), RESET or DISCARD them, run
// code the proxy cannot see (EXECUTE), carry a directive (fencing_token=,
// resource=), name schema fence or an escaped identifier (U&"…"), end a
// transaction or undo a check (COMMIT, ROLLBACK, ABORT, PREPARE
// TRANSACTION), change prepared statements (PREPARE, DEALLOCATE) or
// cursors (DECLARE, CLOSE), run a portal (FETCH, MOVE), use a reserved name (they hold the byte 0x1F), or
// write pg_settings, whose rule calls set_config with the row's name: the
// name may be computed ('lock.f%'), so the word is all the text shows.
//
// The Kelvin sign and the long s are there because directive keys are
// compared with Unicode folding, under which they read as 'k' and 's'
// ("fencing_to\u212Aen", "re\u017Fource"; see mayHaveDirectives).
var anywhereWords = [...]string{"set_config", "reset", "discard", "execut", "fenc", "resource", "u&", "commit", "rollback", "abort", "prepare", "dealloc", "declare", "close", "\x1f", "fetch", "move", "pg_settings", "\u212A", "\u017F"}

// startWords are keywords that matter only as the first word of a
// statement: SET (and SET LOCAL), DO, CALL and END.
var startWords = [...]string{"set", "do", "call", "end"}

// mayMatter reports whether the text may change or carry anything fencing
// depends on. It reads bytes, not tokens, and errs towards true: a false
// true costs a parse; it never says false for a text that matters, whatever
// the session's standard_conforming_strings or client encoding (keywords
// and the words above are ASCII and cannot be escaped). When it says false,
// and the session may hold no token and has no require_token table, the text needs no
// analysis at all.
//
// It is one pass over the text: at each byte, only the words that start
// with it (in either case) are compared. It runs on every statement of a
// session that may be fenced, so it must stay cheap.
func mayMatter(sql string) bool { return hasWordOf(&matterWords, sql) }

// mayNeedSession reports, for a text mayMatter passes, whether it may
// still need session state a pool cannot keep per client (poolUnsupported,
// walker.poolUnsafe): every such statement holds a word of mayMatter's
// (SET, RESET, set_config, PREPARE, EXECUTE, DEALLOCATE, DISCARD,
// DECLARE, pg_settings) or of sessionWords. Errs towards true, as
// mayMatter does, for the same reasons; one pass.
func mayNeedSession(sql string) bool { return hasWordOf(&sessionIndex, sql) }

// sessionWords are the words of mayNeedSession beyond mayMatter's: LISTEN,
// LOAD, temporary objects (TEMP, TEMPORARY, the pg_temp schema) and
// session-level advisory locks (pg_advisory_lock and its kin).
var sessionWords = [...]string{"listen", "load", "temp", "advisory"}

var sessionIndex = func() (idx wordIndex) {
	for _, w := range sessionWords {
		idx.add(w, false)
	}
	return idx
}()

// mayMatterInChecked reports whether a text that mayMatter passes may still
// matter in a transaction that has passed its check: it may take or
// release a savepoint, which ROLLBACK TO goes back to (see
// Session.savepoints), or be a statement that cannot run in a transaction
// block (the words of noTxnWords), which commits the transaction it runs in
// where the server lets it run at all (see Session.after). One pass, as
// mayMatter.
func mayMatterInChecked(sql string) bool { return hasWordOf(&checkedWords, sql) }

// checkedWords indexes the words of mayMatterInChecked.
var checkedWords = func() (idx wordIndex) {
	for _, w := range checkedWordList() {
		idx.add(w, false)
	}
	return idx
}()

func checkedWordList() []string { return append([]string{"savepoint", "release"}, noTxnWords[:]...) }

// hasWordOf reports whether sql holds a word of idx, in any ASCII case.
func hasWordOf(idx *wordIndex, sql string) bool {
	for i := 0; i < len(sql); i++ {
		for _, w := range idx[sql[i]] {
			if hasFoldAt(sql, i, w.word) && (!w.start || isStartWordAt(sql, i, len(w.word))) {
				return true
			}
		}
	}
	return false
}

// matterWord is one of anywhereWords (start false) or startWords; in
// allWords, with the classes of scan it belongs to.
type matterWord struct {
	word    string
	start   bool
	classes wordClass
}

// wordIndex holds words by their first byte, in lower and upper case.
type wordIndex [256][]matterWord

func (idx *wordIndex) add(w string, start bool) { idx.addClasses(w, start, 0) }

// addClasses adds w, or adds classes to the entry it has already.
func (idx *wordIndex) addClasses(w string, start bool, classes wordClass) {
	c := w[0]
	firsts := []byte{c}
	if c >= 'a' && c <= 'z' {
		firsts = append(firsts, c-'a'+'A')
	}
	for _, c := range firsts {
		found := false
		for k := range idx[c] {
			if e := &idx[c][k]; e.word == w && e.start == start {
				e.classes |= classes
				found = true
			}
		}
		if !found {
			idx[c] = append(idx[c], matterWord{w, start, classes})
		}
	}
}

// wordClass is a set of the word scans a text passes: scanWords answers
// them all in one pass over the text, where each on its own (mayMatter,
// mayNeedSession, …) is a pass of its own.
type wordClass uint8

const (
	classMatter    wordClass = 1 << iota // mayMatter
	classSession                         // mayNeedSession's own words
	classChecked                         // mayMatterInChecked
	classNoTxn                           // mayBeNoTxnBlock
	classOpenBlock                       // mayOpenBlock
	classCopy                            // "copy", half of mayCopyIn's scan
	classStdin                           // "stdin", its other half
)

// allWords indexes the words of every class, each with its classes.
var allWords = func() (idx wordIndex) {
	for _, w := range anywhereWords {
		idx.addClasses(w, false, classMatter)
	}
	for _, w := range startWords {
		idx.addClasses(w, true, classMatter)
	}
	for _, w := range sessionWords {
		idx.addClasses(w, false, classSession)
	}
	for _, w := range checkedWordList() {
		idx.addClasses(w, false, classChecked)
	}
	for _, w := range noTxnWords {
		idx.addClasses(w, false, classNoTxn)
	}
	for _, w := range openBlockWords {
		idx.addClasses(w, false, classOpenBlock)
	}
	idx.addClasses("copy", false, classCopy)
	idx.addClasses("stdin", false, classStdin)
	return idx
}()

// wordStarts holds the first two bytes, ASCII letters lower-cased, of each
// word of allWords (of a one-byte word, that byte and any other): most
// positions of a text start none, and one lookup tells.
var wordStarts = func() (set [1 << 16 / 64]uint64) {
	add := func(a, b byte) { k := int(a)<<8 | int(b); set[k/64] |= 1 << (k % 64) }
	for _, ws := range allWords {
		for _, w := range ws {
			if len(w.word) == 1 {
				for b := range 256 {
					add(lowerASCII[w.word[0]], byte(b))
				}
				continue
			}
			add(lowerASCII[w.word[0]], lowerASCII[w.word[1]])
		}
	}
	return set
}()

// lowerASCII maps each byte to itself, ASCII upper-case letters to lower.
var lowerASCII = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			t[i] += 'a' - 'A'
		}
	}
	return t
}()

// scanWords returns the classes whose words sql holds: for each class, the
// answer its own scan gives (TestScanWordsAnswersAsEachScan).
func scanWords(sql string) wordClass {
	var found wordClass
	if sql == "" {
		return 0
	}
	cur := lowerASCII[sql[0]]
	for i := 0; i < len(sql); i++ {
		var next byte // past the end: a one-byte word's entries hold any
		if i+1 < len(sql) {
			next = lowerASCII[sql[i+1]]
		}
		k := uint16(cur)<<8 | uint16(next)
		cur = next
		if wordStarts[k>>6]&(1<<(k&63)) == 0 {
			continue
		}
		for _, w := range allWords[sql[i]] {
			if w.classes&^found != 0 && hasFoldAt(sql, i, w.word) && (!w.start || isStartWordAt(sql, i, len(w.word))) {
				found |= w.classes
			}
		}
	}
	return found
}

// matterWords indexes anywhereWords and startWords.
var matterWords = func() (idx wordIndex) {
	for _, w := range anywhereWords {
		idx.add(w, false)
	}
	for _, w := range startWords {
		idx.add(w, true)
	}
	return idx
}()

// hasFoldAt reports whether sql holds word, a lower-case ASCII word, at i,
// in any ASCII case.
func hasFoldAt(sql string, i int, word string) bool {
	if i+len(word) > len(sql) {
		return false
	}
	for j := 0; j < len(word); j++ {
		c := sql[i+j]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != word[j] {
			return false
		}
	}
	return true
}

// isStartWordAt reports whether the n bytes at i are a whole word that may
// begin a statement: preceded, past blanks on the same line, by nothing, a
// ';', or the '/' of a comment's end, or with a line break in between (a
// "--" comment may end there). A carriage return is a line break too: the
// server ends a "--" comment at '\r' as at '\n' (scan.l: non_newline is
// [^\n\r]), so "-- x\rCALL p()" is a comment and a CALL.
func isStartWordAt(sql string, i, n int) bool {
	if i > 0 && isIdentByte(sql[i-1]) || i+n < len(sql) && isIdentByte(sql[i+n]) {
		return false
	}
	j := i - 1
	for j >= 0 && (sql[j] == ' ' || sql[j] == '\t' || sql[j] == '\f' || sql[j] == '\v') {
		j--
	}
	return j < 0 || sql[j] == ';' || sql[j] == '/' || sql[j] == '\n' || sql[j] == '\r'
}

// isIdentByte reports whether c can continue an identifier or keyword
// (PostgreSQL scan.l ident_cont, with every byte ≥ 0x80).
func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}
