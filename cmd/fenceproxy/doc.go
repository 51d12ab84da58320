// Command fenceproxy is a PostgreSQL wire-protocol proxy that checks fencing
// tokens in the same transaction as the statements they protect.
//
// It owns flags, subcommands, wiring and signals; protocol and policy logic
// live in the packages it calls.
package main
