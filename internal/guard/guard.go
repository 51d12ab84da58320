package guard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
)

// Entry is one configured table to protect.
type Entry struct {
	Schema   string // "" = a table of that name in any schema
	Name     string
	Resource string
	Where    string // "file:line", for errors
	// Unguarded is a table with require_token: false: its name must match
	// a table, but it gets no trigger.
	Unguarded bool
}

// protectLockKey is the transaction-level advisory lock that serializes
// protect runs on one database (an arbitrary constant, distinct from
// migrate's).
const protectLockKey int64 = 7378422919232070000

// guardVersion is the fence store version whose guard routines this binary
// installs and verifies (5: fence.ddl_start for the ddl_command_start event
// trigger, and DDL on the types, functions and sequences a protected table
// uses needs a check; 4: CREATE TRIGGER on a protected table needs one).
const guardVersion = 5

func (e Entry) String() string {
	if e.Schema == "" {
		return quoteIdent(e.Name)
	}
	return quoteIdent(e.Schema) + "." + quoteIdent(e.Name)
}

// Options change what Protect does.
type Options struct {
	DryRun bool   // run it all in a transaction, report the SQL, roll back
	Remove bool   // take the guard out: registry, triggers, event triggers
	Guard  string // fence.guard's implementation: GuardAuto, GuardC or GuardPLpgSQL
}

// Report says what Protect did, or would do.
type Report struct {
	SQL   []string // the statements, in order
	Notes []string // what could not be done, one sentence each
	Info  []string // what it chose and why (fence.guard's implementation), for protect --verbose
}

// Protect makes the guard match entries (idempotent: a second run changes
// nothing), or takes it out with Options.Remove. q must be a session
// outside a transaction, as a role that owns the fence store (or a
// superuser) and may create triggers on the tables. A name that matches no
// table is an error naming its Where, and nothing changes.
func Protect(ctx context.Context, q fencestore.Querier, entries []Entry, opts Options) (rep Report, err error) {
	if err := q.Exec(ctx, "BEGIN"); err != nil {
		return Report{}, fmt.Errorf("protect: %w", err)
	}
	defer func() {
		if err != nil || opts.DryRun {
			q.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if err := prepare(ctx, q); err != nil {
		return Report{}, err
	}
	r := &runner{q: q}
	if opts.Remove {
		err = r.remove(ctx)
	} else {
		err = r.install(ctx, entries, opts.Guard)
	}
	if err != nil {
		return Report{}, err
	}
	if !opts.DryRun {
		if err := q.Exec(ctx, "COMMIT"); err != nil {
			return Report{}, fmt.Errorf("protect: commit: %w", err)
		}
	}
	return r.rep, nil
}

// prepare pins search_path, serializes protect runs and checks the store.
func prepare(ctx context.Context, q fencestore.Querier) error {
	for _, s := range []string{
		"SET LOCAL search_path = pg_catalog, pg_temp",
		"SELECT pg_catalog.pg_advisory_xact_lock(" + strconv.FormatInt(protectLockKey, 10) + ")",
	} {
		if err := q.Exec(ctx, s); err != nil {
			return fmt.Errorf("protect: %w", err)
		}
	}
	v, err := fencestore.Version(ctx, q)
	if err != nil {
		return fmt.Errorf("protect: read the fence store's version: %w", err)
	}
	if v < guardVersion {
		return fmt.Errorf("protect: the fence store is at version %d; the guard needs version %d: run fenceproxy migrate first", v, guardVersion)
	}
	return nil
}

// runner runs and records statements.
type runner struct {
	q   fencestore.Querier
	rep Report
}

func (r *runner) exec(ctx context.Context, sql string, args ...any) error {
	if err := r.q.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("protect: %s: %w", firstLine(sql), err)
	}
	r.rep.SQL = append(r.rep.SQL, withArgs(sql, args))
	return nil
}

// change runs a DELETE or INSERT and records it only when it changed rows,
// so that a second run reports nothing.
func (r *runner) change(ctx context.Context, sql string, args ...any) error {
	var n int64
	if err := r.q.QueryRow(ctx, "WITH x AS ("+sql+" RETURNING 1) SELECT pg_catalog.count(*)::int8 FROM x", args...).Scan(&n); err != nil {
		return fmt.Errorf("protect: %s: %w", firstLine(sql), err)
	}
	if n > 0 {
		r.rep.SQL = append(r.rep.SQL, withArgs(sql, args))
	}
	return nil
}

func (r *runner) note(format string, args ...any) {
	r.rep.Notes = append(r.rep.Notes, fmt.Sprintf(format, args...))
}

func (r *runner) info(format string, args ...any) {
	r.rep.Info = append(r.rep.Info, fmt.Sprintf(format, args...))
}

// install writes the registry rows of entries, sets fence.guard's
// implementation (creating it when missing), syncs the triggers and
// creates the event triggers.
func (r *runner) install(ctx context.Context, entries []Entry, guardImpl string) error {
	all, err := resolveAll(ctx, r.q, entries)
	if err != nil {
		return err
	}
	tables := guarded(all)
	var oids []string
	for _, t := range tables {
		oids = append(oids, t.oid)
	}
	err = r.change(ctx, "DELETE FROM fence.protected WHERE resource IS NOT NULL AND NOT (relid = ANY ($1::oid[]))", "{"+strings.Join(oids, ",")+"}")
	if err != nil {
		return err
	}
	for _, t := range tables {
		err := r.change(ctx, `INSERT INTO fence.protected AS p (relid, resource, resources, configured) VALUES ($1::oid, $2, ARRAY[$2], $3)
	ON CONFLICT (relid) DO UPDATE SET resource = excluded.resource, resources = excluded.resources, configured = excluded.configured, updated_at = pg_catalog.now()
	WHERE (p.resource, p.configured) IS DISTINCT FROM (excluded.resource, excluded.configured)`, t.oid, t.resource, t.name)
		if err != nil {
			return err
		}
	}
	// fence.guard first: the triggers sync creates call it, and a
	// restore that could not create the C function leaves none.
	if err := r.implementation(ctx, guardImpl); err != nil {
		return err
	}
	if err := r.sync(ctx); err != nil {
		return err
	}
	return r.eventTriggers(ctx, len(tables) > 0)
}

// remove empties the registry, drops every guard trigger and the event
// triggers.
func (r *runner) remove(ctx context.Context) error {
	if err := r.change(ctx, "DELETE FROM fence.protected"); err != nil {
		return err
	}
	if err := r.sync(ctx); err != nil {
		return err
	}
	return r.eventTriggers(ctx, false)
}

// sync runs fence.sync and records the DDL it ran.
func (r *runner) sync(ctx context.Context) error {
	var ddl []string
	err := r.q.QueryRow(ctx, "SELECT COALESCE(pg_catalog.array_agg(s), '{}') FROM fence.sync(true) AS s").Scan(&ddl)
	if err != nil {
		return fmt.Errorf("protect: install the triggers: %w", err)
	}
	r.rep.SQL = append(r.rep.SQL, ddl...)
	return nil
}

// eventTriggers creates (want) or drops the three event triggers. They
// need a superuser; otherwise a note says what is missing.
func (r *runner) eventTriggers(ctx context.Context, want bool) error {
	var super bool
	var have int64
	err := r.q.QueryRow(ctx, `SELECT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = CURRENT_USER),
		(SELECT pg_catalog.count(*) FROM pg_catalog.pg_event_trigger WHERE evtname IN ($1, $2, $3))::int8`,
		fencestore.DDLEventTrigger, fencestore.DropEventTrigger, fencestore.StartEventTrigger).Scan(&super, &have)
	if err != nil {
		return fmt.Errorf("protect: read event triggers: %w", err)
	}
	if !super {
		if want {
			r.note("not a superuser: the event triggers that refuse DDL on protected tables and on what they use without a check (ALTER, DROP, RENAME, COMMENT, DROP SCHEMA … CASCADE, ALTER TYPE, CREATE OR REPLACE FUNCTION, … CONCURRENTLY, …) and guard new partitions were not installed; run fenceproxy protect as a superuser to add them")
		} else if have > 0 {
			r.note("not a superuser: the event triggers %s, %s and %s were left in place; drop them as a superuser", fencestore.DDLEventTrigger, fencestore.DropEventTrigger, fencestore.StartEventTrigger)
		}
		return nil
	}
	stmts := []string{
		"DROP EVENT TRIGGER IF EXISTS " + fencestore.DDLEventTrigger,
		"DROP EVENT TRIGGER IF EXISTS " + fencestore.DropEventTrigger,
		"DROP EVENT TRIGGER IF EXISTS " + fencestore.StartEventTrigger,
	}
	if want {
		if have == 3 {
			return r.enableEventTriggers(ctx)
		}
		stmts = append(stmts, createEventTriggers...)
	} else if have == 0 {
		return nil
	}
	for _, s := range stmts {
		if err := r.exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// enableEventTriggers re-enables the event triggers if someone disabled
// them, and makes sure they call the fence functions.
func (r *runner) enableEventTriggers(ctx context.Context) error {
	var ok bool
	err := r.q.QueryRow(ctx, eventTriggersOK, fencestore.DDLEventTrigger, fencestore.DropEventTrigger, fencestore.StartEventTrigger).Scan(&ok)
	if err != nil {
		return fmt.Errorf("protect: read event triggers: %w", err)
	}
	if ok {
		return nil
	}
	drop := []string{
		"DROP EVENT TRIGGER " + fencestore.DDLEventTrigger,
		"DROP EVENT TRIGGER " + fencestore.DropEventTrigger,
		"DROP EVENT TRIGGER " + fencestore.StartEventTrigger,
	}
	for _, s := range append(drop, createEventTriggers...) {
		if err := r.exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// createEventTriggers creates the guard's event triggers. They fire for
// every command tag (no WHEN TAG IN: a tag the server does not support,
// such as REINDEX before PostgreSQL 17, would be an error).
var createEventTriggers = []string{
	"CREATE EVENT TRIGGER " + fencestore.DDLEventTrigger + " ON ddl_command_end EXECUTE FUNCTION fence.ddl_guard()",
	"CREATE EVENT TRIGGER " + fencestore.DropEventTrigger + " ON sql_drop EXECUTE FUNCTION fence.drop_guard()",
	"CREATE EVENT TRIGGER " + fencestore.StartEventTrigger + " ON ddl_command_start EXECUTE FUNCTION fence.ddl_start()",
}

// eventTriggersOK is true when the three event triggers exist, are enabled,
// fire for every tag and call the fence functions on the right events.
const eventTriggersOK = `SELECT pg_catalog.count(*) = 3 FROM pg_catalog.pg_event_trigger AS e
	WHERE e.evtenabled IN ('O', 'A') AND e.evttags IS NULL
	AND ((e.evtname = $1 AND e.evtevent = 'ddl_command_end' AND e.evtfoid = 'fence.ddl_guard()'::pg_catalog.regprocedure)
	  OR (e.evtname = $2 AND e.evtevent = 'sql_drop' AND e.evtfoid = 'fence.drop_guard()'::pg_catalog.regprocedure)
	  OR (e.evtname = $3 AND e.evtevent = 'ddl_command_start' AND e.evtfoid = 'fence.ddl_start()'::pg_catalog.regprocedure))`

var errNoTable = errors.New("matches no table")

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// withArgs renders sql with its $n arguments as literals, for the report.
func withArgs(sql string, args []any) string {
	for i := len(args) - 1; i >= 0; i-- {
		sql = strings.ReplaceAll(sql, fmt.Sprintf("$%d", i+1), quoteLiteral(fmt.Sprint(args[i])))
	}
	return sql
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// guarded drops the tables that get no trigger.
func guarded(all []table) []table {
	var out []table
	for _, t := range all {
		if !t.unguarded {
			out = append(out, t)
		}
	}
	return out
}
