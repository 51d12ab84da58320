package fencestore

import "context"

// Querier is the little of a database session that fencestore needs. cmd/fenceproxy
// implements it over a pgx connection; fencestore itself depends on no driver.
//
// A Querier must be one session (one connection), not a pool: Migrate runs
// BEGIN, its statements and COMMIT through it and relies on them reaching the
// same server backend. Errors that come from the server should expose their
// SQLSTATE through a method SQLState() string (pgx's *pgconn.PgError does), so
// that fencestore can tell "not installed" from other failures.
type Querier interface {
	// Exec runs sql, one statement, with args as parameters ($1, $2, …)
	// and discards any rows.
	Exec(ctx context.Context, sql string, args ...any) error
	// QueryRow runs sql, which returns exactly one row, and returns that row.
	QueryRow(ctx context.Context, sql string, args ...any) Row
}

// Row is one result row. Scan converts its columns, in order, into dest; fencestore
// scans only into *string, *int64 and *bool.
type Row interface {
	Scan(dest ...any) error
}
