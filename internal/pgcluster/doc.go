// Package pgcluster starts and stops a throwaway PostgreSQL server from the
// local server binaries, for the integration tests and for `fenceproxy demo`.
//
// It owns finding the binaries (PG_BIN, `pg_config --bindir`, then the newest
// /usr/lib/postgresql/*/bin), initdb into a fresh temporary directory,
// starting the server on a free loopback port and removing everything again.
// initdb refuses to run as root, so when the caller is root the server runs as
// the unprivileged user "postgres" (or "nobody" where that user is missing).
// It must not be used for a real database: the clusters it makes trust every
// loopback connection unless told otherwise and may run with fsync off.
// Options.SSL turns ssl on with a given certificate and key, written into the
// data directory with mode 0600 and owned by the server's user, as the
// server demands.
//
// A Cluster is safe for concurrent use; Stop is idempotent.
//
// Errors: ErrNoBinaries (wrapped with what to install) when no server
// binaries are found.
package pgcluster
