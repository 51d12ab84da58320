// Package deptest holds the tests that keep the module's shape: the import
// graph of docs/design.md (data flows pgwire → gate → fencestore, never back; lockclient
// imports nothing internal; the etcd server only in the test harness and the
// demo) and one doc.go per package holding its package comment.
//
// It has no production code; `go test ./internal/deptest` runs `go list`.
package deptest
