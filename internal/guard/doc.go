// Package guard installs, removes and verifies the database guard of
// fenceproxy protect (docs/design.md "Fail closed", rule 8).
//
// # What it owns, and what it must not do
//
// guard owns the step from a config's protected tables to the database:
// resolving configured names to relations (a name that matches no table is
// an error naming where it was written), writing the registry rows of the
// configured tables in fence.protected, making the triggers follow
// (fence.sync), creating the event triggers when the role is a superuser,
// and comparing what is installed with a config (Verify, which serve runs
// with admin_dsn). The SQL that decides a write lives in the fence schema
// (internal/fencestore, migration 3): guard must not duplicate it, and like fencestore it
// knows no sessions, sockets or drivers; it takes an fencestore.Querier.
//
// # What the guard is
//
// A statement-level trigger fence_guard (BEFORE INSERT OR UPDATE OR DELETE
// OR TRUNCATE) on every protected table, each of its partitions and
// inheritance children, and its ancestors, calling fence.guard with the
// resources a write there needs. It refuses with 55Z02 unless the current
// transaction has passed an advancing fence check of each: the row of the
// resource's mark in fence.hwm is locked, updated or inserted by this
// transaction (fence.passed). Only the fence routines, the store's owner and
// superusers can lock or write that row, and ROLLBACK TO SAVEPOINT undoes it
// like any row lock. Event triggers (ddl_command_end, sql_drop) refuse DDL on
// a guarded relation without a check, also through its schema or the types,
// collations, functions and sequences it uses, and put the trigger on new
// partitions and children; a third (ddl_command_start) refuses commands that
// commit before they end (… CONCURRENTLY) on a guarded relation.
//
// fence.guard has two implementations that make the same decision: the
// PL/pgSQL body of the fence store's migration, and a C function
// (ext/fence_guard) about ten times cheaper per write statement. Protect
// chooses (Options.Guard, impl.go); Verify and fencestore.Status accept either.
//
// Statement-level, not row-level: a row-level PL/pgSQL trigger multiplies a
// COPY's time many times over; a statement trigger costs the same for one
// row or a million (docs/guard.md, "What it costs", has the measurements).
//
// # Concurrency
//
// Protect and Verify use one session, one call at a time. Protect runs in
// one transaction under an advisory lock, so concurrent runs on a database
// serialize; a failed run changes nothing.
package guard
