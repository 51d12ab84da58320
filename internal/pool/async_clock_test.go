package pool_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pool"
)

// asyncWaiter records what AcquireAsync's callback was given.
type asyncWaiter struct {
	got chan pool.Grant
}

func queueAsync(t *testing.T, p *pool.Pool) (*asyncWaiter, *pool.Ticket) {
	t.Helper()
	w := &asyncWaiter{got: make(chan pool.Grant, 1)}
	g, ticket := p.AcquireAsync(key, func(g pool.Grant) { w.got <- g })
	if ticket == nil {
		t.Fatalf("AcquireAsync answered at once (%+v), want it queued", g)
	}
	return w, ticket
}

// mustNotQueue is AcquireAsync's callback where an answer at once is due.
func mustNotQueue(g pool.Grant) {
	panic("AcquireAsync queued a caller it should have answered at once")
}

func TestAsyncAcquireAnswersAtOnceWhenItCan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPipePool(t, pool.Config{Size: 1})
		g, ticket := p.AcquireAsync(key, mustNotQueue)
		if ticket != nil || !g.Dial {
			t.Fatalf("first AcquireAsync: %+v, queued %v; want a slot to dial", g, ticket != nil)
		}
		c, err := p.DialSlot(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		p.Release(c, true)
		if g, ticket = p.AcquireAsync(key, mustNotQueue); ticket != nil || g.Conn != c {
			t.Fatalf("AcquireAsync with one idle: %+v; want that connection", g)
		}
		p.Release(c, true)
	})
}

func TestAsyncWaitersAreServedInOrderAndTimeOutEachAfterItsOwnWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPipePool(t, pool.Config{Size: 1, WaitTimeout: 2 * time.Second})
		held := mustAcquire(t, p)
		first, _ := queueAsync(t, p)
		time.Sleep(time.Second)
		second, _ := queueAsync(t, p)
		cancelled, ticket := queueAsync(t, p)
		if !p.CancelWait(ticket) {
			t.Fatal("CancelWait of a queued caller reported it served")
		}
		start := time.Now()
		g := <-first.got
		if !errors.Is(g.Err, pool.ErrWaitTimeout) || time.Since(start) != time.Second || g.Waited != 2*time.Second {
			t.Fatalf("first waiter: %+v after %v; want ErrWaitTimeout 2s into its wait", g, time.Since(start))
		}
		g = <-second.got
		if !errors.Is(g.Err, pool.ErrWaitTimeout) || time.Since(start) != 2*time.Second {
			t.Fatalf("second waiter: %+v after %v; want ErrWaitTimeout 2s into its own wait", g, time.Since(start))
		}
		third, _ := queueAsync(t, p)
		p.Release(held, true)
		if g := <-third.got; g.Conn != held || g.Err != nil {
			t.Fatalf("third waiter: %+v; want the released connection", g)
		}
		select {
		case g := <-cancelled.got:
			t.Fatalf("a cancelled waiter was given %+v", g)
		default:
		}
		if st := p.Stats()[key]; st.Waiting != 0 || st.Waits != 3 {
			t.Fatalf("stats %+v: want nobody waiting, 3 waits counted", st)
		}
		p.Release(held, true)
	})
}

func TestForgoneGrantGoesToTheNextWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPipePool(t, pool.Config{Size: 1})
		held := mustAcquire(t, p)
		gone, _ := queueAsync(t, p)
		next, _ := queueAsync(t, p)
		p.Release(held, true)
		p.Forgo(key, <-gone.got) // its client left before it took the connection
		if g := <-next.got; g.Conn != held {
			t.Fatalf("next waiter: %+v; want the forgone connection", g)
		}
		p.Release(held, true)
	})
}
