package memlock

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"
)

// Server is the in-process lock service that Conns talk to. Its zero value
// is not usable; call NewServer. It is safe for concurrent use.
type Server struct {
	mu      sync.Mutex
	last    int64 // last fencing token minted, shared by all names
	locks   map[string]*queue
	wakeups int64
}

// queue is one name's holder and FIFO of waiters.
type queue struct {
	holder  *lease
	waiters []*waiter
}

// waiter is a queued Acquire. granted is closed when the server makes it the
// holder (lease set first).
type waiter struct {
	ttl     time.Duration
	granted chan struct{}
	lease   *lease
}

// lease is a held grant.
type lease struct {
	s      *Server
	name   string
	token  int64
	owner  string
	ttl    time.Duration
	until  time.Time // expiry time; moved by renewals
	expiry *time.Timer
	lost   chan struct{} // closed when the server drops the lease
	gone   bool          // dropped: released, expired or revoked
}

// NewServer returns an empty lock service.
func NewServer() *Server {
	return &Server{locks: make(map[string]*queue)}
}

// Connect returns a new client connection to s: a lockclient.Backend with
// its own fault switches.
func (s *Server) Connect() *Conn {
	return &Conn{s: s}
}

// Holder returns the fencing token of name's current holder, if any.
func (s *Server) Holder(name string) (token int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.locks[name]; q != nil && q.holder != nil {
		return q.holder.token, true
	}
	return 0, false
}

// Waiters returns the number of callers queued for name.
func (s *Server) Waiters(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.locks[name]; q != nil {
		return len(q.waiters)
	}
	return 0
}

// Wakeups returns how many queued callers the server has woken: one per
// hand-off, never more.
func (s *Server) Wakeups() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wakeups
}

// Revoke drops name's current holder, as an operator or another client
// revoking its lease would, and reports whether there was one. The next
// waiter, if any, becomes the holder.
func (s *Server) Revoke(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.locks[name]
	if q == nil || q.holder == nil {
		return false
	}
	s.drop(q.holder)
	return true
}

// grantLocked makes a new lease for name. Called with s.mu held.
func (s *Server) grantLocked(name string, ttl time.Duration) *lease {
	s.last++
	l := &lease{s: s, name: name, token: s.last, owner: randomToken(), ttl: ttl, lost: make(chan struct{})}
	l.until = time.Now().Add(ttl)
	l.expiry = time.AfterFunc(ttl, l.expire)
	return l
}

func (l *lease) expire() {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if time.Now().Before(l.until) {
		return // renewed after the timer fired, before it got the lock
	}
	l.s.drop(l)
}

// drop removes l, if it is still held, and hands the lock to the next
// waiter. Called with s.mu held.
func (s *Server) drop(l *lease) {
	if l.gone {
		return
	}
	l.gone = true
	l.expiry.Stop()
	close(l.lost)
	q := s.locks[l.name]
	q.holder = nil
	if len(q.waiters) == 0 {
		delete(s.locks, l.name)
		return
	}
	w := q.waiters[0]
	q.waiters = q.waiters[1:]
	w.lease = s.grantLocked(l.name, w.ttl)
	q.holder = w.lease
	s.wakeups++
	close(w.granted)
}

// dequeue removes w from name's queue; if w was granted meanwhile it drops
// that grant instead. Called with s.mu held.
func (s *Server) dequeue(name string, w *waiter) {
	if w.lease != nil {
		s.drop(w.lease)
		return
	}
	q := s.locks[name]
	q.waiters = slices.DeleteFunc(q.waiters, func(o *waiter) bool { return o == w })
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
