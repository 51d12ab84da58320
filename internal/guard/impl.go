package guard

import (
	"context"
	"errors"
	"fmt"

	"github.com/fenceproxy/fenceproxy/internal/hwm"
	"github.com/fenceproxy/fenceproxy/internal/sqlstate"
)

// Implementations of fence.guard (Options.Guard).
const (
	GuardAuto    = ""        // the C guard when the role is a superuser and the library is installed
	GuardC       = "c"       // the C guard, or an error saying why not
	GuardPLpgSQL = "plpgsql" // the PL/pgSQL body of the fence store's migration
)

// cGuardHint says how to get the C guard's library.
const cGuardHint = "build and install it as root on the database server: make -C ext/fence_guard PG_CONFIG=/usr/lib/postgresql/NN/bin/pg_config install (needs postgresql-server-dev-NN)"

// implementation makes fence.guard the implementation mode asks for. The
// C guard needs a superuser and its library in the server's $libdir; in
// auto mode, without either, fence.guard is (or becomes again) PL/pgSQL
// and a note says why. A fence.guard that is neither is replaced in every
// mode (its owner may, without a superuser).
func (r *runner) implementation(ctx context.Context, mode string) error {
	var impl string
	var super bool
	if err := r.q.QueryRow(ctx, hwm.GuardImplQuery).Scan(&impl, &super); err != nil {
		return fmt.Errorf("protect: read fence.guard: %w", err)
	}
	plpgsql := func() error {
		if impl == "plpgsql" {
			return nil
		}
		return r.exec(ctx, hwm.PLpgSQLGuardSQL)
	}
	switch {
	case mode == GuardPLpgSQL:
		return plpgsql()
	case mode != GuardAuto && mode != GuardC:
		return fmt.Errorf("protect: unknown guard implementation %q (want one of auto, c, plpgsql)", mode)
	case !super && mode == GuardC:
		return errors.New("protect: the C guard needs a superuser (only a superuser may create a C function): run fenceproxy protect --guard c as one")
	case !super:
		if impl == "c" {
			return nil
		}
		r.note("not a superuser: fence.guard is PL/pgSQL; a superuser can install the cheaper C guard (fenceproxy protect --guard c, see docs/guard.md)")
		return plpgsql()
	}
	err := r.savepoint(ctx, hwm.CGuardSQL, impl != "c")
	if libraryMissing(err) {
		if mode == GuardC {
			return fmt.Errorf("protect: the C guard's library is not installed in the server (%v): %s", err, cGuardHint)
		}
		r.note("the C guard's library is not installed in the server (%v), so fence.guard is PL/pgSQL; for the cheaper C guard, %s", err, cGuardHint)
		return plpgsql()
	}
	if err != nil {
		return fmt.Errorf("protect: install the C guard: %w", err)
	}
	return nil
}

// libraryMissing reports whether err is the server saying the C guard's
// library, or its function, is not there.
func libraryMissing(err error) bool {
	var s interface{ SQLState() string }
	return errors.As(err, &s) && (s.SQLState() == sqlstate.UndefinedFile || s.SQLState() == sqlstate.UndefinedFunction)
}

// savepoint runs sql in a savepoint, undone when it fails; it records sql
// when it succeeds and record is set.
func (r *runner) savepoint(ctx context.Context, sql string, record bool) error {
	if err := r.q.Exec(ctx, "SAVEPOINT fence_guard_impl"); err != nil {
		return fmt.Errorf("protect: %w", err)
	}
	if err := r.q.Exec(ctx, sql); err != nil {
		if rerr := r.q.Exec(ctx, "ROLLBACK TO SAVEPOINT fence_guard_impl"); rerr != nil {
			return fmt.Errorf("protect: %w", rerr)
		}
		return err
	}
	if record {
		r.rep.SQL = append(r.rep.SQL, sql)
	}
	return r.q.Exec(ctx, "RELEASE SAVEPOINT fence_guard_impl")
}
