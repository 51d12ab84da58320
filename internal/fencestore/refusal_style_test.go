package fencestore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestRefusalsCarryDetailAndHint: every refusal of fence.check and of the
// triggers on fence.hwm is a short message (one clause, the names and
// numbers in it, which the proxy's refusal log reads) with a DETAIL that
// says what happened and a HINT that says what to do, in PostgreSQL's
// style; 55Z01 keeps its documented message.
func TestRefusalsCarryDetailAndHint(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	ctx := t.Context()
	setMark(t, c, "r", 42)
	if err := fencestore.SetCeiling(ctx, session{c}, 1000); err != nil {
		t.Fatal(err)
	}
	adv := func(tok, res string) fencestore.CheckArgs {
		return fencestore.CheckArgs{Token: tok, Resource: res, Advance: true}
	}
	cases := []struct {
		name, code, msg string
		run             func() error
		want            fencestore.Refusal // what RefusalFields reads from the message
	}{
		{"stale", "55Z01", `stale fencing token 41 for resource "r": high-water mark is 42`,
			func() error { return call(ctx, c, adv("41", "r")) }, fencestore.Refusal{Resource: "r", Token: "41", Mark: "42"}},
		{"token required", "55Z02", `fencing token required for resource "r"`,
			func() error {
				return call(ctx, c, fencestore.CheckArgs{TableResource: "r", RequireToken: true, Advance: true})
			}, fencestore.Refusal{Resource: "r"}},
		{"invalid", "22023", `invalid fencing token "4x"`,
			func() error { return call(ctx, c, adv("4x", "r")) }, fencestore.Refusal{Token: "4x"}},
		{"no resource", "22023", `fencing token 43 has no resource`,
			func() error { return call(ctx, c, adv("43", "")) }, fencestore.Refusal{Token: "43"}},
		{"above ceiling", "22023", `fencing token 2000 for resource "r" is above the token ceiling 1000`,
			func() error { return call(ctx, c, adv("2000", "r")) }, fencestore.Refusal{Resource: "r", Token: "2000"}},
		{"lowering", fencestore.CodeMarkLowered, `DELETE on fence.hwm refused: high-water marks never go down`,
			func() error { _, err := c.Exec(ctx, "DELETE FROM fence.hwm"); return err }, fencestore.Refusal{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := inTx(ctx, c, "BEGIN", tc.run)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want a server error", err)
			}
			if pe.Code != tc.code || pe.Message != tc.msg {
				t.Errorf("got %s %q, want %s %q", pe.Code, pe.Message, tc.code, tc.msg)
			}
			if strings.Contains(pe.Message, ";") || strings.HasSuffix(pe.Message, ".") {
				t.Errorf("message %q: want one clause, no period", pe.Message)
			}
			if !sentence(pe.Detail) || !sentence(pe.Hint) {
				t.Errorf("DETAIL %q, HINT %q: want a sentence each", pe.Detail, pe.Hint)
			}
			if got := fencestore.RefusalFields(pe.Message); got != tc.want {
				t.Errorf("RefusalFields(%q) = %+v, want %+v", pe.Message, got, tc.want)
			}
		})
	}
}

// sentence reports whether s is a capitalised sentence with a full stop,
// as PostgreSQL writes DETAIL and HINT.
func sentence(s string) bool {
	return s != "" && strings.ToUpper(s[:1]) == s[:1] && strings.HasSuffix(s, ".")
}
