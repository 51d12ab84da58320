// Command fenceproxy is a PostgreSQL wire-protocol proxy that checks fencing
// tokens in the same transaction as the statements they protect.
//
// It owns flags, subcommands, wiring and signals; protocol and policy logic
// live in the packages it calls. Signals for `serve`: SIGTERM and SIGINT
// start a graceful shutdown bounded by shutdown_timeout (exit 0); a second
// one during it exits at once with 128 + the signal (signals.go); SIGHUP
// re-reads the whole configuration (reload.go). On metrics_listen it serves
// /metrics, /healthz, /readyz (health.go) and the admin view (admin.go).
// docs/operations.md is the operator's reference.
package main
