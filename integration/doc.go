// Package integration holds the end-to-end tests: fenceproxy between real
// client programs (pgx, psql, pgbench) and a real PostgreSQL, and lockclient
// against a real etcd. The servers are started by package harness; a missing
// prerequisite fails the run and says what to install. Nothing imports this
// package.
//
// The test files are named by what they protect:
//
//   - fence_test.go, fence_property_test.go, isolation_test.go: the fencing
//     story (takeover, equal tokens, read-only checks, isolation levels).
//   - token_sources_test.go, handover_test.go, startup_cancel_test.go,
//     probe_test.go: where a token comes from (comments, settings, startup,
//     role defaults, the hand-over) and how the proxy learns of it.
//   - settings_lexing_test.go, encodings_test.go: text read as the server
//     reads it, under its settings and client_encoding.
//   - transactions_test.go, extended_pipeline_test.go,
//     prepared_statements_test.go, cursors_portals_test.go, copy_test.go,
//     fencing_*_test.go: checks by protocol path.
//   - table_filter_test.go, guard_test.go, guard_ddl_test.go: protected
//     tables, by the proxy's table filter and by the database guard.
//   - fence_store_test.go, failclosed_test.go: the store, and failing
//     closed in general.
//   - relay_loop_test.go, proxy_*_test.go, shutdown_test.go, tls_test.go,
//     transparency_test.go: the relay, its inputs, drains, TLS, and what a
//     driver sees.
//   - session_model_diff_test.go, fuzz_diff_test.go: the same sequences
//     through the proxy and straight to PostgreSQL, compared.
//   - cli_*_test.go, readme_test.go, lockclient_test.go, bench_*_test.go:
//     the command line, the README's commands, lockclient, benchmarks.
//
// rawconn_test.go holds the helpers for tests that speak the protocol
// themselves (wireConn) or use pgconn without a driver's encoding.
package integration
