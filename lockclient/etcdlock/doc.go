// Package etcdlock is the etcd backend of lockclient: a FIFO lock on etcd
// whose fencing token is the lock key's create revision.
//
// # What it owns
//
// The etcd side of a lock: keys, leases, queueing, watches. It is the only
// package of lockclient that imports the etcd client, and it imports no etcd
// server code. Pass a Backend to lockclient.New:
//
//	cli, _ := clientv3.New(clientv3.Config{Endpoints: endpoints})
//	b, _ := etcdlock.New(cli)
//	locks, _ := lockclient.New(b)
//
// # Keys, tokens, leases
//
// Each acquisition grants a lease of its own and creates the key
// <prefix>/<name>/<lease ID in hex> attached to it; the name is path-escaped
// so that the key range of one name never holds another name's keys. The
// fencing token is the key's create revision, which etcd makes strictly
// greater for every later key; the oldest key of a name holds the lock, so
// successive holders get strictly increasing tokens. The ownership token is
// random and stored as the key's value.
//
// A lease per grant, rather than one shared by the client (as
// concurrency.Session does), costs two more consensus commits per
// acquire-release pair (lease grant and revoke), and buys what a lock handle
// needs: each grant has its own TTL, is renewed, lost and released on its own,
// and its validity deadline is the send time of its own keep-alive. With a
// shared lease, one failed keep-alive stream would lose every lock of the
// process at once, and a per-acquire TTL could not exist. The measured cost
// is in docs/lockclient.md ("Lease per grant, not a shared lease").
//
// # Waiting
//
// A waiter reads, in one request, whether its key still exists and which key
// is directly ahead of it (the newest one with a lower create revision), then
// watches that key and its own key from the next revision, and keeps its
// lease alive meanwhile. When the key ahead goes, it reads again: it holds
// the lock when no older key is left; otherwise a waiter ahead gave up and it
// watches the next one. One release thus wakes one waiter; there is no
// polling. Starting the watches at the revision after the read, not at a
// past revision, lets etcd deliver the delete as it commits (about 2 ms on
// loopback) instead of at its next sweep of unsynced watchers (about 50 ms,
// concurrency.Mutex's hand-off). A waiter whose own key is deleted returns
// an error wrapping lockclient.ErrLost; a waiter that gives up revokes its
// lease, which deletes its key. Each time a waiter refreshes its lease (every
// TTL/3) it also reads the queue again, so that a watch sitting on a frozen
// member, which will never deliver the delete, delays a hand-off by one
// refresh interval at most.
//
// # Dead and frozen members
//
// Every request is bounded by a per-attempt timeout (WithRequestTimeout,
// capped at a quarter of the TTL) and retried until the call's own bound, so
// that a request caught by a leader's death, or sent to a frozen member
// (SIGSTOP, a VM pause), moves on to a healthy member or to the new leader
// instead of waiting out its context. The etcd client should list every
// member and send keep-alives: ClientConfig returns such a configuration.
// Holder reads the oldest key of a name: who holds it, with which token and
// lease.
//
// # Release and loss
//
// Release deletes the key only if its create revision is still the grant's,
// then revokes the lease, so that a release retried after a lost reply cannot
// delete a newer grant (etcd-io/etcd#22082). A key already gone is reported
// as a loss (lockclient.ErrLost), never as a clean release. A held grant's key is watched;
// its deletion (for instance another client revoking the lease) closes the
// grant's Lost channel at once. A renewal is one keep-alive, which the etcd
// client retries across reconnects until its deadline, so a restart or a
// leader change within the validity window is not a loss; a lease the server
// no longer has is.
//
// # Revisions going backwards
//
// Fencing tokens are revisions, so an etcd restored from a snapshot without
// --bump-revision, or rebuilt from scratch, would mint tokens below the marks
// the resources hold, and every fenced write would be refused. The backend
// remembers the highest revision it has seen in a linearizable reply; a new
// key created at a revision no higher than that fails the acquire with
// ErrRevisionRegressed, releasing what it created. Detection lasts as long as
// the process: a new process cannot tell, and the resources' refusals are
// then the signal.
//
// # TTLs
//
// etcd lease TTLs are whole seconds, and the server raises TTLs below its
// minimum (1.5 × the election timeout) without saying so. CheckTTL refuses
// both instead of rounding: whole seconds from DefaultMinTTL (2 s) up, or from
// WithMinTTL.
//
// # Concurrency
//
// A Backend is safe for concurrent use. Each held grant has one goroutine
// watching its key, started when the grant is made and stopped by its
// Release or by the etcd client closing. Waiting runs on the Acquire caller's
// goroutine.
//
// # Errors, logs and metrics
//
// Errors wrap lockclient.ErrNotAcquired (TryAcquire on a held lock),
// lockclient.ErrLost (a renewal of a lease etcd no longer has, a queue entry
// that vanished), lockclient.ErrInvalidOption (a TTL etcd cannot grant
// exactly) and ErrRevisionRegressed; everything else is the etcd client's
// error, wrapped. The backend
// logs nothing; Stats counts grants and wake-ups.
package etcdlock
