// Package redislock is the Redis backend of lockclient: a FIFO lock on one
// Redis primary whose fencing token comes from a per-name counter
// incremented in the same script as the grant.
//
// # What it owns
//
// The Redis side of a lock: its keys, the Lua scripts that grant, renew and
// release, the wait queue and the wake-ups. It is the only package of
// lockclient that imports a Redis client (github.com/redis/go-redis/v9).
// Pass a Backend to lockclient.New:
//
//	rdb := redis.NewClient(redislock.ClientOptions("127.0.0.1:6379"))
//	b, _ := redislock.New(rdb)
//	locks, _ := lockclient.New(b)
//
// # Keys, tokens, ownership
//
// A name has five keys under one hash tag, <prefix>:{<escaped name>}:…
// (lock, fence, queue, until, done). The lock hash holds the holder's
// ownership token, a random 20-byte value, and its fencing token, with the
// grant's TTL (PEXPIRE, whole milliseconds). Renewal and release are
// compare-and-extend and compare-and-delete on the ownership token, in Lua,
// so that a holder can never extend or delete a later holder's grant. The
// fencing token is never the random value: the grant script INCRs the
// name's fence counter and stores the result in the lock hash in one atomic
// step (as Redisson's RFencedLock does), so on one server each grant of a
// name gets a strictly greater token. The counter never expires.
//
// # Waiting
//
// A waiter subscribes to a channel of its own, then runs the grant script,
// which queues it (a list, oldest first, with a per-waiter expiry refreshed
// on every attempt). A release wakes only the first waiter, by publishing
// on its channel; the lock goes to nobody else while that waiter's place is
// alive, so hand-off is FIFO and one release wakes one waiter. Redis does
// not announce the expiry of a key to anyone, so waiters also poll, every
// TTL/3 capped at 500 ms with jitter: a holder that died is replaced that
// long after its lease ran out. A waiter that gives up leaves the queue and
// wakes the next one; one that crashed drops out when its place expires.
// For the same reason a grant's Lost channel never closes: a deleted or
// expired lock key is found by the next renewal, within TTL/3.
//
// # What Redis cannot promise
//
// Redis replicates asynchronously. When a primary fails after granting a
// lock and before a replica received the grant and the counter's INCR, the
// promoted replica knows neither: it grants the lock again at once, to
// another client, with a fencing token that may equal the lost one (or be
// lower still, if several increments were lost). Two clients then believe
// they hold the lock, and the fencing check cannot tell them apart: a
// token equal to the resource's high-water mark is accepted (so that a
// holder can retry its own write), so both holders' writes pass. The check
// still refuses every holder whose token is below the mark — an older
// holder paused past its lease, the usual case — but after a failover that
// lost writes, a reused token is accepted. Restarting a primary without
// persistence does the same: the counter starts again from zero, and every
// token it grants is refused until it passes the old marks (an outage, not
// a stale write, but an outage).
//
// Mitigations, from cheapest: run Redis with appendonly yes and appendfsync
// always, so that a restart keeps the counter; do not let a replica be
// promoted (or restarted) before a lease TTL has passed since the old
// primary stopped, so that no old holder is still writing; and if a reused
// token must never happen, use a store with consensus for the token (the
// etcd or ZooKeeper backends). Redlock, several independent primaries, does
// not fix this either: see docs/redlock.md.
//
// # Concurrency
//
// A Backend is safe for concurrent use. Each request is bounded by a
// per-attempt timeout (WithRequestTimeout, capped at a quarter of the TTL)
// and retried until the call's own bound; every script recognises its own
// earlier effect, so a retry after a lost answer is safe.
//
// # Errors
//
// A renewal or a release of a grant Redis no longer holds for its owner
// returns an error wrapping lockclient.ErrLost; an Acquire without waiting
// on a held name one wrapping lockclient.ErrNotAcquired; a TTL that is not
// whole milliseconds or below MinTTL one wrapping
// lockclient.ErrInvalidOption. Other errors are go-redis's.
//
// It emits no metrics and no logs; Stats counts grants and wake-ups.
package redislock
