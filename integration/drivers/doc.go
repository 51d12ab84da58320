// Package drivers runs the driver matrix: seven PostgreSQL client drivers —
// psql, pgx, lib/pq, psycopg 3, asyncpg, node-postgres and pgjdbc — used
// through fenceproxy as their users would. Each carries a fencing token by
// SET, by comment (plain and sqlcommenter), by startup options and, where the
// driver can, as separate startup parameters; on its prepared-statement path;
// and by SET LOCAL in a transaction. A stale token must come back as SQLSTATE
// 55Z01 through the driver's own error API, the connection must stay usable,
// and the database — not the client — shows what landed.
//
// The non-Go drivers are small programs in testdata, installed by
// scripts/install-test-deps.sh; a missing one fails the test and names what
// to install. This package also measures connection set-up latency
// (BenchmarkConnect).
package drivers
