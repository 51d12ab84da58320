package guard_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/guard"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestGuardRefusalsCarryDetailAndHint: the database guard refuses in
// PostgreSQL's style, a short message naming the operation, the table and
// the resource (which the proxy's refusal log reads), a DETAIL and a HINT;
// the C guard raises exactly what the PL/pgSQL guard raises.
func TestGuardRefusalsCarryDetailAndHint(t *testing.T) {
	var got [2]pgconn.PgError
	for i, impl := range []string{guard.GuardPLpgSQL, guard.GuardC} {
		e := newEnv(t)
		e.impl = impl
		e.protect(t, guard.Options{})
		err := run(t, e.connect(t, e.app), "UPDATE jobs SET v = 1")
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: unfenced UPDATE: %v, want 55Z02", impl, err)
		}
		got[i] = *pe
		if pe.Code != "55Z02" || pe.Message != `fencing token required: UPDATE on public.jobs needs a fence check for resource "jobs"` ||
			pe.Detail == "" || pe.Hint == "" {
			t.Errorf("%s: %s %q DETAIL %q HINT %q", impl, pe.Code, pe.Message, pe.Detail, pe.Hint)
		}
		if f := fencestore.RefusalFields(pe.Message); f != (fencestore.Refusal{Resource: "jobs"}) {
			t.Errorf("%s: RefusalFields = %+v, want resource jobs", impl, f)
		}
		if impl == guard.GuardC {
			continue
		}
		// The event triggers' refusals (PL/pgSQL in both).
		super := e.connect(t, pgcluster.Superuser)
		for stmt, msg := range map[string]string{
			"ALTER TABLE jobs ADD COLUMN note text": `fencing token required: ALTER TABLE on protected table public.jobs needs a fence check for resource "jobs"`,
			"CREATE INDEX CONCURRENTLY ON jobs (v)": `fencing token required: CREATE INDEX … CONCURRENTLY on protected table public.jobs cannot be fenced for resource "jobs"`,
		} {
			err := run(t, super, stmt)
			if !errors.As(err, &pe) || pe.Code != "55Z02" || pe.Message != msg || pe.Detail == "" || pe.Hint == "" {
				t.Errorf("%s: %v (DETAIL %q HINT %q), want 55Z02 %q", stmt, err, pe.Detail, pe.Hint, msg)
			}
			if f := fencestore.RefusalFields(pe.Message); f != (fencestore.Refusal{Resource: "jobs"}) {
				t.Errorf("%s: RefusalFields = %+v, want resource jobs", stmt, f)
			}
		}
	}
	for _, s := range []string{got[0].Message, got[0].Detail, got[0].Hint} {
		if strings.Contains(s, "\n") {
			t.Errorf("%q: want one line", s)
		}
	}
	if got[0].Message != got[1].Message || got[0].Detail != got[1].Detail || got[0].Hint != got[1].Hint {
		t.Errorf("the implementations differ:\nplpgsql %q / %q / %q\nc       %q / %q / %q",
			got[0].Message, got[0].Detail, got[0].Hint, got[1].Message, got[1].Detail, got[1].Hint)
	}
}
