// Package lockclient is a distributed lock client whose grants carry fencing
// tokens: a lease-based lock that says, honestly, what it can and cannot
// guarantee.
//
// # What it owns, and what it cannot do
//
// lockclient owns the client side of a lock: acquiring with a bounded wait,
// the handle's lifecycle (Held → Released, Held → Lost, both final), renewal,
// the validity deadline, in-process reentrancy and loss notification. It
// imports nothing from fenceproxy's internal packages and no store's client;
// backends live in sub-packages (etcdlock for etcd, zklock for ZooKeeper,
// redislock for Redis, memlock in process), each passing the conformance
// suite of lockclienttest. [Client.Election] is a fenced leader election on
// the same locks; package pgxfence begins pgx transactions carrying a
// handle's token.
//
// A lease-based lock cannot stop a holder that was paused (GC, SIGSTOP, a VM
// freeze) from acting after its lease ran out. The client can detect a loss;
// it cannot enforce exclusion. The fix is the fencing token:
// [Handle.FencingToken] grows strictly with every grant of a name, so the
// resource — fenceproxy in front of PostgreSQL, or any store keeping a
// high-water mark — can reject writes carrying a token lower than the highest
// it has seen. [Handle.IsHeld] and [Handle.ValidUntil] are advisory.
//
// # Place in the flow
//
// Applications (and fenceproxy's `lock run`) create one [Client] over a
// [Backend], call [Client.Acquire] or [Client.TryAcquire] to get a [Handle],
// pass its fencing token with every protected write, run the work under
// [Handle.Context], and call [Handle.Release]. The client calls the backend
// to queue, renew and release; the backend returns a [Grant] describing the
// lease.
//
// # Validity and renewal
//
// A handle's validity deadline is the moment the request that started the
// lease's TTL was sent (monotonic clock), plus the TTL, minus a drift
// allowance ([DefaultDriftAllowance]: 1% of the TTL plus 2 ms; see
// [WithDriftAllowance]). Time spent acquiring is therefore never counted as
// held time. One goroutine per grant renews it every TTL/3, ±10% jitter.
// Before each renewal, and after a failed one, it checks the deadline
// locally: with less than half an interval left the handle is Lost without
// asking the service. Each renewal
// is bounded by the remaining validity. Consecutive transport errors are
// allowed up to a budget ([DefaultTransportErrorBudget]); then the handle is
// Lost. A renewal the service rejects, or a backend noticing that the grant
// is gone, makes the handle Lost at once. A lost or released handle never
// comes back: a new lease is always a new Acquire. TTLs are never rounded: a
// TTL the backend cannot honour exactly (etcd: not whole seconds, or below
// 2 s) is an error.
//
// # Loss is always reported
//
// A loss is found by whichever sees it first: the renewer (a rejected
// renewal, the transport-error budget, the deadline too close, the backend
// noticing the grant gone), or [Handle.Release], which judges by the
// monotonic clock as well (a holder paused past its deadline may resume and
// release before its renewer runs) and by the service's answer to the
// compare-and-delete (a key already gone was lost, not released). Either way
// Release returns an error wrapping [ErrLost] and the OnLost callbacks run.
// A release is retried within the remaining validity and one TTL more, on
// another server if the backend has several, so that the next holder is not
// left waiting for the TTL after a server dies (a new etcd leader extends
// every lease as it takes over).
//
// # Waiting
//
// Waiting is FIFO and bounded by the call's context and, when [WithWait]
// gives one, a wait budget. Without a budget, Acquire waits until its context
// ends, as etcd's concurrency.Mutex does. Each
// waiter is woken only when the waiter directly ahead of it leaves, so one
// release wakes one waiter. A waiter that gives up removes its queue entry; a
// waiter whose own entry vanishes (its lease expired before it held the
// lock) queues again at the back.
//
// # Concurrency
//
// [Client] is safe for concurrent use, and holds a name at most once:
// goroutines that must exclude each other use a Client each (Clients may share
// a Backend). A [Handle] has one logical owner; its
// accessors are safe from any goroutine, and Release is idempotent. Each
// grant has one renewal goroutine, started by Acquire and stopped by the
// final Release, a loss, or [Client.Close], which waits for all of them.
// OnLost callbacks ([WithOnLost]) run once per handle, after the handle's
// Context is cancelled: on that goroutine, or in the Release that found the
// loss. [Handle.Context] is not derived from Acquire's ctx, which bounds the
// acquisition only. Reentrant acquires
// ([WithReentrant]) share one grant by reference count within one Client;
// a loss reaches all of them.
//
// # Errors
//
// Sentinels, for [errors.Is]: [ErrNotAcquired] (the wait budget ran out, or
// TryAcquire found the lock held; the error is a [*NotAcquiredError] naming
// the holder), [ErrAlreadyHeld] (this client holds the name already, and the
// acquire is not reentrant: it fails at once), [ErrUnavailable] (the service
// could not be reached; the error is an [*UnavailableError] naming it and
// wrapping the transport error), [ErrClosed], [ErrLost] and
// [ErrInvalidOption]. Other errors from Acquire are the backend's transport
// errors or the context's error, wrapped with the lock name.
// [Client.Holder] asks who holds a lock without queueing.
//
// # Logs and metrics
//
// Renewal failures are logged at Warn and losses at Error, with the keys
// "lock", "fencing_token", "failures" and "err", to the logger given with
// [WithLogger] (none by default). The package registers no metrics.
package lockclient
