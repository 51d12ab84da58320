package lockclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// errReleased is the cancellation cause of a released handle's Context.
var errReleased = errors.New("lockclient: lock released")

type phase int

const (
	phaseHeld phase = iota
	phaseReleased
	phaseLost
)

// grantState is one grant from the backend, shared by the handles of
// reentrant acquires. Held → Released and Held → Lost are its only
// transitions, both final, both made with Client.mu and mu held.
type grantState struct {
	c        *Client
	name     string
	grant    Grant
	interval time.Duration // renewal period before jitter: TTL/3
	drift    time.Duration
	re       *reentry // nil unless acquired with WithReentrant

	ctx    context.Context // parent of every handle's; cancelled on loss or final release
	cancel context.CancelCauseFunc

	// The renewal goroutine: started by acquireGrant, stopped by stopRenew
	// (release or Close), done closed when it has exited.
	renewCtx  context.Context
	stopRenew context.CancelFunc
	done      chan struct{}

	mu       sync.Mutex
	phase    phase
	deadline time.Time // monotonic validity deadline; zero unless held
	handles  []*Handle // unreleased handles
	lostErr  error     // wraps ErrLost once phase is phaseLost
}

func (c *Client) newGrantState(name string, g Grant) (*grantState, error) {
	if g.FencingToken <= 0 || g.TTL <= 0 || g.Start.IsZero() || g.Lease == nil {
		return nil, fmt.Errorf("backend returned an invalid grant (token %d, TTL %v)", g.FencingToken, g.TTL)
	}
	drift := c.drift(g.TTL)
	interval := g.TTL / 3
	deadline := g.Start.Add(g.TTL - drift)
	if left := time.Until(deadline); left < interval/2 {
		return nil, fmt.Errorf("grant arrived with %v of validity left: %w", left, ErrLost)
	}
	st := &grantState{
		c:        c,
		name:     name,
		grant:    g,
		interval: interval,
		drift:    drift,
		done:     make(chan struct{}),
		deadline: deadline,
	}
	st.ctx, st.cancel = context.WithCancelCause(context.Background())
	st.renewCtx, st.stopRenew = context.WithCancel(context.Background())
	return st, nil
}

// addHandle returns a new handle on st. The caller ensures st is held.
func (st *grantState) addHandle(onLost func(*Handle, error)) *Handle {
	h := &Handle{st: st, onLost: onLost, releaseDone: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancelCause(st.ctx)
	st.mu.Lock()
	st.handles = append(st.handles, h)
	st.mu.Unlock()
	return h
}

// extend moves the deadline forward after a successful renewal.
func (st *grantState) extend(deadline time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.phase == phaseHeld && deadline.After(st.deadline) {
		st.deadline = deadline
	}
}

func (st *grantState) currentDeadline() (time.Time, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.deadline, st.phase == phaseHeld
}

// expired reports whether st is held by the client's books but its validity
// deadline has passed: the lock is lost whatever the renewer knows yet (it
// may not have run since, in a process that was paused).
func (st *grantState) expired() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.phase == phaseHeld && !time.Now().Before(st.deadline)
}

// lose makes the Held → Lost transition, if st is still held, stops renewal
// and tells every unreleased handle, running their OnLost callbacks on the
// calling goroutine. The renewal goroutine gives the grant back as it exits
// (renewer.cleanUp). It reports whether it made the transition.
func (st *grantState) lose(reason error) bool {
	c := st.c
	c.mu.Lock()
	st.mu.Lock()
	if st.phase != phaseHeld {
		st.mu.Unlock()
		c.mu.Unlock()
		return false
	}
	st.phase = phaseLost
	st.deadline = time.Time{}
	st.lostErr = fmt.Errorf("lock %q (fencing token %d): %w", st.name, st.grant.FencingToken, reason)
	handles := slices.Clone(st.handles)
	c.forget(st)
	st.mu.Unlock()
	c.mu.Unlock()

	st.stopRenew()
	st.cancel(st.lostErr)
	c.log.Error("lockclient: lock lost", "lock", st.name, "fencing_token", st.grant.FencingToken, "err", reason)
	for _, h := range handles {
		if h.onLost != nil {
			h.onLost(h, st.lostErr)
		}
	}
	return true
}

func (st *grantState) isLost() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.phase == phaseLost
}

// release stops renewal and gives the grant back within its validity
// (deadline) and one TTL more. The caller has already made the Held →
// Released transition.
// It returns an error wrapping ErrLost when the service no longer had the
// grant: it was lost before the release, whatever the client believed.
func (st *grantState) release(ctx context.Context, deadline time.Time, cause error) error {
	st.stopRenew()
	// Give the grant back first: the next holder should not wait for this
	// goroutine's renewer to be scheduled. A renewal still in flight fails
	// harmlessly, as the grant is no longer held. Past the deadline the
	// service would drop the grant by itself, but not at once: a renewal in
	// flight may have extended it, and a new etcd leader extends every
	// lease by a TTL and an election timeout as it takes over (its lessor's
	// Promote). A release caught by an election that outlasts the validity
	// must still land, or the next holder waits that long: hence one TTL
	// past the deadline, and no longer.
	if now := time.Now(); deadline.Before(now) {
		deadline = now
	}
	rctx, cancel := context.WithDeadline(ctx, deadline.Add(st.grant.TTL))
	err := st.grant.Lease.Release(rctx)
	cancel()
	st.cancel(cause)
	<-st.done // prompt: the renewer only waits on renewCtx-bounded calls
	switch {
	case errors.Is(err, ErrLost):
		st.c.log.Error("lockclient: lock lost before its release", "lock", st.name, "fencing_token", st.grant.FencingToken, "err", err)
		return fmt.Errorf("release %q (fencing token %d): the service no longer had the grant: %w", st.name, st.grant.FencingToken, err)
	case err != nil:
		return fmt.Errorf("release %q: %w", st.name, err)
	}
	return nil
}

// Handle is one holder's view of a granted lock.
//
// Name, FencingToken, OwnershipToken and Context may be called from any
// goroutine. ValidUntil and IsHeld are safe for concurrent use too, but only
// report the client's belief. Release is safe to call more than once and from
// several goroutines, but a handle has one logical owner: racing Release
// against work done under the lock is an application bug.
type Handle struct {
	st     *grantState
	ctx    context.Context
	cancel context.CancelCauseFunc
	onLost func(*Handle, error)

	// Guarded by st.mu; releaseErr is written before releaseDone is closed.
	released    bool
	releaseDone chan struct{}
	releaseErr  error
}

// Name returns the lock's name. Safe for concurrent use.
func (h *Handle) Name() string { return h.st.name }

// FencingToken returns the grant's fencing token: positive, and strictly
// greater than that of every earlier grant of the same name. Attach it to
// every operation the lock protects and have the resource reject tokens
// lower than the highest it has seen; nothing else makes the lock safe
// against a holder that was paused past its lease. Safe for concurrent use.
func (h *Handle) FencingToken() int64 { return h.st.grant.FencingToken }

// OwnershipToken returns the grant's random identity. It has no order and is
// no substitute for the fencing token. Safe for concurrent use.
func (h *Handle) OwnershipToken() string { return h.st.grant.OwnershipToken }

// ValidUntil returns the validity deadline: the time the request that last
// started the lease's TTL was sent, plus the TTL, minus the drift allowance.
// It carries a monotonic clock reading, so compare it with time.Now or use
// time.Until; do not serialize it. Renewals move it forward. It is the zero
// time once the handle is released or lost. Safe for concurrent use.
func (h *Handle) ValidUntil() time.Time {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if h.released || st.phase != phaseHeld {
		return time.Time{}
	}
	return st.deadline
}

// Context returns a context that is cancelled when the lock is lost (cause
// wrapping [ErrLost]), when this handle is released, or when the client is
// closed (cause [ErrClosed]); see [context.Cause]. Run work done under the
// lock with it. It is not derived from the ctx given to Acquire, which bounds
// the acquisition only: a lock usually outlives the request that took it. To
// stop work when either ends, merge them (for instance with
// [context.AfterFunc]). Safe for concurrent use.
func (h *Handle) Context() context.Context { return h.ctx }

// IsHeld reports whether the client believes the lock is held by this
// handle: not released, not lost, and before ValidUntil. It is advisory. The
// belief can be stale by a renewal interval plus a network delay, and a
// process paused after IsHeld returns true may resume after another holder
// took over; only the fencing token, checked by the resource, is
// authoritative. Use IsHeld to stop work early, never to decide that a write
// is safe. Safe for concurrent use.
func (h *Handle) IsHeld() bool {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	return !h.released && st.phase == phaseHeld && time.Now().Before(st.deadline)
}

// Release gives up this handle. It cancels the handle's Context; the last
// handle of a reentrant grant (or the only one) also stops renewal and gives
// the grant back to the service, only if it is still this grant there,
// retrying within the grant's remaining validity and one TTL more (while the
// service cannot answer, for instance during an etcd election).
//
// It returns an error wrapping [ErrLost] whenever the lock was lost before
// the first call: when the client knew it already, when the validity
// deadline has passed by the monotonic clock (a process paused past its
// lease may resume here before its renewer notices), and when the service
// answers that the grant was gone. In each case the OnLost callbacks run
// (before Release returns, unless the renewer ran them already). Any other
// error is the service's: the grant may stay on it until its TTL runs out,
// as renewal has stopped. Release is idempotent: later calls wait for the
// first to finish (bounded by their ctx) and return its result.
func (h *Handle) Release(ctx context.Context) error {
	st := h.st
	c := st.c
	if st.expired() {
		st.lose(fmt.Errorf("validity deadline passed before the release: %w", ErrLost))
	}
	c.mu.Lock()
	st.mu.Lock()
	if h.released {
		done := h.releaseDone
		st.mu.Unlock()
		c.mu.Unlock()
		select {
		case <-done:
			return h.releaseErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.released = true
	st.handles = slices.DeleteFunc(st.handles, func(o *Handle) bool { return o == h })
	final := false
	deadline := st.deadline
	switch {
	case st.phase == phaseLost:
		h.releaseErr = st.lostErr
	case len(st.handles) == 0:
		final = true
		st.phase = phaseReleased
		st.deadline = time.Time{}
		c.forget(st)
	}
	st.mu.Unlock()
	c.mu.Unlock()

	h.cancel(errReleased)
	if final {
		h.releaseErr = st.release(ctx, deadline, errReleased)
	}
	close(h.releaseDone)
	if final && errors.Is(h.releaseErr, ErrLost) && h.onLost != nil {
		h.onLost(h, h.releaseErr)
	}
	return h.releaseErr
}
