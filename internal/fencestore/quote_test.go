package fencestore_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/jackc/pgx/v5"
)

// tricky are strings the literal quoting must carry unchanged.
var tricky = []string{
	"orders/42", "", "'", "''", "it's", `\`, `a\`, `\'`, `'\`, `\\'; DROP TABLE fence.hwm; --`,
	"100%", "%s %d %%", "ünïcødé ✓ 日本語 🦀", "$", "$$", "$q$", "x$q", "$q", "q$", "$q$\\",
	"$q1$\\$q$", `$q\`, "\\$q", "$fence$", "$fence", "a$fence$b\\", "$fence$'$q$\\",
	`\x$q`, `\$q1$$q$`, "line\nbreak\ttab\r", "\"quoted\"", "--", "/* c */", "E'x'", "U&'d'",
}

func TestAppendLiteralCall(t *testing.T) {
	got := string(fencestore.AppendLiteralCall([]byte("x; "), fencestore.CheckArgs{Token: "42", Resource: "it's", TableResource: `a\b`, RequireToken: true}))
	want := `x; CALL fence.check('42', 'it''s', $q$a\b$q$, '', true, false)`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestParams(t *testing.T) {
	p := fencestore.Params(fencestore.CheckArgs{Token: "42", DefaultResource: "d", Advance: true})
	want := []string{"42", "", "", "d", "false", "true"}
	if len(p) != len(want) {
		t.Fatalf("%d params", len(p))
	}
	for i := range p {
		if p[i] == nil || string(p[i]) != want[i] {
			t.Errorf("param %d = %q (nil %v), want %q", i+1, p[i], p[i] == nil, want[i])
		}
	}
	// The values do not overlap: appending to one leaves the others alone.
	_ = append(p[1], 'x')
	if string(p[2]) != "" || string(p[3]) != "d" {
		t.Errorf("params overlap: %q", p)
	}
}

// TestLiteralRoundTrip renders each tricky string into every argument of the
// literal call, runs it on the server under both settings of
// standard_conforming_strings, and compares what the server saw.
func TestLiteralRoundTrip(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	for _, scs := range []string{"on", "off"} {
		if _, err := c.Exec(t.Context(), "SET standard_conforming_strings = "+scs); err != nil {
			t.Fatal(err)
		}
		for _, s := range tricky {
			t.Run("scs="+scs+"/"+strconv.Quote(s), func(t *testing.T) { roundTrip(t, c, s) })
		}
	}
}

func FuzzLiteralRoundTrip(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	pg := newStore(f).super(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // not a query text: the server rejects invalid UTF-8 before parsing
		}
		roundTrip(t, pg, s)
	})
}

// roundTrip checks that s reaches fence.check unchanged as each argument.
func roundTrip(t *testing.T, c *pgx.Conn, s string) {
	t.Helper()
	ctx := t.Context()
	if strings.IndexByte(s, 0) >= 0 {
		err := callLiteral(ctx, c, fencestore.CheckArgs{Resource: s})
		if code, msg := pgErr(t, err); code != "22023" || msg != "invalid fencing token or resource: contains a NUL byte" {
			t.Errorf("NUL: %s %q", code, msg)
		}
		return
	}
	if s != "" {
		err := inTxRollback(ctx, c, func() error {
			if err := callLiteral(ctx, c, fencestore.CheckArgs{Token: "5", DefaultResource: s, Advance: true}); err != nil {
				return err
			}
			var got string
			if err := c.QueryRow(ctx, "SELECT resource FROM fence.hwm").Scan(&got); err != nil {
				return err
			}
			if got != s {
				t.Errorf("resource stored %q, want %q", got, s)
			}
			return nil
		})
		if err != nil {
			t.Errorf("as resource: %v", err)
		}
	}
	if _, err := strconv.ParseUint(s, 10, 64); err != nil && s != "" {
		err := callLiteral(ctx, c, fencestore.CheckArgs{Token: s, Resource: "r"})
		want := `invalid fencing token "` + s + `"`
		if code, msg := pgErr(t, err); code != "22023" || msg != want {
			t.Errorf("as token: %s %q, want %q", code, msg, want)
		}
	}
	err := callLiteral(ctx, c, fencestore.CheckArgs{TableResource: s, Resource: "other", RequireToken: true})
	want := `fencing token required for resource "` + s + `"`
	if s == "" {
		want = `fencing token required for resource "other"`
	}
	if code, msg := pgErr(t, err); code != "55Z02" || msg != want {
		t.Errorf("as table resource: %s %q, want %q", code, msg, want)
	}
}

// inTxRollback runs f in a transaction that it then rolls back.
func inTxRollback(ctx context.Context, c *pgx.Conn, f func() error) error {
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	defer c.Exec(ctx, "ROLLBACK")
	return f()
}

func TestAppendRaise(t *testing.T) {
	db := newDB(t)
	c := db.super(t)
	ctx := t.Context()
	msgs := append([]string{"nul \x00 byte"}, tricky...)
	for _, scs := range []string{"on", "off"} {
		if _, err := c.Exec(ctx, "SET standard_conforming_strings = "+scs); err != nil {
			t.Fatal(err)
		}
		for _, msg := range msgs {
			t.Run("scs="+scs+"/"+strconv.Quote(msg), func(t *testing.T) {
				sql := fencestore.AppendRaise(nil, "22023", msg)
				if _, err := c.Exec(ctx, "BEGIN"); err != nil {
					t.Fatal(err)
				}
				_, err := c.PgConn().Exec(ctx, string(sql)).ReadAll()
				if s := c.PgConn().TxStatus(); s != 'E' {
					t.Errorf("transaction status %c after the raise, want E (failed)", s)
				}
				if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
					t.Fatal(err)
				}
				want := strings.ReplaceAll(msg, "\x00", "\uFFFD")
				if code, got := pgErr(t, err); code != "22023" || got != want {
					t.Errorf("server raised %s %q, want 22023 %q\nSQL: %s", code, got, want, sql)
				}
			})
		}
	}
	t.Run("code", func(t *testing.T) {
		_, err := c.PgConn().Exec(ctx, string(fencestore.AppendRaise(nil, fencestore.CodeStaleToken, "m"))).ReadAll()
		if code, _ := pgErr(t, err); code != "55Z01" {
			t.Errorf("code %s", code)
		}
	})
	t.Run("appends", func(t *testing.T) {
		got := fencestore.AppendRaise([]byte("SELECT 1; "), "22023", "x")
		if !bytes.HasPrefix(got, []byte("SELECT 1; DO $fence$BEGIN RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'x'; END$fence$")) {
			t.Errorf("%s", got)
		}
	})
}
