package lockclient

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Test for them with [errors.Is]; the errors returned by this
// package wrap them with the lock name and the reason.
var (
	// ErrNotAcquired means the lock was held by someone else for the whole
	// wait budget (or at the single attempt of [Client.TryAcquire]). The
	// error returned is a [*NotAcquiredError] naming the holder.
	ErrNotAcquired = errors.New("lockclient: lock not acquired within the wait budget")

	// ErrAlreadyHeld means the [Client] already holds the name through
	// another handle, and the acquire did not ask to share it
	// ([WithReentrant]). Waiting could only end when that handle is
	// released, which, if the caller is its owner, never happens: so the
	// acquire fails at once instead of spending its wait budget.
	ErrAlreadyHeld = errors.New("lockclient: lock already held by this client")

	// ErrClosed means the [Client] was closed before or during the call.
	ErrClosed = errors.New("lockclient: client closed")

	// ErrLost means the grant is gone: the service no longer holds it for
	// this handle, or the client can no longer prove that it does (the
	// transport-error budget was spent, or the validity deadline came too
	// close). It is the cause of a lost [Handle.Context], the error passed to
	// an OnLost callback, and what [Handle.Release] returns after a loss.
	// A backend's Acquire returns it when the caller's own queue entry
	// vanished while it was waiting (Client.Acquire then queues again).
	// Backends return it from renewals the service rejects.
	ErrLost = errors.New("lockclient: lock lost")

	// ErrUnavailable means the lock service could not be reached: no
	// server answered (refused connections, timeouts, no leader) before the
	// call's bound. It says nothing of who holds the lock. The error
	// returned is an [*UnavailableError] naming the service and wrapping
	// the last transport error.
	ErrUnavailable = errors.New("lockclient: lock service unavailable")

	// ErrInvalidOption means an option or argument had an invalid value
	// (for example a TTL the backend cannot honour exactly). Nothing was
	// sent to the service.
	ErrInvalidOption = errors.New("lockclient: invalid option")
)

// errWaitBudget is the cancellation cause of an acquire whose wait budget ran out.
var errWaitBudget = errors.New("lockclient: wait budget exhausted")

// NotAcquiredError is the error of an [Client.Acquire] whose wait budget ran
// out, or of a [Client.TryAcquire] that found the lock held. It wraps
// [ErrNotAcquired], so errors.Is(err, ErrNotAcquired) holds, and carries who
// held the lock when the caller gave up, so that a message can name it.
type NotAcquiredError struct {
	Name string        // the lock name
	Wait time.Duration // the wait budget spent; 0 for a single attempt

	// Holder is the holder the service reported right after the caller
	// gave up; HolderKnown is false when there was none by then or the
	// service could not be asked.
	Holder      Holder
	HolderKnown bool
}

func (e *NotAcquiredError) Error() string {
	msg := fmt.Sprintf("acquire %q: not acquired", e.Name)
	if e.Wait > 0 {
		msg += fmt.Sprintf(" within %v", e.Wait)
	} else {
		msg += " at once"
	}
	if e.HolderKnown {
		msg += ": held by " + e.Holder.String()
	}
	return msg
}

// Unwrap returns [ErrNotAcquired].
func (e *NotAcquiredError) Unwrap() error { return ErrNotAcquired }

// UnavailableError is the error of a call that could not reach the lock
// service. It wraps [ErrUnavailable] and the last transport error, so that
// errors.Is(err, ErrUnavailable) holds and the transport error (a refused
// connection, [context.DeadlineExceeded], …) can be inspected. Backends
// return it when they got no answer; [Client.Acquire] passes it on.
type UnavailableError struct {
	Store string // the service as the backend names it, e.g. "etcd 10.0.0.1:2379,10.0.0.2:2379"
	Err   error  // the last transport error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%s unreachable: %v", e.Store, e.Err)
}

// Unwrap returns [ErrUnavailable] and the transport error.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }
