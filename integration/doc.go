// Package integration holds the end-to-end tests: fenceproxy between real
// client programs (pgx, psql, pgbench) and a real PostgreSQL, and lockclient
// against a real etcd. The servers are started by package harness; a missing
// prerequisite fails the run and says what to install. Nothing imports this
// package.
package integration
