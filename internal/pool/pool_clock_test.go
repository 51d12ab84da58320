package pool_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pool"
)

// pipeServer is a fake upstream for the pool's clock and bookkeeping: each
// Dial returns one end of a net.Pipe, numbered by PID from 1; the other end
// is drained until the pool closes it.
type pipeServer struct {
	mu     sync.Mutex
	dials  int
	closed map[uint32]bool
}

func (s *pipeServer) dial(context.Context, pool.Key) (*pool.Conn, error) {
	client, server := net.Pipe()
	s.mu.Lock()
	s.dials++
	pid := uint32(s.dials)
	s.mu.Unlock()
	go func() {
		io.Copy(io.Discard, server)
		s.mu.Lock()
		s.closed[pid] = true
		s.mu.Unlock()
	}()
	return &pool.Conn{NetConn: client, PID: pid}, nil
}

func (s *pipeServer) isClosed(pid uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed[pid]
}

var key = pool.Key{Database: "db", User: "u"}

// newPipePool makes a pool over a pipeServer; call it inside a synctest
// bubble, so that the reaper runs on the bubble's clock.
func newPipePool(t *testing.T, cfg pool.Config) (*pool.Pool, *pipeServer) {
	t.Helper()
	s := &pipeServer{closed: map[uint32]bool{}}
	cfg.Dial = s.dial
	p, err := pool.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, s
}

func mustAcquire(t *testing.T, p *pool.Pool) *pool.Conn {
	t.Helper()
	c, err := p.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestIdleConnIsClosedAfterIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, s := newPipePool(t, pool.Config{Size: 2, IdleTimeout: time.Minute})
		c := mustAcquire(t, p)
		time.Sleep(10 * time.Minute) // lent time does not count as idle
		p.Release(c, true)
		time.Sleep(time.Minute - time.Second)
		synctest.Wait()
		if s.isClosed(1) || p.Stats()[key].Idle != 1 {
			t.Fatal("closed before IdleTimeout")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if !s.isClosed(1) {
			t.Fatal("still open after IdleTimeout")
		}
		if st := p.Stats()[key]; st.Idle != 0 || st.Active != 0 || st.Closes != 1 {
			t.Fatalf("stats %+v after the reaper", st)
		}
		if c := mustAcquire(t, p); c.PID != 2 {
			t.Fatalf("Acquire after the reap got conn %d, want a new one", c.PID)
		} else {
			p.Release(c, true)
		}
	})
}

func TestReaperFollowsEachIdleConnsOwnDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, s := newPipePool(t, pool.Config{Size: 2, IdleTimeout: time.Minute})
		a, b := mustAcquire(t, p), mustAcquire(t, p)
		p.Release(a, true)
		time.Sleep(30 * time.Second)
		p.Release(b, true)
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if !s.isClosed(a.PID) || s.isClosed(b.PID) {
			t.Fatalf("after 61s/31s idle: closed a=%v b=%v, want only a", s.isClosed(a.PID), s.isClosed(b.PID))
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if !s.isClosed(b.PID) {
			t.Fatal("b still open after a minute idle")
		}
	})
}

func TestConnOlderThanLifetimeIsClosedOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, s := newPipePool(t, pool.Config{Size: 1, Lifetime: time.Hour})
		c := mustAcquire(t, p)
		time.Sleep(time.Hour)
		p.Release(c, true)
		synctest.Wait()
		if !s.isClosed(c.PID) {
			t.Fatal("a connection past Lifetime went back to the pool")
		}
		next := mustAcquire(t, p)
		if next.PID == c.PID {
			t.Fatal("the expired connection was lent again")
		}
		p.Release(next, true)
	})
}

func TestIdleConnOlderThanLifetimeIsClosedByTheReaper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, s := newPipePool(t, pool.Config{Size: 1, Lifetime: time.Hour, IdleTimeout: 24 * time.Hour})
		c := mustAcquire(t, p)
		time.Sleep(59 * time.Minute)
		p.Release(c, true)
		time.Sleep(time.Minute)
		synctest.Wait()
		if !s.isClosed(c.PID) {
			t.Fatal("an idle connection outlived Lifetime")
		}
	})
}

func TestAcquireLendsTheMostRecentlyReturnedConn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPipePool(t, pool.Config{Size: 3})
		a, b, c := mustAcquire(t, p), mustAcquire(t, p), mustAcquire(t, p)
		p.Release(b, true)
		p.Release(a, true)
		p.Release(c, true)
		for _, want := range []*pool.Conn{c, a, b} {
			got := mustAcquire(t, p)
			defer p.Release(got, true)
			if got != want {
				t.Fatalf("got conn %d, want %d (last returned first)", got.PID, want.PID)
			}
		}
	})
}

func TestWaitTimeoutCountsFromTheStartOfTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPipePool(t, pool.Config{Size: 1, WaitTimeout: 5 * time.Second})
		held := mustAcquire(t, p)
		start := time.Now()
		_, err := p.Acquire(t.Context(), key)
		if !errors.Is(err, pool.ErrWaitTimeout) || time.Since(start) != 5*time.Second {
			t.Fatalf("Acquire returned %v after %v, want ErrWaitTimeout after 5s", err, time.Since(start))
		}
		go func() {
			time.Sleep(4 * time.Second)
			p.Release(held, true)
		}()
		c := mustAcquire(t, p)
		defer p.Release(c, true)
		if c != held {
			t.Fatal("the waiter did not get the released connection")
		}
		if st := p.Stats()[key]; st.Waits != 2 || st.MaxWait != 5*time.Second || st.TotalWait != 9*time.Second {
			t.Fatalf("wait stats %+v", st)
		}
	})
}

func TestCancelledWaiterLeavesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPipePool(t, pool.Config{Size: 1})
		held := mustAcquire(t, p)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error)
		go func() {
			_, err := p.Acquire(ctx, key)
			errc <- err
		}()
		synctest.Wait()
		if n := p.Stats()[key].Waiting; n != 1 {
			t.Fatalf("%d waiting, want 1", n)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire returned %v", err)
		}
		p.Release(held, true)
		if st := p.Stats()[key]; st.Waiting != 0 || st.Idle != 1 {
			t.Fatalf("stats %+v: the released conn should be idle", st)
		}
	})
}

func TestCloseFailsWaitersAndStopsTheReaper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, s := newPipePool(t, pool.Config{Size: 1, IdleTimeout: time.Minute})
		held := mustAcquire(t, p)
		errc := make(chan error)
		go func() {
			_, err := p.Acquire(t.Context(), key)
			errc <- err
		}()
		synctest.Wait()
		p.Close()
		if err := <-errc; !errors.Is(err, pool.ErrClosed) {
			t.Fatalf("queued Acquire returned %v at Close, want ErrClosed", err)
		}
		p.Release(held, true)
		synctest.Wait()
		if !s.isClosed(held.PID) {
			t.Fatal("a connection released after Close stayed open")
		}
		// synctest.Test fails if the reaper goroutine were still running.
	})
}

func TestReleasingAConnTwicePanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPipePool(t, pool.Config{Size: 1})
		c := mustAcquire(t, p)
		p.Release(c, true)
		defer func() {
			if recover() == nil {
				t.Fatal("second Release did not panic")
			}
		}()
		p.Release(c, true)
	})
}

func TestWaiterWhoseContextEndsAsItIsServedLosesNoConnOrSlot(t *testing.T) {
	for _, reusable := range []bool{true, false} {
		for range 20 { // both orders of the waiter's select, by chance
			synctest.Test(t, func(t *testing.T) {
				p, _ := newPipePool(t, pool.Config{Size: 1})
				held := mustAcquire(t, p)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					if c, err := p.Acquire(ctx, key); err == nil {
						p.Release(c, true)
					}
				}()
				synctest.Wait()
				cancel()
				p.Release(held, reusable)
				<-done
				if st := p.Stats()[key]; st.Active != 0 || st.Waiting != 0 {
					t.Fatalf("stats %+v: a conn or slot was lost", st)
				}
				p.Release(mustAcquire(t, p), true) // Size 1 still has its slot
			})
		}
	}
}
