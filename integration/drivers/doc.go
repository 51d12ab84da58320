// Package drivers runs the driver matrix: seven PostgreSQL client drivers —
// psql, pgx, lib/pq, psycopg 3, asyncpg, node-postgres and pgjdbc — used
// through fenceproxy as their users would. Each carries a fencing token by
// SET, by comment (plain and sqlcommenter), by startup options and, where the
// driver can, as separate startup parameters; on its prepared-statement path;
// and by SET LOCAL in a transaction. A stale token must come back as SQLSTATE
// 55Z01 through the driver's own error API, the connection must stay usable,
// and the database — not the client — shows what landed.
//
// TestDriverMatrixTransactionPool runs the same cases through a proxy in
// transaction pool mode, a pool of two server connections shared with two
// other clients, and again with every unit on a new server connection
// (server_lifetime of a nanosecond), so each driver's settings are restored
// and its named statements prepared again on other connections; psycopg
// also logs in with SCRAM-SHA-256. What transaction pooling refuses by
// design (SQL PREPARE, a session SET in the unit of asyncpg's unsynced
// prepare) must be refused as docs/drivers.md says; asyncpg's Pool, whose
// reset query ends with RESET ALL, must release its connection without an
// error in both modes.
//
// The stream cases (TestDriversStreamServerCursors) read a result of more
// than one batch through each driver's server-side cursors — SQL DECLARE and
// FETCH (psql, pgx, lib/pq, psycopg 3 and psycopg2 named cursors, SQLAlchemy
// stream_results over psycopg2) or a portal executed a few rows at a time
// (asyncpg, pg-cursor, pgjdbc's fetch size) — through the proxy and straight
// against PostgreSQL: with no token and with the current one the rows must
// be PostgreSQL's, all of them in order; a stale token must be refused with
// 55Z01. The driver programs run them when given the argument "stream".
//
// The non-Go drivers are small programs in testdata, installed by
// scripts/install-test-deps.sh; a missing one fails the test and names what
// to install. This package also measures connection set-up latency
// (BenchmarkConnect).
package drivers
