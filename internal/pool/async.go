package pool

import (
	"context"
	"time"
)

// Acquiring without blocking, for a caller that serves many clients on one
// goroutine (an event loop): AcquireAsync answers at once, or queues the
// caller in the same FIFO as Acquire and calls it back later. The rules are
// Acquire's; only the waiting is the caller's.

// Grant is what AcquireAsync gives: a connection (Conn), a slot to dial
// into (Dial: the caller calls DialSlot, and Releases what it gets), or an
// error (ErrClosed, ErrWaitTimeout). Waited is how long the caller was
// queued (zero when it was not).
type Grant struct {
	Conn   *Conn
	Dial   bool
	Err    error
	Waited time.Duration
}

// Ticket is a queued AcquireAsync, for CancelWait: its place in the queue.
type Ticket struct {
	w   waiter
	key Key
}

// AcquireAsync lends a connection for key without blocking. When it can
// answer at once (an idle connection, a free slot to dial into, ErrClosed)
// it returns that Grant and a nil Ticket. Otherwise it queues the caller
// and returns a Ticket: granted is then called exactly once, with a
// connection, a slot, or ErrWaitTimeout after Config.WaitTimeout (or
// ErrClosed), unless CancelWait takes the caller out of the queue first.
// granted runs on the goroutine that releases a connection, with the
// pool's lock held: it must not block or call the pool.
//
// Config.OnWait is not called for these waits: the caller reports them
// with ReportWait, outside its own locks.
func (p *Pool) AcquireAsync(key Key, granted func(Grant)) (Grant, *Ticket) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return Grant{Err: ErrClosed}, nil
	}
	kp := p.keyPool(key)
	c, stale := p.popIdle(kp)
	var g Grant
	var t *Ticket
	switch {
	case c != nil:
		c.lent = true
		g.Conn = c
	case kp.open < p.cfg.Size:
		kp.open++
		g.Dial = true
	default:
		t = &Ticket{w: waiter{granted: granted, since: time.Now()}, key: key}
		kp.waiters = append(kp.waiters, &t.w)
		kp.stats.waiting++
		p.armTimeouts(key, kp)
	}
	p.mu.Unlock()
	if len(stale) > 0 {
		go closeAll(stale)
	}
	return g, t
}

// armTimeouts makes sure kp's timer fires when its oldest AcquireAsync
// waiter's WaitTimeout ends. One timer per Key, not one per wait: the
// queue is FIFO and every wait has the same timeout, so the oldest is
// always the next to time out. Called with p.mu held.
func (p *Pool) armTimeouts(key Key, kp *keyPool) {
	if p.cfg.WaitTimeout <= 0 || kp.timerArmed {
		return
	}
	kp.timerArmed = true
	if kp.timer == nil {
		kp.timer = time.AfterFunc(p.cfg.WaitTimeout, func() { p.timeOut(key) })
		return
	}
	kp.timer.Reset(p.cfg.WaitTimeout)
}

// timeOut takes the AcquireAsync waiters of key whose WaitTimeout has
// passed out of the queue with ErrWaitTimeout, and sets the timer for the
// next one.
func (p *Pool) timeOut(key Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kp := p.keys[key]
	kp.timerArmed = false
	now := time.Now()
	var next time.Duration
	for i := 0; i < len(kp.waiters); {
		w := kp.waiters[i]
		if w.granted == nil {
			i++
			continue
		}
		if left := p.cfg.WaitTimeout - now.Sub(w.since); left > 0 {
			next = left
			break
		}
		kp.waiters = append(kp.waiters[:i], kp.waiters[i+1:]...)
		kp.stats.waiting--
		p.notify(kp, w, grant{err: ErrWaitTimeout})
	}
	if next > 0 {
		kp.timerArmed = true
		kp.timer.Reset(next)
	}
}

// CancelWait takes a queued caller out of the queue; it reports false when
// granted has been called (or is being called) already: what it was given
// is then the caller's, to Release or Forgo.
func (p *Pool) CancelWait(t *Ticket) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	kp := p.keys[t.key]
	if kp == nil {
		return false // granted, and the key dropped since (DropEmptyKeys)
	}
	return p.dequeue(kp, &t.w)
}

// dequeue removes w from kp's queue; false when it is not there. Called
// with p.mu held.
func (p *Pool) dequeue(kp *keyPool, w *waiter) bool {
	for i, q := range kp.waiters {
		if q == w {
			kp.waiters = append(kp.waiters[:i], kp.waiters[i+1:]...)
			kp.stats.waiting--
			return true
		}
	}
	return false
}

// notify hands g to a dequeued AcquireAsync waiter, counting its wait.
// Called with p.mu held.
func (p *Pool) notify(kp *keyPool, w *waiter, g grant) {
	waited := time.Since(w.since)
	s := &kp.stats
	s.waits++
	s.totalWait += waited
	s.maxWait = max(s.maxWait, waited)
	w.granted(Grant{Conn: g.conn, Dial: g.conn == nil && g.err == nil, Err: g.err, Waited: waited})
}

// DialSlot opens a connection into the slot a Grant with Dial gave; on
// failure the slot is given back.
func (p *Pool) DialSlot(ctx context.Context, key Key) (*Conn, error) {
	return p.dial(ctx, key)
}

// ReleaseAsync is Release for a caller that must not block: a connection
// to be closed (not reusable, past Lifetime, or the pool closed) is closed
// on a goroutine of its own, as closing it says goodbye to the server.
func (p *Pool) ReleaseAsync(c *Conn, reusable bool) {
	closing, evicted := p.release(c, reusable)
	if closing {
		go c.close()
	}
	if evicted != nil {
		go evicted.close()
	}
}

// Forgo gives back what a Grant gave and the caller no longer wants: the
// connection, unused, goes to the next waiter or the idle stack, the slot
// to the next waiter or the pool. It does not block.
func (p *Pool) Forgo(key Key, g Grant) {
	switch {
	case g.Conn != nil:
		p.ReleaseAsync(g.Conn, true)
	case g.Dial:
		p.mu.Lock()
		p.freeSlot(p.keys[key])
		p.mu.Unlock()
	}
}

// ReportWait calls Config.OnWait for a wait of AcquireAsync's.
func (p *Pool) ReportWait(key Key, g Grant) {
	if p.cfg.OnWait != nil {
		p.cfg.OnWait(key, g.Waited, g.Err == nil)
	}
}
