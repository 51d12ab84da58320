package integration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// FuzzDifferential builds texts from lexical pieces chosen to make the
// proxy's reading of statement boundaries differ from the server's (quotes,
// backslashes, E” and dollar quotes, comments, multi-byte characters in
// SJIS and other client encodings, standard_conforming_strings off, token
// and resource changes, transaction control), runs each through the proxy
// and checks two properties against the real server:
//
//   - stale: in a session whose token (41, or any the text sets) is below
//     every mark, nothing the text writes may land, whatever the proxy did;
//   - differential: with a fresh token, the proxy either refuses the text
//     with an error of its own ("fenceproxy: …") or the server ends in the
//     same state (rows written, SQLSTATE) as when the text is sent straight
//     to it — so the check was placed where the server runs it, never
//     inside a literal or comment.
//
// COPY … FROM STDIN is left out: pgconn's Exec cannot answer CopyInResponse.
// Without -fuzz it runs the seed corpus as a regression test; `make
// fuzz-diff` runs it for FUZZTIME.
func FuzzDifferential(f *testing.F) {
	e := newFencedEnv(f, nil)
	if err := harness.Exec(context.Background(), e.direct(),
		"CREATE TABLE t (v text)",
		"INSERT INTO fence.hwm VALUES ('acct/1', 100, now()), ('acct/2', 100, now())",
	); err != nil {
		f.Fatal(err)
	}
	for _, s := range diffSeeds {
		f.Add(s)
	}
	admin := connect(f, e.direct(), pgx.QueryExecModeExec)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := decodeCase(data)
		e.checkStale(t, admin, c)
		if !c.setsToken {
			e.checkDifferential(t, admin, c)
		}
	})
}

// fuzzCase is one generated session: settings, then one text.
type fuzzCase struct {
	settings  []string // SET statements run before the text
	text      string
	extended  bool // send the text with Parse/Bind/Execute instead of Query
	setsToken bool // the text may set lock.fencing_token (to stale values only)
}

// diffPieces are the lexical pieces texts are made of. A token set in a
// text is always below every mark (7, 9, 3) and never empty, so in the
// stale run every write must be refused.
var diffPieces = []string{
	"INSERT INTO t VALUES ('", "')", "'", `\`, "''", "E'", "; ", " ", "/*", "*/", "--", "\n",
	"$$", "$a$", `"`, "U&'", `\0041`, "x", "SELECT ", "INSERT INTO t VALUES ('w')",
	"UPDATE t SET v = v || 'u'", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT s", "ROLLBACK TO s",
	"SET standard_conforming_strings = off", "SET standard_conforming_strings = on",
	"\x95\x5c", "é", "\xa4\x5c", "\xff", "表",
	"DO $$BEGIN INSERT INTO t VALUES ('do'); END$$", "SET lock.resource = 'acct/2'",
	"PREPARE p AS INSERT INTO t VALUES ('p')", "EXECUTE p", "DEALLOCATE p",
	"SELECT 1 FROM t WHERE v = '", "WITH w AS (INSERT INTO t VALUES ('cte') RETURNING v) SELECT * FROM w",
	"START TRANSACTION READ ONLY", "SET client_encoding = 'SJIS'",
	"(", ")", ",", "E'\\''", "$b$'$b$", "/* fencing_token=", "resource=acct/2 */",
}

// tokenPieces set a stale token; a text holding one is not compared with
// the server straight, where nothing checks it.
var tokenPieces = []string{
	"SET lock.fencing_token = 7", "SELECT set_config('lock.fencing_token', '9', false)",
	"/* fencing_token=3 */", "SET LOCAL lock.fencing_token = '9'", "SET lock . fencing_token = 7",
	`SET "lock"."fencing_token" = 7`, `SET U&"lock".U&"\0066encing_token" = 7`,
}

var diffEncodings = []string{"UTF8", "SJIS", "LATIN1", "EUC_JP", "BIG5", "GBK"}

// decodeCase turns fuzz bytes into a case: the first byte picks settings and
// protocol, each further byte a piece (high bit set: a token piece).
func decodeCase(data []byte) fuzzCase {
	var c fuzzCase
	if len(data) == 0 {
		return c
	}
	h := data[0]
	if h&1 != 0 {
		c.settings = append(c.settings, "SET standard_conforming_strings = off")
	}
	c.settings = append(c.settings, "SET client_encoding = '"+diffEncodings[int(h>>1&7)%len(diffEncodings)]+"'")
	c.extended = h&0x10 != 0
	var b strings.Builder
	for _, p := range data[1:] {
		if p&0x80 != 0 && p&0x40 != 0 {
			b.WriteString(tokenPieces[int(p&0x3f)%len(tokenPieces)])
			c.setsToken = true
			continue
		}
		b.WriteString(diffPieces[int(p&0x7f)%len(diffPieces)])
	}
	c.text = b.String()
	return c
}

// run opens a session to dsn, applies token (when not empty) and the case's
// settings, sends its text, and returns the error the text got (nil: none).
// A failure to connect or to apply the settings fails the test.
func (c fuzzCase) run(t *testing.T, dsn, token string) *pgconn.PgError {
	t.Helper()
	// A text that hangs the session fails the case instead of the run.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	setup := c.settings
	if token != "" {
		setup = append([]string{"SET lock.resource = 'acct/1'", "SET lock.fencing_token = " + token}, setup...)
	}
	for _, s := range setup {
		if _, err := conn.Exec(ctx, s).ReadAll(); err != nil {
			t.Fatalf("setting %q: %v", s, err)
		}
	}
	if c.extended {
		err = conn.ExecParams(ctx, c.text, nil, nil, nil, nil).Read().Err
	} else {
		_, err = conn.Exec(ctx, c.text).ReadAll()
	}
	var pe *pgconn.PgError
	if err != nil && !errors.As(err, &pe) {
		t.Fatalf("text %q: not a server error (the session broke): %v", c.text, err)
	}
	if pe != nil && pe.Severity == "FATAL" {
		t.Fatalf("text %q: FATAL %s %s", c.text, pe.Code, pe.Message)
	}
	// The session still answers (a stale session's SELECT is refused, which
	// is an answer too).
	_, err = conn.Exec(ctx, "ROLLBACK; SELECT 1").ReadAll()
	var after *pgconn.PgError
	if err != nil && (!errors.As(err, &after) || after.Severity == "FATAL") {
		t.Fatalf("text %q: session unusable afterwards: %v", c.text, err)
	}
	return pe
}

// checkStale: with a token below every mark, no row may land.
func (e *env) checkStale(t *testing.T, admin *pgx.Conn, c fuzzCase) {
	t.Helper()
	resetT(t, admin)
	c.run(t, e.viaProxy(), "41")
	if rows := rowsOf(t, admin); len(rows) != 0 {
		t.Fatalf("stale session: text %q (settings %q, extended %v) wrote %q", c.text, c.settings, c.extended, rows)
	}
}

// checkDifferential: with a fresh token the proxy refuses, or matches the
// server straight.
func (e *env) checkDifferential(t *testing.T, admin *pgx.Conn, c fuzzCase) {
	t.Helper()
	resetT(t, admin)
	for _, r := range []string{"acct/1", "acct/2"} {
		if _, err := fencestore.Set(t.Context(), fencestorepgx.Querier{Conn: admin}, r, 100); err != nil {
			t.Fatal(err)
		}
	}
	viaErr := c.run(t, e.viaProxy(), "200")
	via := rowsOf(t, admin)
	if viaErr != nil && strings.HasPrefix(viaErr.Message, "fenceproxy:") {
		return // refused by the proxy: allowed
	}
	if len(via) > 0 && harness.Mark(t, e.direct(), "acct/1") != 200 && harness.Mark(t, e.direct(), "acct/2") != 200 {
		t.Fatalf("text %q wrote %q through the proxy without a check", c.text, via)
	}
	resetT(t, admin)
	directErr := c.run(t, e.direct(), "200")
	direct := rowsOf(t, admin)
	if code(viaErr) != code(directErr) || !slices.Equal(via, direct) {
		t.Fatalf("text %q (settings %q, extended %v):\nproxy:  %s %q\ndirect: %s %q",
			c.text, c.settings, c.extended, describe(viaErr), via, describe(directErr), direct)
	}
}

func code(pe *pgconn.PgError) string {
	if pe == nil {
		return ""
	}
	return pe.Code
}

func describe(pe *pgconn.PgError) string {
	if pe == nil {
		return "ok"
	}
	return pe.Code + " " + pe.Message
}

func resetT(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	if _, err := admin.Exec(t.Context(), "TRUNCATE t"); err != nil {
		t.Fatal(err)
	}
}

// rowsOf returns t's values, sorted.
func rowsOf(t *testing.T, admin *pgx.Conn) []string {
	t.Helper()
	rows, err := admin.Query(t.Context(), "SELECT v FROM t ORDER BY v")
	if err != nil {
		t.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// diffSeeds are the attacks of the fail-closed issue, spelled in pieces,
// plus a few plain cases. Byte 0: settings (bit 0 scs off, bits 1-3
// encoding, bit 4 extended); then piece indexes.
var diffSeeds = [][]byte{
	seed(0, "INSERT INTO t VALUES ('w')"),
	seed(0x10, "INSERT INTO t VALUES ('w')"),
	// Class 1: the proxy's parser fails where the server reads fine.
	seed(1, "SELECT ", "'", "x", `\`, "'", "x", "'", "; ", "INSERT INTO t VALUES ('w')"),
	seed(2, "SELECT ", "E'", "\x95\x5c", "'", "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, "SELECT ", "x", "; ", "INSERT INTO t VALUES ('w')"),
	seed(1, "SELECT ", "'", "x", `\`, "'", "; ", "INSERT INTO t VALUES ('w')", "; ", "--", "'"),
	seed(1, "INSERT INTO t VALUES ('", "x", `\`, "'", "; ", "INSERT INTO t VALUES ('w')", "')"),
	seed(2, "INSERT INTO t VALUES ('", "\x95\x5c", "')", "; ", "INSERT INTO t VALUES ('w')"),
	seed(2, "SELECT ", "'", "\x95\x5c", "'", "; ", "INSERT INTO t VALUES ('w')", "; ", "--", "'"),
	seed(0, "SET standard_conforming_strings = off", "; ", "SELECT ", "'", `\`, "'", "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, "E'", "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, "SELECT ", "E'", `\`, "'", "; ", "INSERT INTO t VALUES ('w')", "; ", "--", "'"),
	seed(0, "SELECT ", "$$", "; ", "INSERT INTO t VALUES ('w')", "$$", "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, "/*", "/*", "*/", "; ", "INSERT INTO t VALUES ('w')", "*/", "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, "BEGIN", "; ", "INSERT INTO t VALUES ('w')", "; ", "COMMIT", "; ", "UPDATE t SET v = v || 'u'"),
	seed(0, "BEGIN", "; ", "SAVEPOINT s", "; ", "INSERT INTO t VALUES ('w')", "; ", "ROLLBACK TO s", "; ", "COMMIT"),
	seed(0, "DO $$BEGIN INSERT INTO t VALUES ('do'); END$$"),
	seed(0, "PREPARE p AS INSERT INTO t VALUES ('p')", "; ", "EXECUTE p", "; ", "DEALLOCATE p"),
	seed(0, "WITH w AS (INSERT INTO t VALUES ('cte') RETURNING v) SELECT * FROM w"),
	seed(0, "SET lock.resource = 'acct/2'", "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, "/* fencing_token=", "resource=acct/2 */", " ", "INSERT INTO t VALUES ('w')"),
	seed(0, "START TRANSACTION READ ONLY", "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, "U&'", `\0041`, "'", "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, "SET client_encoding = 'SJIS'", "; ", "SELECT ", "'", "\x95\x5c", "'", "; ", "INSERT INTO t VALUES ('w')"),
	seed(8, "SELECT ", "'", "\xa4\x5c", "'", "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, "SET lock.fencing_token = 7", "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, "SELECT set_config('lock.fencing_token', '9', false)", "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, `SET U&"lock".U&"\0066encing_token" = 7`, "; ", "INSERT INTO t VALUES ('w')"),
	seed(0, "BEGIN", "; ", "SET LOCAL lock.fencing_token = '9'", "; ", "INSERT INTO t VALUES ('w')", "; ", "COMMIT"),
	seed(0, "/* fencing_token=3 */", " ", "INSERT INTO t VALUES ('w')"),
}

// seed spells a case as a settings byte and pieces of diffPieces or
// tokenPieces.
func seed(settings byte, pieces ...string) []byte {
	out := []byte{settings}
	for _, p := range pieces {
		if i := slices.Index(diffPieces, p); i >= 0 {
			out = append(out, byte(i))
		} else if i := slices.Index(tokenPieces, p); i >= 0 {
			out = append(out, 0xc0|byte(i))
		} else {
			panic("no piece " + p)
		}
	}
	return out
}
