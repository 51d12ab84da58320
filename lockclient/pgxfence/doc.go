// Package pgxfence begins pgx transactions that carry a lock handle's
// fencing token, so that Go code writing through fenceproxy (or to a table
// guarded by `fenceproxy protect`) cannot forget it.
//
// # What it owns
//
// One statement: right after BEGIN, in the same transaction,
//
//	SELECT pg_catalog.set_config('lock.fencing_token', '<token>', true),
//	       pg_catalog.set_config('lock.resource', '<lock name>', true)
//
// which is SET LOCAL of both settings: they end with the transaction, so
// a pooled connection handed to other code afterwards carries no token
// (safe behind a transaction-mode pooler), and every statement of the
// transaction is checked under the handle's token. The values are literals
// (not parameters), the one form of set_config the proxy accepts as a
// hand-over without checking the previous token first.
//
// It depends on pgx and lockclient only; lockclient itself does not import
// pgx.
//
// # Place in the flow
//
// Application code calls [Begin] (or [Run]) with a *pgx.Conn, a
// *pgxpool.Pool or an open pgx.Tx (a savepoint) and a held
// *lockclient.Handle; the proxy refuses statements whose token is below the
// resource's high-water mark with SQLSTATE 55Z01.
//
// # Concurrency
//
// The functions are as safe for concurrent use as the Beginner given.
//
// # Errors
//
// A handle that is no longer held (released or lost) is refused before
// anything is sent, with an error wrapping lockclient.ErrLost. Database
// errors are pgx's: a stale token's refusal is a *pgconn.PgError with Code
// "55Z01".
package pgxfence
