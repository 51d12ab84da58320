package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrWaitTimeout is returned by Acquire when no server connection became
// free within Config.WaitTimeout (PgBouncer's query_wait_timeout).
var ErrWaitTimeout = errors.New("pool: no server connection within the wait timeout (query_wait_timeout)")

// ErrClosed is returned by Acquire once Close has been called.
var ErrClosed = errors.New("pool: closed")

// Key names one pool: server connections are shared only between clients
// with the same database and user, and the same other startup parameters.
type Key struct {
	Database, User string
	// Startup is the other startup parameters the server connection is
	// opened with, in StartupKey's form; "" for none.
	Startup string
}

// StartupKey returns params, less user and database, in one string that is
// the same for the same parameters (names sorted; a NUL after each name
// and value, which neither can hold): a Key's Startup.
func StartupKey(params map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if k == "user" || k == "database" {
			continue
		}
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(params[k])
		b.WriteByte(0)
	}
	return b.String()
}

// startupParams returns the parameters a Startup string holds.
func startupParams(startup string) map[string]string {
	params := map[string]string{}
	parts := strings.Split(startup, "\x00")
	for i := 0; i+1 < len(parts); i += 2 {
		params[parts[i]] = parts[i+1]
	}
	return params
}

func (k Key) String() string { return k.User + "@" + k.Database }

// DialFunc opens one authenticated server connection for key, ready for a
// query (ReadyForQuery 'I' read). [Dialer.Dial] is the real one.
type DialFunc func(ctx context.Context, key Key) (*Conn, error)

// Config configures a Pool. Dial and Size are required.
type Config struct {
	// Dial opens a server connection; it is called without the pool's lock.
	Dial DialFunc
	// Size is the most server connections per Key, lent, idle and being
	// dialled together (PgBouncer's default_pool_size).
	Size int
	// WaitTimeout bounds how long Acquire waits for a connection; zero
	// means until the caller's context ends (query_wait_timeout).
	WaitTimeout time.Duration
	// IdleTimeout closes connections idle for longer; zero keeps them
	// (server_idle_timeout).
	IdleTimeout time.Duration
	// Lifetime closes a connection older than this when it is released
	// or idle; zero means no limit (server_lifetime).
	Lifetime time.Duration
	// DialTimeout bounds each Dial; zero means only the caller's context.
	DialTimeout time.Duration
	// MaxIdle bounds the idle connections of all keys together: when one
	// more goes idle, the one idle longest is closed. Zero: no bound.
	MaxIdle int
	// DropEmptyKeys forgets a key once it has no connection and no
	// waiter, its Stats with it: for a pool of many short-lived keys.
	DropEmptyKeys bool
	// OnWait, when set, is called (without the pool's lock) after each
	// Acquire that had to queue, with how long it waited and whether it
	// got a connection: the hook for a wait-time histogram.
	OnWait func(key Key, waited time.Duration, ok bool)
}

// Pool lends server connections per Key. Create it with New; Close it.
type Pool struct {
	cfg Config

	mu     sync.Mutex
	keys   map[Key]*keyPool
	closed bool

	reapAt     time.Time     // when the reaper wakes next; zero: when nudged
	wake       chan struct{} // nudges the reaper to recompute reapAt
	stop       chan struct{} // closed by Close
	reaperDone chan struct{}
}

// keyPool is the state of one Key, guarded by Pool.mu.
type keyPool struct {
	key     Key
	idle    []*Conn   // LIFO: the most recently returned is last
	open    int       // connections counted against Size: lent, idle, dialling
	waiters []*waiter // FIFO
	stats   waitStats
	// timer ends the waits of AcquireAsync callers (async.go); armed
	// while it is set to fire.
	timer      *time.Timer
	timerArmed bool
}

// waiter is one queued Acquire. Release hands it a grant: a connection, or
// (conn nil, err nil) a free slot to dial into, or an error.
type waiter struct {
	ch chan grant // buffered 1; written once, under Pool.mu
	// An AcquireAsync waiter has granted instead of ch (async.go), and
	// the start of its wait.
	granted func(Grant)
	since   time.Time
}

type grant struct {
	conn *Conn
	err  error
}

// New checks cfg and starts the pool's reaper when IdleTimeout or Lifetime
// is set.
func New(cfg Config) (*Pool, error) {
	if cfg.Dial == nil {
		return nil, errors.New("pool: Config.Dial is required")
	}
	if cfg.Size < 1 {
		return nil, fmt.Errorf("pool: Config.Size must be at least 1, got %d", cfg.Size)
	}
	if cfg.WaitTimeout < 0 || cfg.IdleTimeout < 0 || cfg.Lifetime < 0 || cfg.DialTimeout < 0 || cfg.MaxIdle < 0 {
		return nil, errors.New("pool: timeouts and MaxIdle must not be negative")
	}
	p := &Pool{
		cfg:        cfg,
		keys:       make(map[Key]*keyPool),
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		reaperDone: make(chan struct{}),
	}
	if cfg.IdleTimeout > 0 || cfg.Lifetime > 0 {
		go p.reap()
	} else {
		close(p.reaperDone)
	}
	return p, nil
}

// Acquire lends a server connection for key: the most recently returned
// idle one, else a new one while fewer than Size are open, else the first
// one released after every earlier waiter was served. It fails with
// ErrWaitTimeout, ErrClosed, ctx's error or the Dial error. The caller must
// Release what it gets.
func (p *Pool) Acquire(ctx context.Context, key Key) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	kp := p.keyPool(key)
	c, stale := p.popIdle(kp)
	if c != nil {
		c.lent = true
		p.mu.Unlock()
		closeAll(stale)
		return c, nil
	}
	if kp.open < p.cfg.Size {
		kp.open++
		p.mu.Unlock()
		closeAll(stale)
		return p.dial(ctx, key)
	}
	w := &waiter{ch: make(chan grant, 1)}
	kp.waiters = append(kp.waiters, w)
	kp.stats.waiting++
	p.mu.Unlock()
	closeAll(stale)
	return p.wait(ctx, key, w)
}

// wait blocks until w is granted something, ctx ends or WaitTimeout passes.
func (p *Pool) wait(ctx context.Context, key Key, w *waiter) (*Conn, error) {
	start := time.Now()
	var timeout <-chan time.Time
	if p.cfg.WaitTimeout > 0 {
		t := time.NewTimer(p.cfg.WaitTimeout)
		defer t.Stop()
		timeout = t.C
	}
	var g grant
	select {
	case g = <-w.ch:
	case <-ctx.Done():
		g = p.abandon(key, w, ctx.Err())
	case <-timeout:
		g = p.abandon(key, w, ErrWaitTimeout)
	}
	waited := time.Since(start)
	p.recordWait(key, waited)
	if p.cfg.OnWait != nil {
		p.cfg.OnWait(key, waited, g.err == nil)
	}
	switch {
	case g.err != nil:
		return nil, g.err
	case g.conn != nil:
		return g.conn, nil
	default:
		return p.dial(ctx, key)
	}
}

// abandon takes w out of the queue after its wait ended with err. A grant
// that raced in first is passed on: the connection to the next waiter or
// the idle stack (or closed, when the pool closed meanwhile), the slot to
// the next waiter or the pool.
func (p *Pool) abandon(key Key, w *waiter, err error) grant {
	p.mu.Lock()
	kp := p.keys[key]
	var toClose *Conn
	select {
	case g := <-w.ch:
		switch {
		case g.conn != nil && p.closed:
			kp.stats.closes++
			p.freeSlot(kp)
			toClose = g.conn
		case g.conn != nil:
			p.putBack(kp, g.conn)
		case g.err == nil:
			p.freeSlot(kp)
		}
	default:
		for i, q := range kp.waiters {
			if q == w {
				kp.waiters = append(kp.waiters[:i], kp.waiters[i+1:]...)
				break
			}
		}
		kp.stats.waiting--
	}
	p.mu.Unlock()
	if toClose != nil {
		toClose.close()
	}
	return grant{err: err}
}

// dial opens a connection into a slot already counted in open; on failure
// the slot is given back.
func (p *Pool) dial(ctx context.Context, key Key) (*Conn, error) {
	if p.cfg.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.DialTimeout)
		defer cancel()
	}
	c, err := p.cfg.Dial(ctx, key)
	if err != nil {
		p.mu.Lock()
		p.freeSlot(p.keys[key])
		p.mu.Unlock()
		return nil, fmt.Errorf("pool: dial %s: %w", key, err)
	}
	now := time.Now()
	c.key, c.pool, c.lent = key, p, true
	c.Defaults = maps.Clone(c.Params)
	c.Created, c.Returned = now, now
	p.mu.Lock()
	kp := p.keys[key]
	kp.stats.dials++
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.Release(c, false)
		return nil, ErrClosed
	}
	return c, nil
}

// Release takes back a lent connection. With reusable false (the
// connection broke, or the session state on it is unknown), or when it is
// older than Lifetime, or the pool is closed, it is closed and its slot
// freed, so that a waiter can dial a new one; otherwise the first waiter
// gets it, or it goes idle. Releasing a connection that is not lent panics.
func (p *Pool) Release(c *Conn, reusable bool) {
	closing, evicted := p.release(c, reusable)
	if closing {
		c.close()
	}
	if evicted != nil {
		evicted.close()
	}
}

// release takes c back, and reports whether the caller must close it, and
// which idle connection MaxIdle evicted, for the caller to close.
func (p *Pool) release(c *Conn, reusable bool) (closing bool, evicted *Conn) {
	now := time.Now()
	p.mu.Lock()
	if c.pool != p || !c.lent {
		p.mu.Unlock()
		panic("pool: Release of a connection that is not lent by this pool")
	}
	c.lent = false
	kp := p.keys[c.key]
	if !reusable || p.closed || p.expired(c, now) {
		kp.stats.closes++
		p.freeSlot(kp)
		p.mu.Unlock()
		return true, nil
	}
	c.Returned = now
	p.putBack(kp, c)
	evicted = p.evictOverMaxIdle()
	p.mu.Unlock()
	return false, evicted
}

// evictOverMaxIdle takes out, when more than MaxIdle connections are
// idle, the one idle longest, and returns it for the caller to close.
// Called with p.mu held.
func (p *Pool) evictOverMaxIdle() *Conn {
	if p.cfg.MaxIdle == 0 {
		return nil
	}
	idle := 0
	var oldest *keyPool
	for _, kp := range p.keys {
		idle += len(kp.idle)
		if len(kp.idle) > 0 && (oldest == nil || kp.idle[0].Returned.Before(oldest.idle[0].Returned)) {
			oldest = kp
		}
	}
	if idle <= p.cfg.MaxIdle {
		return nil
	}
	c := oldest.idle[0] // the stack's bottom: returned first
	oldest.idle[0] = nil
	oldest.idle = oldest.idle[1:]
	oldest.stats.closes++
	p.freeSlot(oldest)
	return c
}

// putBack lends c to the first waiter or makes it idle. Called with p.mu
// held.
func (p *Pool) putBack(kp *keyPool, c *Conn) {
	if len(kp.waiters) > 0 {
		c.lent = true
		p.grantFirst(kp, grant{conn: c})
		return
	}
	c.lent = false
	kp.idle = append(kp.idle, c)
	p.nudgeReaper(c)
}

// freeSlot gives a slot back: to the first waiter, to dial into, or to the
// pool. Called with p.mu held.
func (p *Pool) freeSlot(kp *keyPool) {
	if len(kp.waiters) > 0 {
		p.grantFirst(kp, grant{})
		return
	}
	kp.open--
	if p.cfg.DropEmptyKeys && kp.open == 0 && !kp.timerArmed {
		delete(p.keys, kp.key)
	}
}

// grantFirst dequeues the first waiter and hands it g. Called with p.mu held.
func (p *Pool) grantFirst(kp *keyPool, g grant) {
	w := kp.waiters[0]
	kp.waiters[0] = nil
	kp.waiters = kp.waiters[1:]
	kp.stats.waiting--
	if w.granted != nil {
		p.notify(kp, w, g)
		return
	}
	w.ch <- g
}

// popIdle returns the most recently returned idle connection that has not
// outlived Lifetime or IdleTimeout, and the stale ones it passed, whose
// slots it freed (for the caller to close without the lock). Called with
// p.mu held.
func (p *Pool) popIdle(kp *keyPool) (*Conn, []*Conn) {
	now := time.Now()
	var stale []*Conn
	for len(kp.idle) > 0 {
		c := kp.idle[len(kp.idle)-1]
		kp.idle[len(kp.idle)-1] = nil
		kp.idle = kp.idle[:len(kp.idle)-1]
		if !p.expired(c, now) && !p.idleTooLong(c, now) {
			return c, stale
		}
		kp.stats.closes++
		kp.open--
		stale = append(stale, c)
	}
	return nil, stale
}

func (p *Pool) expired(c *Conn, now time.Time) bool {
	return p.cfg.Lifetime > 0 && now.Sub(c.Created) >= p.cfg.Lifetime
}

func (p *Pool) idleTooLong(c *Conn, now time.Time) bool {
	return p.cfg.IdleTimeout > 0 && now.Sub(c.Returned) >= p.cfg.IdleTimeout
}

// keyPool returns key's state, making it on first use. Called with p.mu held.
func (p *Pool) keyPool(key Key) *keyPool {
	kp := p.keys[key]
	if kp == nil {
		kp = &keyPool{key: key}
		p.keys[key] = kp
	}
	return kp
}

// Close closes the idle connections, fails the queued and later Acquires
// with ErrClosed and stops the reaper. Connections still lent are closed
// when they are released. Close is idempotent.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.reaperDone
		return
	}
	p.closed = true
	var idle []*Conn
	for _, kp := range p.keys {
		for len(kp.waiters) > 0 {
			p.grantFirst(kp, grant{err: ErrClosed})
		}
		kp.stats.closes += int64(len(kp.idle))
		kp.open -= len(kp.idle)
		idle = append(idle, kp.idle...)
		kp.idle = nil
	}
	close(p.stop)
	p.mu.Unlock()
	closeAll(idle)
	<-p.reaperDone
}

func closeAll(conns []*Conn) {
	for _, c := range conns {
		c.close()
	}
}
