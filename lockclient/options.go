package lockclient

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults. Each can be changed with the option named beside it.
const (
	// DefaultTTL is the lease TTL of an acquire without [WithTTL].
	DefaultTTL = 10 * time.Second

	// DefaultTransportErrorBudget is the number of consecutive renewal
	// transport errors after which a handle is Lost
	// ([WithTransportErrorBudget]): a failed renewal is retried once, at
	// the next renewal time, which is also the last one the validity
	// window leaves room for.
	DefaultTransportErrorBudget = 2
)

// DefaultDriftAllowance is the clock-drift allowance subtracted from every
// validity deadline unless [WithDriftAllowance] sets one: 1% of the TTL plus
// 2 ms, the figure the Redlock analysis uses for clocks running at slightly
// different rates on the client and the service.
func DefaultDriftAllowance(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}

type clientConfig struct {
	drift  time.Duration // < 0: DefaultDriftAllowance(ttl)
	budget int
	log    *slog.Logger
}

// Option configures a [Client] in [New].
type Option func(*clientConfig) error

// WithDriftAllowance sets the time subtracted from every validity deadline
// for clock drift between this process and the service. It must be ≥ 0, and
// each acquire checks it is below a third of the TTL. The default is
// [DefaultDriftAllowance].
func WithDriftAllowance(d time.Duration) Option {
	return func(c *clientConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: drift allowance %v is negative", ErrInvalidOption, d)
		}
		c.drift = d
		return nil
	}
}

// WithTransportErrorBudget sets how many consecutive renewals may fail with a
// transport error before the handle is Lost. It must be ≥ 1; the default is
// [DefaultTransportErrorBudget]. A larger budget does not extend validity: a
// handle whose deadline comes too close is Lost regardless.
func WithTransportErrorBudget(n int) Option {
	return func(c *clientConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: transport error budget %d is below 1", ErrInvalidOption, n)
		}
		c.budget = n
		return nil
	}
}

// WithLogger sets the logger of the client's trouble that no call returns:
// renewals that failed (Warn, with the lock name, the consecutive failures
// and the error), and grants that could not be given back after a loss or an
// abandoned acquire (Warn). A renewal failure is the early sign of a loss:
// the handle is lost when [WithTransportErrorBudget] is spent. nil (the
// default) discards them.
func WithLogger(l *slog.Logger) Option {
	return func(c *clientConfig) error {
		c.log = l
		return nil
	}
}

type acquireConfig struct {
	ttl       time.Duration
	wait      time.Duration // the wait budget; 0: none (see queue)
	waitSet   bool          // WithWait was given
	queue     bool          // queue for a held lock, rather than fail at once
	reentrant bool
	onLost    func(*Handle, error)
}

// AcquireOption configures one [Client.Acquire] or [Client.TryAcquire].
type AcquireOption func(*acquireConfig) error

// WithTTL sets the lease TTL. It must be positive and acceptable to the
// backend exactly (etcd: whole seconds, at least 2 s by default); it is never
// rounded. The default is [DefaultTTL]. Renewal runs at about TTL/3.
func WithTTL(ttl time.Duration) AcquireOption {
	return func(c *acquireConfig) error {
		if ttl <= 0 {
			return fmt.Errorf("%w: TTL %v is not positive", ErrInvalidOption, ttl)
		}
		c.ttl = ttl
		return nil
	}
}

// WithWait sets the wait budget of [Client.Acquire]: the longest time it
// queues for a held lock before it returns [ErrNotAcquired]. It must be ≥ 0;
// zero means a single attempt, as [Client.TryAcquire]. Without it, Acquire
// waits until its ctx ends, as etcd's concurrency.Mutex does: the caller's
// ctx is then the only bound, and a ctx without a deadline waits for as long
// as the lock is held. With it, the call's ctx bounds the wait as well;
// whichever ends first wins. [Client.TryAcquire] refuses a positive budget
// ([ErrInvalidOption]).
func WithWait(d time.Duration) AcquireOption {
	return func(c *acquireConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: wait budget %v is negative", ErrInvalidOption, d)
		}
		c.wait, c.waitSet = d, true
		return nil
	}
}

// WithReentrant makes the acquire reentrant within this [Client]: when the
// client already holds name through a reentrant acquire, the call returns a
// new [Handle] sharing that grant (same tokens, same deadline; its own TTL is
// ignored) and adds one to a reference count, without asking the service.
// Only the release of the last such handle releases the grant, and a loss
// reaches every one of them. Reentrancy never spans processes or clients.
// Without it, an acquire of a name this client holds fails at once with
// [ErrAlreadyHeld]: a client holds a name at most once. Goroutines of one
// process that must exclude each other use a client each (they may share a
// Backend), or a sync.Mutex in front of one.
func WithReentrant() AcquireOption {
	return func(c *acquireConfig) error {
		c.reentrant = true
		return nil
	}
}

// WithOnLost registers f to be called, exactly once, if the handle is lost
// while it is held, with an error wrapping [ErrLost]; never when its Release
// found it still held. The loss may be found by the renewal goroutine (a
// rejected renewal, the transport-error budget, the validity deadline, the
// service dropping the grant), and then f runs there, after [Handle.Context]
// has been cancelled; or by [Handle.Release] (the deadline had passed, or the
// service no longer had the grant), and then f runs in that Release call,
// before it returns. Renewal of the grant has stopped for good by then. f must
// not block for long and must not wait for anything that waits for the
// renewal goroutine (such as [Client.Close]). f must not be nil.
func WithOnLost(f func(h *Handle, err error)) AcquireOption {
	return func(c *acquireConfig) error {
		if f == nil {
			return fmt.Errorf("%w: nil OnLost callback", ErrInvalidOption)
		}
		c.onLost = f
		return nil
	}
}
