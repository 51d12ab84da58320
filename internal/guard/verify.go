package guard

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
)

// Verification is what Verify found.
type Verification struct {
	Problems []string // the installed guard does not match the config
	Notes    []string // weaker than it could be (no event triggers)
}

// OK reports whether there are no problems.
func (v Verification) OK() bool { return len(v.Problems) == 0 }

// Verify compares the guard installed in the database with entries, without
// changing anything: every entry names a table, every such table is in the
// registry under its resource and nothing else is, and every guarded
// relation (partitions, children and ancestors included) has its trigger.
// q must be a session outside a transaction. An error means the database
// could not be asked.
func Verify(ctx context.Context, q fencestore.Querier, entries []Entry) (Verification, error) {
	var v Verification
	problem := func(format string, args ...any) { v.Problems = append(v.Problems, fmt.Sprintf(format, args...)) }
	ver, err := fencestore.Version(ctx, q)
	if err != nil {
		return v, fmt.Errorf("verify: read the fence store's version: %w", err)
	}
	if ver < guardVersion {
		if slices.ContainsFunc(entries, func(e Entry) bool { return !e.Unguarded }) {
			problem("the fence store is at version %d; the database guard needs version %d: run fenceproxy migrate, then fenceproxy protect", ver, guardVersion)
		}
		return v, nil
	}
	var tables []table
	for _, e := range entries {
		ts, err := resolve(ctx, q, e)
		if errors.Is(err, errNoTable) || err != nil && e.Where != "" && !isQueryErr(err) {
			problem("%v", err)
			continue
		}
		if err != nil {
			return v, err
		}
		tables = append(tables, guarded(ts)...)
	}
	if err := compareRegistry(ctx, q, tables, problem); err != nil {
		return v, err
	}
	if err := staleTriggers(ctx, q, problem); err != nil {
		return v, err
	}
	if err := guardFunction(ctx, q, problem); err != nil {
		return v, err
	}
	var ok bool
	if err := q.QueryRow(ctx, eventTriggersOK, fencestore.DDLEventTrigger, fencestore.DropEventTrigger, fencestore.StartEventTrigger).Scan(&ok); err != nil {
		return v, fmt.Errorf("verify guard: read event triggers: %w", err)
	}
	if !ok && len(tables) > 0 {
		v.Notes = append(v.Notes, "the event triggers "+fencestore.DDLEventTrigger+", "+fencestore.DropEventTrigger+" and "+fencestore.StartEventTrigger+
			" are missing, disabled or narrowed: DDL on protected tables is not refused and new partitions are not guarded (run fenceproxy protect as a superuser)")
	}
	return v, nil
}

// compareRegistry checks the registry's configured rows against tables.
func compareRegistry(ctx context.Context, q fencestore.Querier, tables []table, problem func(string, ...any)) error {
	var oids, resources, names []string
	err := q.QueryRow(ctx, `SELECT COALESCE(pg_catalog.array_agg(p.relid::text ORDER BY p.relid), '{}'),
		COALESCE(pg_catalog.array_agg(p.resource ORDER BY p.relid), '{}'),
		COALESCE(pg_catalog.array_agg(COALESCE(p.relid::pg_catalog.regclass::text, p.configured) ORDER BY p.relid), '{}')
		FROM fence.protected AS p WHERE p.resource IS NOT NULL`).Scan(&oids, &resources, &names)
	if err != nil {
		return fmt.Errorf("verify guard: read fence.protected: %w", err)
	}
	installed := map[string]string{}
	for i, o := range oids {
		installed[o] = resources[i]
	}
	want := map[string]bool{}
	for _, t := range tables {
		want[t.oid] = true
		switch r, ok := installed[t.oid]; {
		case !ok:
			problem("%s: table %s is not protected in the database: run fenceproxy protect", t.where, t.name)
		case r != t.resource:
			problem("%s: table %s is protected under resource %q, the config says %q: run fenceproxy protect", t.where, t.name, r, t.resource)
		}
	}
	for i, o := range oids {
		if !want[o] {
			problem("table %s is protected in the database (resource %q) but not by the config: run fenceproxy protect", names[i], resources[i])
		}
	}
	return nil
}

// staleTriggers asks fence.sync, in a transaction it rolls back, what it
// would change.
func staleTriggers(ctx context.Context, q fencestore.Querier, problem func(string, ...any)) error {
	if err := q.Exec(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("verify guard: %w", err)
	}
	defer q.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	var ddl []string
	err := q.QueryRow(ctx, "SELECT COALESCE(pg_catalog.array_agg(s), '{}') FROM fence.sync(false) AS s").Scan(&ddl)
	if err != nil {
		return fmt.Errorf("verify guard: %w", err)
	}
	for _, s := range ddl {
		problem("guard trigger missing or out of date; fenceproxy protect would run: %s", s)
	}
	return nil
}

// guardFunction checks that fence.guard is one of its two implementations
// (a trigger that calls any other function under that name guards
// nothing), and, when the role is a superuser, that the server can load
// the C guard's library: without it every write to a protected table
// fails.
func guardFunction(ctx context.Context, q fencestore.Querier, problem func(string, ...any)) error {
	var impl string
	var super bool
	if err := q.QueryRow(ctx, fencestore.GuardImplQuery).Scan(&impl, &super); err != nil {
		return fmt.Errorf("verify guard: read fence.guard: %w", err)
	}
	switch {
	case impl == "other":
		problem("fence.guard is neither the PL/pgSQL body of this version nor the C guard: the guard triggers cannot be trusted; run fenceproxy protect")
	case impl == "c" && super:
		if err := q.Exec(ctx, "SELECT pg_catalog.fmgr_c_validator('fence.guard()'::pg_catalog.regprocedure)"); err != nil {
			if !isQueryErr(err) {
				return fmt.Errorf("verify guard: load the C guard: %w", err)
			}
			problem("fence.guard is the C guard, but the server cannot load it (%v): every write to a protected table fails; install ext/fence_guard on this server, or run fenceproxy protect --guard plpgsql", err)
		}
	}
	return nil
}

// isQueryErr reports whether err came from asking the server (as opposed
// to a name that resolved to nothing or to a non-table).
func isQueryErr(err error) bool {
	var s interface{ SQLState() string }
	return errors.As(err, &s)
}
