package lockclient

import "errors"

// Sentinel errors. Test for them with [errors.Is]; the errors returned by this
// package wrap them with the lock name and the reason.
var (
	// ErrNotAcquired means the lock was held by someone else for the whole
	// wait budget (or at the single attempt of [Client.TryAcquire]).
	ErrNotAcquired = errors.New("lockclient: lock not acquired within the wait budget")

	// ErrClosed means the [Client] was closed before or during the call.
	ErrClosed = errors.New("lockclient: client closed")

	// ErrLost means the grant is gone: the service no longer holds it for
	// this handle, or the client can no longer prove that it does (the
	// transport-error budget was spent, or the validity deadline came too
	// close). It is the cause of a lost [Handle.Context], the error passed to
	// an OnLost callback, and what [Handle.Release] returns after a loss.
	// Acquire returns it when the caller's own queue entry vanished while it
	// was waiting. Backends return it from renewals the service rejects.
	ErrLost = errors.New("lockclient: lock lost")

	// ErrInvalidOption means an option or argument had an invalid value
	// (for example a TTL the backend cannot honour exactly). Nothing was
	// sent to the service.
	ErrInvalidOption = errors.New("lockclient: invalid option")
)

// errWaitBudget is the cancellation cause of an acquire whose wait budget ran out.
var errWaitBudget = errors.New("lockclient: wait budget exhausted")
