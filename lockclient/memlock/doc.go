// Package memlock is an in-process lock service for lockclient: the same
// semantics as the etcd backend, no network, and switches that inject the
// failures a lock client must survive.
//
// # What it owns
//
// A [Server] holds, per lock name, the current holder and a FIFO queue of
// waiters; fencing tokens come from one counter, so they grow strictly across
// all grants. Leases expire on the server after their TTL unless renewed.
// Each client talks to the server through its own [Conn], which implements
// lockclient.Backend and carries the fault switches:
//
//   - [Conn.SetPartitioned]: every call fails with [ErrPartitioned], a
//     transport error, while the server goes on expiring leases;
//   - [Conn.SetLatency]: every call is delayed before the server sees it;
//   - [Conn.Pause] and [Conn.Resume]: a stopped holder, whose calls block
//     (ignoring their contexts) while time goes on;
//   - [Conn.SetDeaf]: grants that never hear of their own loss, as with a
//     watch sitting on a stalled server.
//
// [Server.Revoke] drops a holder as another client revoking its lease would.
// [Conn.Calls], [Server.Holder], [Server.Waiters] and [Server.Wakeups] let
// tests see what happened. It must not be used as a real lock service: it
// knows nothing beyond one process.
//
// # Place in the flow
//
// lockclient.Client calls a Conn exactly as it calls the etcd backend. Tests
// and runnable examples use it, usually inside testing/synctest bubbles: it
// reads time only through package time and starts no goroutines of its own
// (lease expiry uses time.AfterFunc), so fake time drives it completely.
//
// # Concurrency
//
// Server and Conn are safe for concurrent use. A release wakes exactly one
// waiter, the oldest.
//
// # Errors
//
// Calls on a partitioned Conn return [ErrPartitioned]; Acquire and Holder
// wrap it in a [lockclient.UnavailableError], as a real backend reports a
// service it could not reach. A renewal or a release
// of a lease the server dropped returns an error wrapping lockclient.ErrLost; an Acquire
// without waiting on a held name returns one wrapping
// lockclient.ErrNotAcquired; a TTL below [MinTTL] is an error wrapping
// lockclient.ErrInvalidOption.
//
// It emits no metrics and no logs.
package memlock
