package memlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
)

// ErrPartitioned is the transport error of every call on a partitioned Conn.
var ErrPartitioned = errors.New("memlock: connection partitioned")

// MinTTL is the smallest TTL a Conn accepts.
const MinTTL = time.Millisecond

// Op names a kind of call in a Conn's log.
type Op string

// The calls a Conn logs.
const (
	OpAcquire Op = "acquire"
	OpRenew   Op = "renew"
	OpRelease Op = "release"
	OpHolder  Op = "holder"
)

// Call is one logged call: what, and when it was made (before any injected
// latency or pause).
type Call struct {
	Op Op
	At time.Time
}

// Conn is one client's connection to a Server and implements
// lockclient.Backend. Its switches inject faults into the calls made through
// it from the moment they are set: SetPartitioned, SetLatency and Pause. It
// is safe for concurrent use.
type Conn struct {
	s *Server

	mu          sync.Mutex
	partitioned bool
	deaf        bool // the server's loss notices do not reach this Conn
	latency     time.Duration
	paused      chan struct{} // non-nil while paused; closed by Resume
	calls       []Call
}

// SetPartitioned makes every later call fail with ErrPartitioned (true) or
// succeed again (false). The server goes on as before: leases held through
// the Conn expire if not renewed.
func (c *Conn) SetPartitioned(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partitioned = on
}

// SetDeaf makes the grants acquired through c from now on deaf (true) to the
// server dropping them: their Lost channel never closes, as when the
// client's watch sits on a stalled server. Renewals and releases still
// hear the truth.
func (c *Conn) SetDeaf(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deaf = on
}

// SetLatency delays every later call by d before the server sees it. A call
// whose ctx ends during the delay returns ctx's error without reaching the
// server.
func (c *Conn) SetLatency(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latency = d
}

// Pause stops the holder behind this Conn, as SIGSTOP or a long GC pause
// would: every later call blocks, ignoring its ctx, until Resume, and then
// proceeds. Time goes on meanwhile, so the server may expire its leases.
func (c *Conn) Pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused == nil {
		c.paused = make(chan struct{})
	}
}

// Resume lets the calls blocked by Pause proceed.
func (c *Conn) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused != nil {
		close(c.paused)
		c.paused = nil
	}
}

// Calls returns the calls made through c so far, oldest first.
func (c *Conn) Calls(op Op) []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Call
	for _, call := range c.calls {
		if call.Op == op {
			out = append(out, call)
		}
	}
	return out
}

// enter logs a call and applies the fault switches to it.
func (c *Conn) enter(ctx context.Context, op Op) error {
	c.mu.Lock()
	c.calls = append(c.calls, Call{Op: op, At: time.Now()})
	paused, latency := c.paused, c.latency
	c.mu.Unlock()
	if paused != nil {
		<-paused
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitioned {
		return ErrPartitioned
	}
	return nil
}

// CheckTTL accepts any TTL of at least MinTTL.
func (c *Conn) CheckTTL(ttl time.Duration) error {
	if ttl < MinTTL {
		return fmt.Errorf("%w: TTL %v is below the memory backend's minimum of %v", lockclient.ErrInvalidOption, ttl, MinTTL)
	}
	return nil
}

// Acquire implements lockclient.Backend.
func (c *Conn) Acquire(ctx context.Context, req lockclient.Request) (lockclient.Grant, error) {
	sent := time.Now()
	if err := c.enter(ctx, OpAcquire); err != nil {
		return lockclient.Grant{}, unavailable(err)
	}
	s := c.s
	s.mu.Lock()
	q := s.locks[req.Name]
	if q == nil {
		q = &queue{}
		s.locks[req.Name] = q
	}
	if q.holder == nil && len(q.waiters) == 0 {
		q.holder = s.grantLocked(req.Name, req.TTL)
		s.mu.Unlock()
		return c.grant(q.holder, sent), nil
	}
	if !req.Wait {
		s.mu.Unlock()
		return lockclient.Grant{}, fmt.Errorf("memlock: %q is held: %w", req.Name, lockclient.ErrNotAcquired)
	}
	w := &waiter{ttl: req.TTL, granted: make(chan struct{})}
	q.waiters = append(q.waiters, w)
	s.mu.Unlock()

	select {
	case <-w.granted:
		// In process there is no transport delay: the lease's TTL starts
		// now, on the same clock.
		return c.grant(w.lease, time.Now()), nil
	case <-ctx.Done():
		s.mu.Lock()
		s.dequeue(req.Name, w)
		s.mu.Unlock()
		return lockclient.Grant{}, ctx.Err()
	}
}

func (c *Conn) grant(l *lease, start time.Time) lockclient.Grant {
	c.mu.Lock()
	lost := l.lost
	if c.deaf {
		lost = make(chan struct{}) // never closed
	}
	c.mu.Unlock()
	return lockclient.Grant{
		FencingToken:   l.token,
		OwnershipToken: l.owner,
		Start:          start,
		TTL:            l.ttl,
		Lease:          &connLease{c: c, l: l, lost: lost},
	}
}

// Holder implements lockclient.Backend.
func (c *Conn) Holder(ctx context.Context, name string) (lockclient.Holder, bool, error) {
	if err := c.enter(ctx, OpHolder); err != nil {
		return lockclient.Holder{}, false, unavailable(err)
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.locks[name]
	if q == nil || q.holder == nil {
		return lockclient.Holder{}, false, nil
	}
	return lockclient.Holder{FencingToken: q.holder.token, OwnershipToken: q.holder.owner}, true, nil
}

// connLease is a lease as seen through one Conn.
type connLease struct {
	c        *Conn
	l        *lease
	lost     chan struct{}
	released bool // a Release through this lease dropped it (guarded by the server's mu)
}

func (cl *connLease) Lost() <-chan struct{} { return cl.lost }

func (cl *connLease) Renew(ctx context.Context) (time.Duration, error) {
	if err := cl.c.enter(ctx, OpRenew); err != nil {
		return 0, err
	}
	s := cl.l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if cl.l.gone {
		return 0, fmt.Errorf("memlock: lease of %q is gone: %w", cl.l.name, lockclient.ErrLost)
	}
	cl.l.until = time.Now().Add(cl.l.ttl)
	cl.l.expiry.Reset(cl.l.ttl)
	return cl.l.ttl, nil
}

func (cl *connLease) Release(ctx context.Context) error {
	if err := cl.c.enter(ctx, OpRelease); err != nil {
		return err
	}
	s := cl.l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if cl.l.gone {
		// Never a later grant: this lease is gone, by expiry or revocation,
		// unless an earlier Release through it dropped it.
		if cl.released {
			return nil
		}
		return fmt.Errorf("memlock: lease of %q was already gone: %w", cl.l.name, lockclient.ErrLost)
	}
	cl.released = true
	s.drop(cl.l)
	return nil
}

// unavailable is what Acquire and Holder return over a partition: the
// service was not reached (a *lockclient.UnavailableError wrapping
// ErrPartitioned). Renewals and releases return ErrPartitioned itself, a
// transport error of a grant the service did answer for.
func unavailable(err error) error {
	if !errors.Is(err, ErrPartitioned) {
		return err
	}
	return &lockclient.UnavailableError{Store: "memlock", Err: err}
}
