// Command fenceproxy is a PostgreSQL wire-protocol proxy that checks fencing
// tokens in the same transaction as the statements they protect.
//
// It owns flags, subcommands, wiring and signals; protocol and policy logic
// live in the packages it calls. Signals for `serve`: SIGTERM and SIGINT
// start a graceful shutdown bounded by shutdown_timeout (exit 0); SIGHUP
// re-reads the TLS certificate and key.
package main
