package lockclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Client acquires locks from one [Backend]. It is safe for concurrent use;
// create one per process and backend, and Close it when done.
type Client struct {
	backend Backend
	cfg     clientConfig
	log     *slog.Logger

	ctx    context.Context // cancelled by Close: aborts acquires and loss clean-ups
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // one per renewal goroutine

	// mu guards the fields below and every grantState's phase transition
	// out of held (taken before grantState.mu).
	mu        sync.Mutex
	closed    bool
	live      map[*grantState]struct{}
	reentrant map[string]*reentry
}

// reentry is the registry entry of a name acquired with WithReentrant.
type reentry struct {
	ready chan struct{} // closed once the first acquire has finished
	st    *grantState   // the held grant; nil until then or if it failed
}

// New returns a Client over b. The caller keeps ownership of b: Close does
// not close it. It returns an error wrapping [ErrInvalidOption] for a nil
// backend or an invalid option.
func New(b Backend, opts ...Option) (*Client, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalidOption)
	}
	cfg := clientConfig{drift: -1, budget: DefaultTransportErrorBudget}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	log := cfg.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Client{
		backend:   b,
		cfg:       cfg,
		log:       log,
		ctx:       ctx,
		cancel:    cancel,
		live:      make(map[*grantState]struct{}),
		reentrant: make(map[string]*reentry),
	}, nil
}

// Acquire waits, in FIFO order behind earlier callers, until it holds the
// lock name, and returns its [Handle]. The wait is bounded by ctx and, when
// [WithWait] gives one, by a wait budget; without it Acquire waits until ctx
// ends, as etcd's concurrency.Mutex does. When the budget runs out the error
// wraps [ErrNotAcquired], when ctx ends it wraps ctx's error, and in both
// cases the caller's place in the queue is given up. When the service could
// not be reached the error wraps [ErrUnavailable] (a [*UnavailableError]
// naming the service and wrapping the transport error), never
// [ErrNotAcquired]: an unreachable service says nothing of who holds the
// lock. A waiter whose own queue entry vanished before it held the lock (its
// lease expired: a keep-alive starved on a loaded machine, a service away
// longer than the TTL) has lost only its place: it queues again, at the back,
// within the same bounds, and its token when it gets the lock is above every
// token granted before. It returns an error wrapping [ErrLost] if the grant
// arrived with too little validity left to be used; one
// wrapping [ErrAlreadyHeld], at once, when this client already holds name
// through a handle not acquired with [WithReentrant] (or the acquire is not
// reentrant); one wrapping [ErrClosed] once Close has been called; and one
// wrapping [ErrInvalidOption] for an empty name or an invalid option, before
// anything is sent. Other errors are the backend's transport errors. When the
// budget runs out the error is a [*NotAcquiredError] naming the holder.
//
// ctx bounds the acquisition only: the returned handle, its renewal and its
// [Handle.Context] outlive it, so that a request-scoped ctx does not end a
// lock taken for longer work. Acquire is safe for concurrent use.
func (c *Client) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Handle, error) {
	return c.acquire(ctx, name, true, opts)
}

// TryAcquire is [Client.Acquire] without waiting: when another holder has the
// lock it returns a [*NotAcquiredError] (wrapping [ErrNotAcquired]) after one
// exchange with the service. A [WithWait] option with a positive budget is an
// error wrapping [ErrInvalidOption]: TryAcquire never waits, and silently
// ignoring a budget would hide a caller's mistake. TryAcquire is safe for
// concurrent use.
func (c *Client) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (*Handle, error) {
	return c.acquire(ctx, name, false, opts)
}

func (c *Client) acquire(ctx context.Context, name string, wait bool, opts []AcquireOption) (*Handle, error) {
	cfg, err := c.acquireConfig(name, wait, opts)
	if err != nil {
		return nil, err
	}
	if cfg.reentrant {
		return c.acquireReentrant(ctx, name, cfg)
	}
	return c.acquireGrant(ctx, name, cfg, nil)
}

// requeuePause is how long a waiter whose queue entry vanished waits
// before it queues again, so that a service that keeps dropping it is not
// hammered.
const requeuePause = 50 * time.Millisecond

// backendAcquire is the backend's Acquire, queueing again while a waiter's
// own entry vanishes (ErrLost) before it holds the lock and ctx allows.
func (c *Client) backendAcquire(ctx context.Context, req Request) (Grant, error) {
	for {
		g, err := c.backend.Acquire(ctx, req)
		if !req.Wait || !errors.Is(err, ErrLost) {
			return g, err
		}
		select {
		case <-ctx.Done():
			return g, err
		case <-time.After(requeuePause):
		}
	}
}

func (c *Client) acquireConfig(name string, wait bool, opts []AcquireOption) (acquireConfig, error) {
	cfg := acquireConfig{ttl: DefaultTTL}
	if name == "" {
		return cfg, fmt.Errorf("%w: empty lock name", ErrInvalidOption)
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	if !wait && cfg.wait > 0 && cfg.waitSet {
		return cfg, fmt.Errorf("%w: TryAcquire does not wait; WithWait(%v) is for Acquire", ErrInvalidOption, cfg.wait)
	}
	if !wait {
		cfg.wait = 0
	}
	cfg.queue = wait && (!cfg.waitSet || cfg.wait > 0)
	if err := c.backend.CheckTTL(cfg.ttl); err != nil {
		return cfg, err
	}
	if d := c.drift(cfg.ttl); d >= cfg.ttl/3 {
		return cfg, fmt.Errorf("%w: drift allowance %v leaves no validity in a TTL of %v", ErrInvalidOption, d, cfg.ttl)
	}
	return cfg, nil
}

func (c *Client) drift(ttl time.Duration) time.Duration {
	if c.cfg.drift < 0 {
		return DefaultDriftAllowance(ttl)
	}
	return c.cfg.drift
}

// acquireGrant obtains a new grant from the backend and starts its renewal.
// re, if not nil, is the reentrancy entry the grant will fill.
func (c *Client) acquireGrant(ctx context.Context, name string, cfg acquireConfig, re *reentry) (*Handle, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.ctx, func() { cancel(ErrClosed) })
	defer stop()
	if cfg.wait > 0 {
		var cancelWait context.CancelFunc
		actx, cancelWait = context.WithTimeoutCause(actx, cfg.wait, errWaitBudget)
		defer cancelWait()
	}
	if err := c.canAcquire(name); err != nil {
		return nil, err
	}
	g, err := c.backendAcquire(actx, Request{Name: name, TTL: cfg.ttl, Wait: cfg.queue})
	if err != nil {
		return nil, c.acquireError(name, cfg, actx, err)
	}
	st, err := c.newGrantState(name, g)
	if err != nil {
		c.dropGrant(g)
		return nil, fmt.Errorf("acquire %q: %w", name, err)
	}
	h := st.addHandle(cfg.onLost)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.dropGrant(g)
		return nil, fmt.Errorf("acquire %q: %w", name, ErrClosed)
	}
	c.live[st] = struct{}{}
	if re != nil {
		re.st, st.re = st, re
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go renewer{st}.run()
	return h, nil
}

// canAcquire refuses an acquire on a closed client, or of a name this client
// holds: queueing behind itself could only end with the wait budget.
func (c *Client) canAcquire(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("acquire %q: %w", name, ErrClosed)
	}
	for st := range c.live {
		if st.name == name {
			return fmt.Errorf("acquire %q: %w (fencing token %d); use WithReentrant to share it", name, ErrAlreadyHeld, st.grant.FencingToken)
		}
	}
	return nil
}

// acquireError maps a backend error to what Acquire promises its caller.
func (c *Client) acquireError(name string, cfg acquireConfig, actx context.Context, err error) error {
	if errors.Is(err, ErrNotAcquired) {
		return c.notAcquired(name, 0)
	}
	if actx.Err() != nil && context.Cause(actx) == ErrClosed {
		return fmt.Errorf("acquire %q: %w", name, ErrClosed)
	}
	if errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("acquire %q: %w", name, err)
	}
	if actx.Err() != nil && context.Cause(actx) == errWaitBudget {
		return c.notAcquired(name, cfg.wait)
	}
	return fmt.Errorf("acquire %q: %w", name, err)
}

// holderLookupTimeout bounds the read naming the holder in a NotAcquiredError.
const holderLookupTimeout = 2 * time.Second

// notAcquired builds the error of an acquire that gave up, asking the
// service who holds the lock. When a wait budget ran out (wait > 0) and the
// service cannot be reached for that either, the acquire's error is that:
// nothing says the lock was busy. A single attempt (wait 0) was answered
// "held" by the service itself.
func (c *Client) notAcquired(name string, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(c.ctx, holderLookupTimeout)
	defer cancel()
	h, ok, err := c.backend.Holder(ctx, name)
	if wait > 0 && errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("acquire %q: %w", name, err)
	}
	return &NotAcquiredError{Name: name, Wait: wait, Holder: h, HolderKnown: ok && err == nil}
}

// Holder reports who holds name now, as the service sees it; ok is false
// when nobody does. It takes no place in the queue. It returns an error
// wrapping [ErrInvalidOption] for an empty name, one wrapping [ErrClosed]
// after Close, and otherwise the backend's transport error. Safe for
// concurrent use.
func (c *Client) Holder(ctx context.Context, name string) (h Holder, ok bool, err error) {
	if name == "" {
		return Holder{}, false, fmt.Errorf("%w: empty lock name", ErrInvalidOption)
	}
	if c.isClosed() {
		return Holder{}, false, fmt.Errorf("holder %q: %w", name, ErrClosed)
	}
	h, ok, err = c.backend.Holder(ctx, name)
	if err != nil {
		return Holder{}, false, fmt.Errorf("holder %q: %w", name, err)
	}
	return h, ok, nil
}

// dropGrant gives back a grant the client will not use, bounded by its TTL
// (after which the service drops it anyway).
func (c *Client) dropGrant(g Grant) {
	if g.Lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(g.TTL, time.Second))
	defer cancel()
	if err := g.Lease.Release(ctx); err != nil && !errors.Is(err, ErrLost) {
		c.log.Warn("lockclient: giving back an unused grant failed; it will expire", "err", err)
	}
}

// acquireReentrant joins the client's grant of name, or acquires it and
// registers it for later reentrant acquires.
func (c *Client) acquireReentrant(ctx context.Context, name string, cfg acquireConfig) (*Handle, error) {
	if cfg.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, cfg.wait, errWaitBudget)
		defer cancel()
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, fmt.Errorf("acquire %q: %w", name, ErrClosed)
		}
		re := c.reentrant[name]
		if re == nil {
			c.mu.Unlock()
			if err := c.canAcquire(name); err != nil {
				return nil, err
			}
			c.mu.Lock()
			if c.reentrant[name] != nil {
				c.mu.Unlock()
				continue // another reentrant acquire got there first
			}
			re = &reentry{ready: make(chan struct{})}
			c.reentrant[name] = re
			c.mu.Unlock()
			h, err := c.acquireGrant(ctx, name, cfg, re)
			c.mu.Lock()
			if err != nil && c.reentrant[name] == re {
				delete(c.reentrant, name)
			}
			close(re.ready)
			c.mu.Unlock()
			return h, err
		}
		if re.st != nil {
			// Entries are removed, under c.mu, in the same step that takes
			// their grant out of held, so this grant is held.
			h := re.st.addHandle(cfg.onLost)
			c.mu.Unlock()
			return h, nil
		}
		c.mu.Unlock()
		if !cfg.queue {
			// TryAcquire does not wait, not even for this client's own
			// acquire in flight.
			return nil, &NotAcquiredError{Name: name}
		}
		select {
		case <-re.ready:
		case <-ctx.Done():
			return nil, c.acquireError(name, cfg, ctx, ctx.Err())
		}
	}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// forget removes st from the client's registries. Called with c.mu held.
func (c *Client) forget(st *grantState) {
	delete(c.live, st)
	if st.re != nil && c.reentrant[st.name] == st.re {
		delete(c.reentrant, st.name)
	}
}

// Close releases every lock the client holds (cancelling their handles'
// contexts with cause [ErrClosed]), aborts pending acquires, and waits for the
// client's goroutines to exit, all bounded by ctx. It returns the release
// errors joined; handles released this way return nil from a later Release.
// After Close, Acquire and TryAcquire return [ErrClosed]. Close is
// idempotent and safe for concurrent use, but must not be called from an
// OnLost callback.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	var states []*grantState
	var deadlines []time.Time
	for st := range c.live {
		st.mu.Lock()
		st.phase = phaseReleased
		deadlines = append(deadlines, st.deadline)
		st.deadline = time.Time{}
		for _, h := range st.handles {
			h.released = true
			h.cancel(ErrClosed)
			close(h.releaseDone)
		}
		st.handles = nil
		st.mu.Unlock()
		states = append(states, st)
	}
	clear(c.live)
	clear(c.reentrant)
	c.mu.Unlock()

	c.cancel(ErrClosed)
	var errs []error
	for i, st := range states {
		errs = append(errs, st.release(ctx, deadlines[i], ErrClosed))
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("close: waiting for renewal goroutines: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}
