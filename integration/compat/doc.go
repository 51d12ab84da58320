// Package compat runs pgx's own test suite — the pgx version in this
// module's go.mod, from the module cache — straight against PostgreSQL and
// through fenceproxy, and compares the sets of tests that pass. It is built
// only with the tag compat (make compat): the suite takes minutes.
package compat
