package lockclient

import (
	"context"
	"fmt"
	"time"
)

// Backend is the transport to a lock service: it queues for, grants, renews
// and releases leases. [Client] owns everything above it — validity deadlines,
// the renewal schedule, the transport-error budget, reentrancy, callbacks — so
// a backend stays small. Implementations: packages etcdlock (etcd), zklock
// (ZooKeeper), redislock (Redis) and memlock (in process, with fault
// switches); package lockclienttest is the suite each must pass.
//
// A Backend must be safe for concurrent use.
type Backend interface {
	// CheckTTL reports an error wrapping [ErrInvalidOption] when the
	// service cannot grant exactly ttl (for etcd: not whole seconds, or
	// below the server's minimum). A backend must not round a TTL.
	CheckTTL(ttl time.Duration) error

	// Acquire takes a place in the FIFO queue of req.Name and returns once
	// this caller is the holder. With req.Wait false it returns an error
	// wrapping [ErrNotAcquired] at once when the lock is held by anyone
	// else. When ctx ends first, Acquire removes its queue entry (best
	// effort, bounded) and returns ctx's error. It returns an error wrapping
	// [ErrLost] when its own queue entry vanished while it waited. Any other
	// error is a transport error.
	Acquire(ctx context.Context, req Request) (Grant, error)

	// Holder reports the current holder of name, as the service sees it
	// now; ok is false when nobody holds it. It is a read: it takes no
	// place in the queue.
	Holder(ctx context.Context, name string) (h Holder, ok bool, err error)
}

// Holder describes the holder of a lock, as the service reports it. It is a
// snapshot: the holder may have changed by the time it is read.
type Holder struct {
	FencingToken   int64  // the holder's fencing token
	OwnershipToken string // the holder's random ownership token
	Lease          string // the backend's name of the holder's lease, e.g. an etcd lease ID in hex; may be ""
}

// String describes h for messages: its token and, when known, its lease.
func (h Holder) String() string {
	s := fmt.Sprintf("fencing token %d", h.FencingToken)
	if h.Lease != "" {
		s = "lease " + h.Lease + " with " + s
	}
	return s
}

// Request is what [Client] asks a [Backend] for.
type Request struct {
	Name string        // lock name, non-empty
	TTL  time.Duration // already accepted by CheckTTL
	Wait bool          // queue and wait (bounded by ctx), or fail fast
}

// Grant describes one lease obtained from a [Backend].
type Grant struct {
	// FencingToken is positive and strictly greater than the token of
	// every earlier grant of the same name.
	FencingToken int64

	// OwnershipToken is random per grant; it identifies the grant and
	// carries no order.
	OwnershipToken string

	// Start is a time, on this process's monotonic clock, no later than
	// the moment the service started counting the grant's current TTL:
	// the send time of the request that created or last refreshed the
	// lease. [Client] derives the validity deadline from it.
	Start time.Time

	// TTL is the lease time the service granted from Start.
	TTL time.Duration

	// Lease renews and releases this grant.
	Lease Lease
}

// Lease is the live side of a [Grant]. [Client] calls Renew from one
// goroutine at a time and Release once, possibly while a last Renew is still
// in flight (that Renew may then fail in any way); Lost may be read from any
// goroutine. A Lease must be safe for that.
type Lease interface {
	// Renew extends the lease and returns the TTL granted from the moment
	// the request was sent. It returns an error wrapping [ErrLost] when the
	// service says the grant is gone; any other error is a transport error.
	Renew(ctx context.Context) (time.Duration, error)

	// Release gives the grant up if, and only if, it is still this grant
	// on the service (never a later grant of the same name), and frees the
	// backend's resources for it. It returns an error wrapping [ErrLost]
	// when the grant was already gone on the service (expired, revoked,
	// taken over), so that a release never passes a loss off as a clean
	// release. Retrying after an error is safe: a grant that an earlier,
	// unanswered attempt may have deleted is not reported lost. ctx's
	// deadline is one TTL past the end of the grant's validity; a backend
	// should retry failed attempts (on another server, if it has several)
	// until then.
	Release(ctx context.Context) error

	// Lost is closed when the backend learns, without being asked, that
	// the grant is gone (for etcd: its key was deleted).
	Lost() <-chan struct{}
}
