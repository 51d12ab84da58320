// Package demo is `fenceproxy demo`: the whole system on one machine with no
// set-up, playing the pause-and-takeover story that fencing exists for.
//
// It owns the demo stack — an embedded etcd (server/v3/embed; with the test
// harness, the only importer of the etcd server), a throwaway PostgreSQL from
// the local server binaries (internal/pgcluster), the proxy in-process
// (internal/pgwire) and the fence store (internal/fencestore) — and the story's
// orchestration. The two workers are separate processes (the fenceproxy
// binary's hidden demo-worker command, whose body is Worker) so that one can
// really be frozen with SIGSTOP while it holds its lock.
//
// Run stops everything it started and removes its temporary directory on
// every path, including an interrupt (ctx cancelled). Errors name what is
// missing: pgcluster.ErrNoBinaries says which package to install.
package demo
