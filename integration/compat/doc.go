// Package compat runs client libraries' own test suites straight against
// PostgreSQL and through fenceproxy, and compares the sets of tests that
// pass: pgx's (the version in this module's go.mod, from the module cache)
// and psycopg 3.1.7's (vendored in testdata/psycopg, run with Debian's
// python3-psycopg); pgx's also through the proxy in transaction pool mode.
// It is built only with the tag compat (make compat): the suites take
// minutes.
package compat
