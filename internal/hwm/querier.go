package hwm

import "context"

// Querier is the little of a database session that hwm needs. cmd/fenceproxy
// implements it over a pgx connection; hwm itself depends on no driver.
//
// A Querier must be one session (one connection), not a pool: Migrate runs
// BEGIN, its statements and COMMIT through it and relies on them reaching the
// same server backend. Errors that come from the server should expose their
// SQLSTATE through a method SQLState() string (pgx's *pgconn.PgError does), so
// that hwm can tell "not installed" from other failures.
type Querier interface {
	// Exec runs sql, one statement, with args as parameters ($1, $2, …)
	// and discards any rows.
	Exec(ctx context.Context, sql string, args ...any) error
	// QueryRow runs sql, which returns exactly one row, and returns that row.
	QueryRow(ctx context.Context, sql string, args ...any) Row
}

// Row is one result row. Scan converts its columns, in order, into dest; hwm
// scans only into *string, *int64 and *bool.
type Row interface {
	Scan(dest ...any) error
}
