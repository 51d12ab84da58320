// Package fencestore is the fence store: the per-resource high-water marks of
// fencing tokens, kept in PostgreSQL in the same database as the data, and
// the SQL that checks and advances them.
//
// # What it owns, and what it must not do
//
// fencestore owns the schema fence and its versioned migrations (Migrate, Status),
// the procedure fence.check that does check-and-advance, the text of the
// statements that call it (CheckStatement, Params, AppendLiteralCall) or that
// raise an error in the client's transaction (AppendRaise), the mapping of
// their errors to what a client sees (ClientError), and the operator's reads
// and repairs of marks (List, Get, Set). It knows nothing about sessions,
// sockets or drivers: it must not import net, internal/pgwire, internal/gate
// or a PostgreSQL driver (a test says so). Where it needs a database it takes
// a Querier, which cmd/fenceproxy implements over pgx.
//
// # Place in the flow
//
// pgwire → gate → fencestore. The gate decides that a transaction must be fenced and
// asks fencestore for the SQL to inject before the client's first statement:
// CheckStatement with Params for the extended protocol (Parsed once per
// session under a reserved name), or AppendLiteralCall in the same Query
// message for the simple protocol. The server runs fence.check in the
// client's transaction; pgwire hides its CommandComplete "CALL". If it
// fails, gate passes the error through ClientError. For errors the proxy
// detects itself, gate injects AppendRaise, so that PostgreSQL aborts the
// transaction as for any failed statement. fencestore calls nothing back.
//
// # fence.check
//
//	CALL fence.check(p_token text, p_resource text, p_table_resource text,
//	                 p_default_resource text, p_require_token boolean, p_advance boolean)
//
// The token is p_token, else the setting lock.fencing_token (evaluated by the
// server, so SET, SET LOCAL, RESET, set_config and rollback all count as
// PostgreSQL says); the resource is the first non-empty of p_resource,
// lock.resource, p_table_resource, p_default_resource. With p_advance in a
// read-write transaction, a token at or above the mark becomes the mark and
// the row lock is held to commit, serializing the holders of one resource:
// under READ COMMITTED a lower token waiting behind a higher one is refused
// once that commits. Otherwise it only compares, writing nothing. It is
// SECURITY DEFINER with search_path pinned to pg_catalog, pg_temp, owned by
// the role that ran Migrate; members of the role fence_client (migration 3;
// before it, PUBLIC) may execute it, everyone may read fence.hwm, and only
// the owner writes it (docs/fence-store.md lists the grants).
//
// # The database guard (migrations 3 to 5)
//
// The routines behind fenceproxy protect (package guard installs them on
// tables): fence.guard, a statement-level trigger function that refuses a
// write (55Z02) unless this transaction has passed an advancing check of
// each resource in its arguments, decided from the mark row's xmin/xmax
// (fence.passed); the registry fence.protected and fence.refresh and
// fence.sync, which keep it and the triggers in step with partitions and
// inheritance; and the event trigger functions fence.ddl_guard and
// fence.drop_guard, which refuse DDL on guarded relations, and on the
// types, functions and sequences they use (fence.ddl_relations follows
// pg_depend, migration 5), without a check, and fence.ddl_start
// (migration 5), which refuses concurrent DDL on them before it commits.
//
// # Concurrency
//
// The functions keep no state; all may be called from any goroutine. A
// Querier is one session and is used by one call at a time. Migrate is safe
// to run concurrently on one database (an advisory lock serializes it).
// AppendLiteralCall and Params are on the hot path: the first appends to the
// caller's buffer without allocating unless it grows it; Params makes two
// allocations.
//
// # Errors
//
// Raised by fence.check, passed to the client unchanged:
//   - 55Z01 (CodeStaleToken): token below the mark, message
//     `stale fencing token 41 for resource "orders/42": high-water mark is 42`.
//     On the Go side, *StaleTokenError carries the same three facts.
//   - 55Z02 (CodeTokenRequired): no token for a resource with require_token.
//   - 22023 (CodeInvalidToken): a token that is not a positive 64-bit integer,
//     or a token with no resource.
//
// A store that is missing or not accessible to the role (SQLSTATE 3F000,
// 42P01, 42883, 42501 on the injected call) becomes 55Z03 (CodeNotInstalled)
// through ClientError, telling the operator to run "fenceproxy migrate"; the
// admin functions then return errors wrapping ErrNotInstalled. Get returns
// ErrNoMark for a resource without a mark.
//
// # Metrics and logs
//
// None: fencestore returns SQL and errors, and its callers count and log them.
package fencestore
