package guard

import (
	"context"
	"errors"
	"fmt"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/sqlstate"
)

// Implementations of fence.guard (Options.Guard).
const (
	GuardAuto    = ""        // the C guard when the role is a superuser and the extension is installed
	GuardC       = "c"       // the C guard, or an error saying why not
	GuardPLpgSQL = "plpgsql" // the PL/pgSQL body of the fence store's migration
)

// cGuardHint says how to get the C guard's extension.
const cGuardHint = "install the extension fence_guard as root on the database server: make -C ext/fence_guard PG_CONFIG=/usr/lib/postgresql/NN/bin/pg_config install (needs postgresql-server-dev-NN; docs/guard.md)"

// implementation makes fence.guard the implementation mode asks for. The
// C guard needs a superuser and its extension installed in the server; in
// auto mode, without either, fence.guard is (or becomes again) PL/pgSQL,
// a note says why when it is the role, and Report.Info when it is the
// extension (an operator who does not want the C guard is not told on
// every run). A fence.guard that is neither is replaced in every mode (its
// owner may, without a superuser).
func (r *runner) implementation(ctx context.Context, mode string) error {
	var impl string
	var super bool
	if err := r.q.QueryRow(ctx, fencestore.GuardImplQuery).Scan(&impl, &super); err != nil {
		return fmt.Errorf("protect: read fence.guard: %w", err)
	}
	plpgsql := func() error {
		if impl == "plpgsql" {
			return nil
		}
		return r.exec(ctx, fencestore.PLpgSQLGuardSQL)
	}
	switch {
	case mode == GuardPLpgSQL:
		r.info("fence.guard is PL/pgSQL (--guard plpgsql)")
		return plpgsql()
	case mode != GuardAuto && mode != GuardC:
		return fmt.Errorf("protect: unknown guard implementation %q (want one of auto, c, plpgsql)", mode)
	case !super && mode == GuardC:
		return errors.New("protect: the C guard needs a superuser (only a superuser may create a C function): run fenceproxy protect --guard c as one")
	case !super:
		if impl == "c" {
			r.info("fence.guard is the C guard (left as it is: not a superuser)")
			return nil
		}
		r.note("not a superuser: fence.guard is PL/pgSQL; a superuser can install the cheaper C guard (fenceproxy protect --guard c, see docs/guard.md)")
		return plpgsql()
	}
	err := r.cGuard(ctx, impl)
	if libraryMissing(err) {
		if mode == GuardC {
			return fmt.Errorf("protect: the C guard's extension is not installed in the server, or is older than this fenceproxy (%v): %s", err, cGuardHint)
		}
		r.info("fence.guard is PL/pgSQL: the C guard's extension is not installed in the server, or is older than this fenceproxy (%v); for the cheaper C guard, %s", err, cGuardHint)
		return plpgsql()
	}
	if err != nil {
		return fmt.Errorf("protect: install the C guard: %w", err)
	}
	r.info("fence.guard is the C guard (extension %s, %s)", fencestore.CGuardExtension, fencestore.CGuardSymbol)
	return nil
}

// cGuard makes fence.guard the C guard, in a savepoint undone when the
// server refuses: it creates the extension when the database has none,
// then the function unless fence.guard (impl) is already the C guard.
func (r *runner) cGuard(ctx context.Context, impl string) error {
	var have bool
	err := r.q.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = $1)", fencestore.CGuardExtension).Scan(&have)
	if err != nil {
		return fmt.Errorf("protect: read extensions: %w", err)
	}
	var stmts []string
	if !have {
		stmts = append(stmts, fencestore.CGuardExtensionSQL)
	}
	if impl != "c" {
		stmts = append(stmts, fencestore.CGuardSQL)
	}
	if len(stmts) == 0 {
		return nil
	}
	return r.savepoint(ctx, stmts)
}

// libraryMissing reports whether err is the server saying the C guard's
// extension, library, or function is not there.
func libraryMissing(err error) bool {
	var s interface{ SQLState() string }
	return errors.As(err, &s) && (s.SQLState() == sqlstate.UndefinedFile || s.SQLState() == sqlstate.UndefinedFunction)
}

// savepoint runs stmts in a savepoint, undone when one fails; it records
// them when all succeed.
func (r *runner) savepoint(ctx context.Context, stmts []string) error {
	if err := r.q.Exec(ctx, "SAVEPOINT fence_guard_impl"); err != nil {
		return fmt.Errorf("protect: %w", err)
	}
	for _, sql := range stmts {
		if err := r.q.Exec(ctx, sql); err != nil {
			if rerr := r.q.Exec(ctx, "ROLLBACK TO SAVEPOINT fence_guard_impl"); rerr != nil {
				return fmt.Errorf("protect: %w", rerr)
			}
			return err
		}
	}
	r.rep.SQL = append(r.rep.SQL, stmts...)
	return r.q.Exec(ctx, "RELEASE SAVEPOINT fence_guard_impl")
}
