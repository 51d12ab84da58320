package lockclient_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenceproxy/fenceproxy/lockclient"
	"github.com/fenceproxy/fenceproxy/lockclient/memlock"
)

// The tests run in synctest bubbles: time is fake and advances only when
// every goroutine in the bubble is blocked, so nothing sleeps for real and
// every timing below is exact.

const ttl = 3 * time.Second

var drift = lockclient.DefaultDriftAllowance(ttl)

func newClient(t *testing.T, b lockclient.Backend, opts ...lockclient.Option) *lockclient.Client {
	t.Helper()
	// Logs go to the test's output: shown only when it fails.
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	c, err := lockclient.New(b, append([]lockclient.Option{lockclient.WithLogger(logger)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func mustAcquire(t *testing.T, c *lockclient.Client, name string, opts ...lockclient.AcquireOption) *lockclient.Handle {
	t.Helper()
	h, err := c.Acquire(t.Context(), name, append([]lockclient.AcquireOption{lockclient.WithTTL(ttl)}, opts...)...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", name, err)
	}
	return h
}

// lostRecorder is an OnLost callback that counts its calls.
type lostRecorder struct {
	calls atomic.Int32
	mu    sync.Mutex
	err   error
}

func (r *lostRecorder) onLost(_ *lockclient.Handle, err error) {
	r.calls.Add(1)
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

func (r *lostRecorder) check(t *testing.T, wantCalls int32) {
	t.Helper()
	if got := r.calls.Load(); got != wantCalls {
		t.Fatalf("OnLost called %d times, want %d", got, wantCalls)
	}
	if wantCalls > 0 {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !errors.Is(r.err, lockclient.ErrLost) {
			t.Fatalf("OnLost error %v does not wrap ErrLost", r.err)
		}
	}
}

func checkLost(t *testing.T, h *lockclient.Handle) {
	t.Helper()
	if h.Context().Err() == nil {
		t.Fatal("Context not cancelled after loss")
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, lockclient.ErrLost) {
		t.Fatalf("Context cause %v does not wrap ErrLost", cause)
	}
	if h.IsHeld() {
		t.Fatal("IsHeld true after loss")
	}
	if !h.ValidUntil().IsZero() {
		t.Fatalf("ValidUntil %v after loss, want zero", h.ValidUntil())
	}
	if err := h.Release(t.Context()); !errors.Is(err, lockclient.ErrLost) {
		t.Fatalf("Release after loss = %v, want ErrLost", err)
	}
}

func TestRenewalCadenceAndJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memlock.NewServer().Connect()
		c := newClient(t, conn)
		start := time.Now()
		h := mustAcquire(t, c, "a")
		time.Sleep(30 * time.Second)

		renews := conn.Calls(memlock.OpRenew)
		if n := len(renews); n < 27 || n > 34 {
			t.Fatalf("%d renewals in 30s with interval 1s", n)
		}
		interval := ttl / 3
		lo, hi := interval*9/10, interval*11/10
		prev := start
		gaps := make(map[time.Duration]bool)
		for i, r := range renews {
			gap := r.At.Sub(prev)
			if gap < lo || gap > hi {
				t.Errorf("renewal %d came %v after the previous one, want within [%v, %v]", i, gap, lo, hi)
			}
			gaps[gap] = true
			prev = r.At
		}
		if len(gaps) < len(renews)/2 {
			t.Errorf("only %d distinct gaps in %d renewals: no jitter", len(gaps), len(renews))
		}
		last := renews[len(renews)-1].At
		if want := last.Add(ttl - drift); !h.ValidUntil().Equal(want) {
			t.Errorf("ValidUntil = %v after last renewal at %v, want %v", h.ValidUntil(), last, want)
		}
		if !h.IsHeld() {
			t.Error("IsHeld false while renewals succeed")
		}
		if err := h.Release(t.Context()); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})
}

func TestValidityDeadlineFromSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memlock.NewServer().Connect()
		conn.SetLatency(200 * time.Millisecond)
		c := newClient(t, conn, lockclient.WithDriftAllowance(50*time.Millisecond))
		sent := time.Now()
		h := mustAcquire(t, c, "a")
		if got := time.Since(sent); got != 200*time.Millisecond {
			t.Fatalf("acquire took %v, want the injected 200ms", got)
		}
		// The acquisition's own time is not held time.
		if want := sent.Add(ttl - 50*time.Millisecond); !h.ValidUntil().Equal(want) {
			t.Fatalf("ValidUntil = %v, want send time + TTL - drift = %v", h.ValidUntil(), want)
		}
	})
}

func TestLostAfterTransportErrorBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memlock.NewServer().Connect()
		c := newClient(t, conn)
		var rec lostRecorder
		h := mustAcquire(t, c, "a", lockclient.WithOnLost(rec.onLost))
		conn.SetPartitioned(true)

		// The first failure (at 0.9–1.1 s) is within the budget.
		time.Sleep(1200 * time.Millisecond)
		if h.Context().Err() != nil || !h.IsHeld() {
			t.Fatal("lost after one transport error; the budget is 2")
		}
		rec.check(t, 0)
		// The second (at 1.8–2.2 s) spends it.
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if n := len(conn.Calls(memlock.OpRenew)); n != lockclient.DefaultTransportErrorBudget {
			t.Fatalf("%d renewals before Lost, want %d", n, lockclient.DefaultTransportErrorBudget)
		}
		rec.check(t, 1)
		rec.mu.Lock()
		if !errors.Is(rec.err, memlock.ErrPartitioned) {
			t.Errorf("loss error %v does not carry the transport error", rec.err)
		}
		rec.mu.Unlock()
		checkLost(t, h)
		time.Sleep(10 * time.Second)
		rec.check(t, 1)
	})
}

func TestLostWhenDeadlineTooClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		conn := srv.Connect()
		// A budget the validity window cannot fit: the local check must
		// end it, without a third call to the service.
		c := newClient(t, conn, lockclient.WithTransportErrorBudget(5))
		var rec lostRecorder
		start := time.Now()
		h := mustAcquire(t, c, "a", lockclient.WithOnLost(rec.onLost))
		conn.SetPartitioned(true)
		<-h.Context().Done()
		at := time.Since(start)
		if at < 2700*time.Millisecond || at > 3300*time.Millisecond {
			t.Errorf("lost at %v, want at the third renewal time (2.7–3.3 s)", at)
		}
		if n := len(conn.Calls(memlock.OpRenew)); n != 2 {
			t.Errorf("%d renewal calls, want 2: the third attempt must be refused locally", n)
		}
		synctest.Wait()
		rec.check(t, 1)
		checkLost(t, h)
	})
}

func TestLostWhenSlowRenewalLeavesTooLittle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memlock.NewServer().Connect()
		c := newClient(t, conn)
		var rec lostRecorder
		h := mustAcquire(t, c, "a", lockclient.WithOnLost(rec.onLost))
		// The first renewal (sent at 0.9–1.1 s) succeeds after 1.6 s,
		// extending validity to its send time + 3 s - drift. The next
		// attempt comes 0.9–1.1 s later, with 0.27–0.47 s of validity
		// left: less than half an interval, still positive. It must give
		// up locally rather than ask the service.
		conn.SetLatency(1600 * time.Millisecond)
		<-h.Context().Done()
		if n := len(conn.Calls(memlock.OpRenew)); n != 1 {
			t.Fatalf("%d renewal calls, want 1: the second attempt must be refused locally", n)
		}
		first := conn.Calls(memlock.OpRenew)[0].At
		if left := time.Until(first.Add(ttl - drift)); left <= 0 || left >= ttl/6 {
			t.Fatalf("lost with %v of validity left, want between 0 and half an interval", left)
		}
		synctest.Wait()
		rec.check(t, 1)
		checkLost(t, h)
	})
}

func TestRenewalBoundedByValidity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memlock.NewServer().Connect()
		c := newClient(t, conn, lockclient.WithTransportErrorBudget(5))
		var rec lostRecorder
		h := mustAcquire(t, c, "a", lockclient.WithOnLost(rec.onLost))
		deadline := h.ValidUntil()
		conn.SetLatency(time.Hour) // the service stops answering
		time.Sleep(time.Until(deadline) - time.Nanosecond)
		if h.Context().Err() != nil {
			t.Fatal("lost before the validity deadline")
		}
		if h.IsHeld() != true {
			t.Fatal("IsHeld false before the deadline")
		}
		time.Sleep(time.Nanosecond)
		if h.IsHeld() {
			t.Fatal("IsHeld true at the validity deadline")
		}
		// The hung renewal was abandoned at the deadline, which leaves
		// nothing to retry with: the loss is declared there and then.
		<-h.Context().Done()
		if !time.Now().Equal(deadline) {
			t.Errorf("lost %v after the validity deadline", time.Since(deadline))
		}
		if n := len(conn.Calls(memlock.OpRenew)); n != 1 {
			t.Errorf("%d renewal calls, want 1", n)
		}
		synctest.Wait()
		rec.check(t, 1)
		checkLost(t, h)
	})
}

func TestStoppedHolderLosesToNextHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		connA, connB := srv.Connect(), srv.Connect()
		a, b := newClient(t, connA), newClient(t, connB)
		var rec lostRecorder
		ha := mustAcquire(t, a, "x", lockclient.WithOnLost(rec.onLost))
		connA.Pause()
		time.Sleep(ttl + time.Second)
		if ha.IsHeld() {
			t.Error("IsHeld true past the validity deadline of a stopped holder")
		}
		hb, err := b.TryAcquire(t.Context(), "x", lockclient.WithTTL(ttl))
		if err != nil {
			t.Fatalf("second client after the first's lease expired: %v", err)
		}
		if hb.FencingToken() <= ha.FencingToken() {
			t.Fatalf("new holder's token %d not above the stopped holder's %d", hb.FencingToken(), ha.FencingToken())
		}
		connA.Resume()
		synctest.Wait()
		rec.check(t, 1)
		checkLost(t, ha)
		if tok, ok := srv.Holder("x"); !ok || tok != hb.FencingToken() {
			t.Fatalf("holder after the stopped one woke = %d, %v; want %d", tok, ok, hb.FencingToken())
		}
		if !hb.IsHeld() {
			t.Fatal("new holder disturbed by the old one waking up")
		}
	})
}

func TestLostWhenServiceDropsGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		c := newClient(t, srv.Connect())
		var rec lostRecorder
		h := mustAcquire(t, c, "x", lockclient.WithOnLost(rec.onLost))
		time.Sleep(100 * time.Millisecond)
		srv.Revoke("x")
		synctest.Wait()
		// Noticed at once, not at the next renewal.
		rec.check(t, 1)
		checkLost(t, h)
	})
}

func TestWaitBudgetHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		c := newClient(t, srv.Connect())
		holder := mustAcquire(t, newClient(t, srv.Connect()), "x")
		start := time.Now()
		_, err := c.Acquire(t.Context(), "x", lockclient.WithTTL(ttl), lockclient.WithWait(2*time.Second))
		var nae *lockclient.NotAcquiredError
		if !errors.Is(err, lockclient.ErrNotAcquired) || !errors.As(err, &nae) {
			t.Fatalf("Acquire on a held lock = %v, want a NotAcquiredError", err)
		}
		if !nae.HolderKnown || nae.Holder.FencingToken != holder.FencingToken() || nae.Wait != 2*time.Second {
			t.Fatalf("NotAcquiredError %+v does not name the holder (token %d) and the budget", nae, holder.FencingToken())
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Fatalf("gave up after %v, want the 2s budget", waited)
		}
		if n := srv.Waiters("x"); n != 0 {
			t.Fatalf("%d queue entries left after giving up", n)
		}
	})
}

func TestWaitBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		c := newClient(t, srv.Connect())
		mustAcquire(t, newClient(t, srv.Connect()), "x")
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := c.Acquire(ctx, "x", lockclient.WithTTL(ttl), lockclient.WithWait(time.Minute))
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lockclient.ErrNotAcquired) {
			t.Fatalf("Acquire with an expiring ctx = %v, want the ctx's error", err)
		}
		if n := srv.Waiters("x"); n != 0 {
			t.Fatalf("%d queue entries left after giving up", n)
		}
	})
}

func TestTryAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		c := newClient(t, srv.Connect())
		h := mustAcquire(t, newClient(t, srv.Connect()), "x")
		start := time.Now()
		_, err := c.TryAcquire(t.Context(), "x")
		var nae *lockclient.NotAcquiredError
		if !errors.As(err, &nae) || nae.Holder.FencingToken != h.FencingToken() || nae.Wait != 0 {
			t.Fatalf("TryAcquire on a held lock = %v, want a NotAcquiredError naming token %d", err, h.FencingToken())
		}
		if time.Since(start) != 0 || srv.Waiters("x") != 0 {
			t.Fatal("TryAcquire waited or queued")
		}
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		h2, err := c.TryAcquire(t.Context(), "x")
		if err != nil {
			t.Fatalf("TryAcquire on a free lock: %v", err)
		}
		if h2.FencingToken() <= h.FencingToken() {
			t.Fatalf("token %d after %d", h2.FencingToken(), h.FencingToken())
		}
	})
}

func TestFIFOHandoffWakesOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		c := newClient(t, srv.Connect())
		holder := mustAcquire(t, c, "x")
		const waiters = 5
		got := make(chan int, waiters)
		handles := make([]*lockclient.Handle, waiters)
		for i := range waiters {
			// A client holds a name at most once: contenders have their own.
			wc := newClient(t, srv.Connect())
			go func() {
				h, err := wc.Acquire(context.Background(), "x", lockclient.WithTTL(ttl))
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				handles[i] = h
				got <- i
			}()
			synctest.Wait() // queued before the next one starts
		}
		last := holder.FencingToken()
		if err := holder.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		for want := range waiters {
			i := <-got
			if i != want {
				t.Fatalf("waiter %d acquired in turn %d: not FIFO", i, want)
			}
			synctest.Wait()
			if n := srv.Wakeups(); n != int64(want+1) {
				t.Fatalf("%d wake-ups after %d releases", n, want+1)
			}
			h := handles[i]
			if h.FencingToken() <= last {
				t.Fatalf("token %d after %d", h.FencingToken(), last)
			}
			last = h.FencingToken()
			// A waiter's validity starts when it is granted, not when it queued.
			if want := time.Now().Add(ttl - drift); !h.ValidUntil().Equal(want) {
				t.Fatalf("waiter's ValidUntil %v, want %v", h.ValidUntil(), want)
			}
			time.Sleep(2 * time.Second) // hold across a renewal
			if err := h.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestReentrancyRefcount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		conn := srv.Connect()
		c := newClient(t, conn)
		h1 := mustAcquire(t, c, "x", lockclient.WithReentrant())
		h2 := mustAcquire(t, c, "x", lockclient.WithReentrant())
		if h1 == h2 || h1.FencingToken() != h2.FencingToken() || h1.OwnershipToken() != h2.OwnershipToken() {
			t.Fatal("reentrant acquire did not share the grant in a new handle")
		}
		if n := len(conn.Calls(memlock.OpAcquire)); n != 1 {
			t.Fatalf("%d acquire calls to the service, want 1", n)
		}
		if err := h1.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if h1.IsHeld() || h1.Context().Err() == nil {
			t.Fatal("released inner handle still looks held")
		}
		time.Sleep(5 * time.Second)
		if !h2.IsHeld() || h2.Context().Err() != nil {
			t.Fatal("outer handle lost its lock when the inner one was released")
		}
		if _, ok := srv.Holder("x"); !ok || len(conn.Calls(memlock.OpRelease)) != 0 {
			t.Fatal("grant released on the service with a holder left")
		}
		if err := h2.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, ok := srv.Holder("x"); ok || len(conn.Calls(memlock.OpRelease)) != 1 {
			t.Fatal("last release did not give the grant back exactly once")
		}
		h3 := mustAcquire(t, c, "x", lockclient.WithReentrant())
		if h3.FencingToken() <= h2.FencingToken() {
			t.Fatal("reentrant acquire after full release reused the old grant")
		}
	})
}

func TestReentrantAcquiresRacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		conn := srv.Connect()
		conn.SetLatency(10 * time.Millisecond)
		c := newClient(t, conn)
		var wg sync.WaitGroup
		tokens := make([]int64, 4)
		for i := range tokens {
			wg.Go(func() {
				h, err := c.Acquire(t.Context(), "x", lockclient.WithTTL(ttl), lockclient.WithReentrant())
				if err != nil {
					t.Errorf("reentrant acquire %d: %v", i, err)
					return
				}
				tokens[i] = h.FencingToken()
			})
		}
		wg.Wait()
		for _, tok := range tokens {
			if tok != tokens[0] {
				t.Fatalf("concurrent reentrant acquires got tokens %v", tokens)
			}
		}
		if n := len(conn.Calls(memlock.OpAcquire)); n != 1 {
			t.Fatalf("%d acquire calls for concurrent reentrant acquires, want 1", n)
		}
	})
}

func TestReentrantTryAcquireDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memlock.NewServer().Connect()
		conn.SetLatency(time.Second)
		c := newClient(t, conn)
		go func() {
			if _, err := c.Acquire(context.Background(), "x", lockclient.WithTTL(ttl), lockclient.WithReentrant()); err != nil {
				t.Errorf("first reentrant acquire: %v", err)
			}
		}()
		synctest.Wait() // the first acquire is in flight
		start := time.Now()
		_, err := c.TryAcquire(t.Context(), "x", lockclient.WithTTL(ttl), lockclient.WithReentrant())
		if !errors.Is(err, lockclient.ErrNotAcquired) || time.Since(start) != 0 {
			t.Fatalf("reentrant TryAcquire during an acquire in flight = %v after %v", err, time.Since(start))
		}
		time.Sleep(2 * time.Second)
		h, err := c.TryAcquire(t.Context(), "x", lockclient.WithTTL(ttl), lockclient.WithReentrant())
		if err != nil {
			t.Fatalf("reentrant TryAcquire once held = %v", err)
		}
		if n := len(conn.Calls(memlock.OpAcquire)); n != 1 || !h.IsHeld() {
			t.Fatalf("%d acquire calls; joined handle held: %v", n, h.IsHeld())
		}
	})
}

func TestReentrantLossReachesEveryHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		c := newClient(t, srv.Connect())
		var r1, r2, r3 lostRecorder
		h1 := mustAcquire(t, c, "x", lockclient.WithReentrant(), lockclient.WithOnLost(r1.onLost))
		h2 := mustAcquire(t, c, "x", lockclient.WithReentrant(), lockclient.WithOnLost(r2.onLost))
		h3 := mustAcquire(t, c, "x", lockclient.WithReentrant(), lockclient.WithOnLost(r3.onLost))
		if err := h3.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		srv.Revoke("x")
		synctest.Wait()
		r1.check(t, 1)
		r2.check(t, 1)
		r3.check(t, 0) // released before the loss
		checkLost(t, h1)
		checkLost(t, h2)
		h4 := mustAcquire(t, c, "x", lockclient.WithReentrant())
		if h4.FencingToken() <= h1.FencingToken() {
			t.Fatal("reentrant acquire after a loss joined the lost grant")
		}
	})
}

func TestReleaseIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		conn := srv.Connect()
		c := newClient(t, conn)
		var rec lostRecorder
		h := mustAcquire(t, c, "x", lockclient.WithOnLost(rec.onLost))
		for i := range 3 {
			if err := h.Release(t.Context()); err != nil {
				t.Fatalf("Release #%d: %v", i+1, err)
			}
		}
		if n := len(conn.Calls(memlock.OpRelease)); n != 1 {
			t.Fatalf("%d release calls to the service, want 1", n)
		}
		if h.IsHeld() || !h.ValidUntil().IsZero() {
			t.Fatal("released handle looks held")
		}
		if cause := context.Cause(h.Context()); cause == nil || errors.Is(cause, lockclient.ErrLost) {
			t.Fatalf("released handle's Context cause = %v", cause)
		}
		if _, ok := srv.Holder("x"); ok {
			t.Fatal("grant still on the service")
		}
		time.Sleep(time.Minute)
		rec.check(t, 0)
		if n := len(conn.Calls(memlock.OpRenew)); n != 0 {
			t.Fatalf("%d renewals after release", n)
		}
	})
}

func TestReleaseKeepsNewerGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		connA := srv.Connect()
		a, b := newClient(t, connA), newClient(t, srv.Connect())
		ha := mustAcquire(t, a, "x")
		connA.SetPartitioned(true)
		time.Sleep(ttl + time.Second) // A is lost; its lease expired on the service
		hb := mustAcquire(t, b, "x")
		connA.SetPartitioned(false)
		if err := ha.Release(t.Context()); !errors.Is(err, lockclient.ErrLost) {
			t.Fatalf("Release after loss = %v", err)
		}
		if tok, ok := srv.Holder("x"); !ok || tok != hb.FencingToken() {
			t.Fatal("the old holder's release removed the new grant")
		}
	})
}

func TestInvalidOptions(t *testing.T) {
	conn := memlock.NewServer().Connect()
	c := newClient(t, conn)
	cases := []struct {
		name string
		lock string
		opts []lockclient.AcquireOption
	}{
		{"zero TTL", "x", []lockclient.AcquireOption{lockclient.WithTTL(0)}},
		{"negative TTL", "x", []lockclient.AcquireOption{lockclient.WithTTL(-time.Second)}},
		{"TTL below backend minimum", "x", []lockclient.AcquireOption{lockclient.WithTTL(time.Microsecond)}},
		{"negative wait", "x", []lockclient.AcquireOption{lockclient.WithWait(-time.Second)}},
		{"nil OnLost", "x", []lockclient.AcquireOption{lockclient.WithOnLost(nil)}},
		{"drift swallowing TTL", "x", []lockclient.AcquireOption{lockclient.WithTTL(5 * time.Millisecond)}},
		{"empty name", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Acquire(t.Context(), tc.lock, tc.opts...); !errors.Is(err, lockclient.ErrInvalidOption) {
				t.Errorf("Acquire = %v, want ErrInvalidOption", err)
			}
			if _, err := c.TryAcquire(t.Context(), tc.lock, tc.opts...); !errors.Is(err, lockclient.ErrInvalidOption) {
				t.Errorf("TryAcquire = %v, want ErrInvalidOption", err)
			}
		})
	}
	if n := len(conn.Calls(memlock.OpAcquire)); n != 0 {
		t.Fatalf("%d calls reached the service with invalid options", n)
	}
	for _, opts := range [][]lockclient.Option{
		{lockclient.WithDriftAllowance(-time.Millisecond)},
		{lockclient.WithTransportErrorBudget(0)},
	} {
		if _, err := lockclient.New(conn, opts...); !errors.Is(err, lockclient.ErrInvalidOption) {
			t.Errorf("New with an invalid option = %v", err)
		}
	}
	if _, err := lockclient.New(nil); !errors.Is(err, lockclient.ErrInvalidOption) {
		t.Errorf("New(nil) = %v", err)
	}
}

func TestTransportErrorOnAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memlock.NewServer().Connect()
		conn.SetPartitioned(true)
		c := newClient(t, conn)
		_, err := c.Acquire(t.Context(), "x")
		if !errors.Is(err, memlock.ErrPartitioned) || errors.Is(err, lockclient.ErrNotAcquired) {
			t.Fatalf("Acquire over a partition = %v", err)
		}
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memlock.NewServer()
		c, err := lockclient.New(srv.Connect())
		if err != nil {
			t.Fatal(err)
		}
		var rec lostRecorder
		h := mustAcquire(t, c, "y", lockclient.WithOnLost(rec.onLost))
		mustAcquire(t, newClient(t, srv.Connect()), "x")
		waitErr := make(chan error, 1)
		go func() {
			_, err := c.Acquire(context.Background(), "x")
			waitErr <- err
		}()
		synctest.Wait()
		if err := c.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-waitErr; !errors.Is(err, lockclient.ErrClosed) {
			t.Fatalf("pending Acquire after Close = %v", err)
		}
		if cause := context.Cause(h.Context()); !errors.Is(cause, lockclient.ErrClosed) {
			t.Fatalf("held handle's Context cause after Close = %v", cause)
		}
		if err := h.Release(t.Context()); err != nil {
			t.Fatalf("Release after Close = %v", err)
		}
		if _, ok := srv.Holder("y"); ok || srv.Waiters("x") != 0 {
			t.Fatal("Close left the grant or the waiter on the service")
		}
		if _, err := c.Acquire(t.Context(), "x"); !errors.Is(err, lockclient.ErrClosed) {
			t.Fatalf("Acquire after Close = %v", err)
		}
		if err := c.Close(t.Context()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		rec.check(t, 0)
	})
}
