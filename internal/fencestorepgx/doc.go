// Package fencestorepgx adapts a pgx connection to fencestore.Querier, so that package fencestore
// depends on no driver while its callers (cmd/fenceproxy, the demo, the test
// harness) share one adapter.
//
// A Querier is one connection and, like it, not safe for concurrent use.
package fencestorepgx
